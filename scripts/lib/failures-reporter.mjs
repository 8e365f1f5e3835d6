// A second reporter for scripts/run-tests.js: one JSON line per failed test (a file that timed out or exited
// non-zero counts as one), so that the runner can repeat every failure at the very end of a long log, the part
// of it CI shows.
export default async function* failures(source) {
  for await (const event of source) {
    if (event.type !== 'test:fail') continue;
    const { name, file, line, details } = event.data;
    const error = details?.error;
    // A suite that failed only because a test in it did says nothing the test's own line does not.
    if (error?.failureType === 'subtestsFailed') continue;
    const cause = error?.cause ?? error;
    const message = String(cause?.message ?? cause ?? 'failed')
      .split('\n')
      .slice(0, 6)
      .join('\n');
    yield JSON.stringify({ name, file: file ?? null, line: line ?? null, message }) + '\n';
  }
}
