// The guard of the message style written at the top of src/contract/errors.ts (issue 35). Three checks:
// 1. every exported error class (a WaypointError subclass of any package entry point) is built with
//    representative arguments, once with a cause whose message ends in a period and once without, and its
//    message is checked mechanically: one final period, no doubled punctuation, the run id (and step) quoted
//    when the error carries them, an advice clause unless the code is listed as having no remedy;
// 2. every message literal in src/ passed to a typed error (new WaypointError(code, '...'), usageError('...'),
//    new HttpError(status, code, '...'), super('CODE', '...'), ...) is checked the same way on its text;
// 3. every plain `new Error(` in src/ carries a `// plain Error:` comment saying why it is not a typed error
//    (an internal invariant, or the clause a typed error wraps as its cause).
// A new error class fails check 1 until it gets a factory here.
import { strict as assert } from 'node:assert';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import * as root from '../../src/index';
import * as tiered from '../../src/entry/tiered';
import * as queue from '../../src/queue/index';
import * as ui from '../../src/ui/index';
import * as langgraph from '../../src/integrations/langgraph/index';
import * as ai from '../../src/integrations/ai/index';
import * as http from '../../src/http/index';
import { CliError, EXIT, runNotFound, usageError } from '../../src/cli/exit-codes';
import { createState } from '../../src/core/state/state-schema';
import { checkSignalName } from '../../src/contract/signal-rules';
import { checkStreamAppend } from '../../src/contract/run-stream';
import { serialize } from '../../src/core/state/serializer';
import { deserialize } from '../../src/core/state/value-decoder';
import { readPlan } from '../../src/core/plan/plan-reader';
import { hasAdvice, fragmentProblems, messageProblems } from '../helpers/message-style';

const E = root;
const RUN = 'run-7f3a';
const STEP = 'Research/gather';

type Factory = (cause: Error) => unknown[];

/** What a call throws (the factories build some errors through the code that raises them). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to throw');
}

/** One factory per exported error class, by class name: representative arguments, every optional part once. */
const FACTORIES: Record<string, Factory> = {
  PipelineDefinitionError: () => [thrown(() => readPlan(class NotAPipeline {})), thrown(() => readPlan(undefined as never))],
  InvalidStateError: () => [thrown(() => createState(undefined, 42, { runId: RUN }))],
  UndeclaredStateError: () => [
    new E.UndeclaredStateError(
      `Step '${STEP}' of run '${RUN}' returned property 'x', which state class S of pipeline 'p' does not declare (strictState is on). ` +
        'Nothing was recorded and the step is not retried: declare it on S, return only declared properties, or turn strictState off.',
      ['x'],
      { runId: RUN, step: STEP },
    ),
  ],
  SerializationError: () => [thrown(() => serialize({ f: () => 1 }, { runId: RUN, step: STEP }))],
  UndecodableValueError: () => [thrown(() => deserialize('{not json')), thrown(() => deserialize('{"$wp":"no-such-tag"}'))],
  StateMutationError: () => [new E.StateMutationError("it set 'title'", { runId: RUN, step: STEP }), new E.StateMutationError("it set 'title'")],
  InjectionError: () => [
    new E.InjectionError(`Agent 'Writer' of run '${RUN}' could not be created: 'Llm' is not bound in the container. Bind it in a ContainerModule. Nothing ran.`, { runId: RUN }),
  ],
  RunNotFoundError: () => [new E.RunNotFoundError(RUN)],
  PipelineMismatchError: () => [new E.PipelineMismatchError(RUN, 'Report', 'Audit')],
  InputMismatchError: () => [new E.InputMismatchError(RUN)],
  VersionMismatchError: () => [
    new E.VersionMismatchError(RUN, 'Report', '1.0.0', '2.0.0', 'no checkpoint migration path is registered'),
    new E.VersionMismatchError(RUN, 'Report', '1.0.0', '2.0.0'),
  ],
  PlanMismatchError: () => [
    new E.PlanMismatchError(RUN, "recorded step 1 is 'A/a' but the pipeline's step 1 is 'B/b' under the same version 1.0.0. Bump the pipeline version and register a migration."),
  ],
  RunLockedError: () => [new E.RunLockedError(RUN, 'worker-2', new Date('2026-01-01T00:00:00Z')), new E.RunLockedError(RUN, null, null)],
  LeaseLostError: () => [new E.LeaseLostError(RUN, 3, STEP), new E.LeaseLostError(RUN, 3)],
  InvalidSignalNameError: () => [
    thrown(() => checkSignalName('', { runId: RUN, step: STEP })),
    thrown(() => checkSignalName('a\nb', { runId: RUN })),
    thrown(() => checkSignalName(' x')),
  ],
  InvalidStreamEventError: () => [
    thrown(() => checkStreamAppend(RUN, [])),
    thrown(() => checkStreamAppend(RUN, [{ kind: 'part', step: STEP, attempt: 0, data: '1' }])),
    new E.InvalidStreamEventError(RUN, 2, 'its step must be a non-empty string.'),
  ],
  SignalPayloadTooLargeError: () => [new E.SignalPayloadTooLargeError(RUN, 'approval', 300_000, 262_144)],
  ArchiveUnavailableError: (cause) => [
    new E.ArchiveUnavailableError('s3://agent-runs/waypoint/', 'write an object', cause, RUN),
    new E.ArchiveUnavailableError('directory ./archive', 'list its runs', cause.message),
  ],
  NotArchivedError: () => [new E.NotArchivedError(RUN, 'the archive holds nothing of it')],
  StreamsUnsupportedError: () => [new E.StreamsUnsupportedError(RUN, 'MyStore')],
  StreamLimitError: () => [
    new E.StreamLimitError(RUN, 'Research/gather', 'part-bytes', 70_000, 65_536),
    new E.StreamLimitError(RUN, 'Research/gather', 'events', 100_000, 100_000),
  ],
  StepFailedError: (cause) => [new E.StepFailedError(RUN, STEP, 3, cause), new E.StepFailedError(RUN, STEP, 1, cause.message)],
  NonRetryableError: (cause) => [new E.NonRetryableError('The invoice was already paid. Check the ledger before you resume the run.', cause)],
  StepTimeoutError: () => [new E.StepTimeoutError(RUN, STEP, 5000)],
  RunCancelledError: () => [new E.RunCancelledError(RUN)],
  RunNotRetriedError: () => [new E.RunNotRetriedError(RUN)],
  SideEffectOutsideRunError: () => [new E.SideEffectOutsideRunError('Mailer.send', 'send-email')],
  SideEffectFailedError: (cause) => [new E.SideEffectFailedError(RUN, STEP, 'send-email', 'op-1', cause)],
  CheckpointCorruptedError: (cause) => [new E.CheckpointCorruptedError(RUN, 4, cause.message), new E.CheckpointCorruptedError(RUN, 4, 'its SHA-256 does not match')],
  StoreUnavailableError: (cause) => [new E.StoreUnavailableError('postgres', 'appendStep', cause, RUN), new E.StoreUnavailableError('postgres', 'init', cause)],
  StoreRejectedError: (cause) => [new E.StoreRejectedError('postgres', 'appendStep', cause, RUN), new E.StoreRejectedError('redis', 'putRun', cause)],
  TierDivergedError: () => [new tiered.TierDivergedError(RUN, 5, 7, 6)],
  TierCopyNotDroppedError: (cause) => [new tiered.TierCopyNotDroppedError(RUN, `wp:run:${RUN}`, cause)],
  TransactionsUnsupportedError: () => [new E.TransactionsUnsupportedError(RUN, STEP, 'charge', "MemoryCheckpointStore, backend 'memory'")],
  EffectAfterTransactionError: () => [new E.EffectAfterTransactionError(RUN, STEP, 'notify', 'sqlite')],
  NoTransactionError: () => [new E.NoTransactionError('notify'), new E.NoTransactionError()],
  TransactionEndedError: () => [new E.TransactionEndedError(RUN, STEP, 'charge'), new E.TransactionEndedError(RUN)],
  TransactionAbortedError: (cause) => [new E.TransactionAbortedError(RUN, cause)],
  ParallelConflictError: () => [new E.ParallelConflictError(RUN, 'review', 'summary', 'review[0]', 'review[1]')],
  LoopLimitError: () => [new E.LoopLimitError(RUN, 'refine', 5)],
  UnknownBranchError: () => [new E.UnknownBranchError(RUN, 'route', 'fr', ['en', 'de'])],
  SelectorError: (cause) => [new E.SelectorError(RUN, 'refine', 'until condition', cause), new E.SelectorError(RUN, 'route', 'selector returned 42, which is not a string')],
  ItemFailedError: (cause) => [new E.ItemFailedError(RUN, 'reports', 2, cause)],
  NoActiveOperationError: () => [new E.NoActiveOperationError()],
  DurableRequestChangedError: () => [
    new ai.DurableRequestChangedError(RUN, STEP, 'draft', 'a'.repeat(64), 'b'.repeat(64), "'messages[0].content' changed"),
    new ai.DurableRequestChangedError(RUN, STEP, 'draft', 'a'.repeat(64), 'b'.repeat(64)),
  ],
  QueueUnavailableError: (cause) => [new queue.QueueUnavailableError('send', cause, RUN), new queue.QueueUnavailableError('fetch', cause)],
  QueueNotConfiguredError: () => [new queue.QueueNotConfiguredError('enqueue()')],
  UiConfigError: () => [new ui.UiConfigError('The UI token has 8 characters; use at least 24 (e.g. `openssl rand -hex 24`).')],
  HttpError: () => [new ui.HttpError(400, 'BAD_QUERY', "Query parameter 'limit' must be an integer from 1 to 1000; got 'abc'.")],
  HttpConfigError: () => [new http.HttpConfigError('approvalKey has 8 bytes; use at least 32 (e.g. `openssl rand -hex 32`).')],
  UiListenError: (cause) => [new ui.UiListenError('127.0.0.1', 4317, cause)],
  UiAssetsMissingError: (cause) => [new ui.UiAssetsMissingError('/pkg/dist/src/ui/browser/page.js', cause)],
  LangGraphCheckpointCorruptedError: (cause) => [
    new langgraph.LangGraphCheckpointCorruptedError({ threadId: 't-1', checkpointNs: '', checkpointId: 'c-9' }, 'checkpoint', cause.message),
  ],
  LangGraphConfigError: () => [new langgraph.LangGraphConfigError('put', "the config has no 'configurable' object (thread_id is required)")],
  LangGraphParentMissingError: () => [new langgraph.LangGraphParentMissingError({ threadId: 't-1', checkpointNs: '', checkpointId: 'c-9' }, 'c-8', ['messages'])],
  CliError: (cause) => [
    usageError("The --since value 'yesterday' is not a duration: use a number and a unit, e.g. 30s, 15m, 2h, 7d or 1h30m."),
    runNotFound(RUN, 'sqlite:./.waypoint/waypoint.db'),
    new CliError('STORE_UNAVAILABLE', `Cannot reach postgres://db/x: ${E.reasonOf(cause)}. Check that the store is running.`, EXIT.STORE_UNAVAILABLE),
  ],
};

/**
 * Codes whose message has no advice clause, each with why: the caller has nothing to do, or the text
 * comes from the user (whose own advice it is).
 */
const NO_REMEDY: Record<string, string> = {
  LEASE_LOST: 'informational: the new owner carries the run on, this executor only stops',
  NON_RETRYABLE: "the message is the caller's own",
  BAD_QUERY: 'checked by the source scan: the message names the parameter and what it must be',
};

type ErrorClass = abstract new (...args: never[]) => unknown;

/** Every exported class that extends WaypointError, by name (one class can be exported by several entries). */
function exportedErrorClasses(): Map<string, ErrorClass> {
  const found = new Map<string, ErrorClass>();
  for (const mod of [root, tiered, queue, ui, http, langgraph, ai, { CliError }] as Array<Record<string, unknown>>) {
    for (const value of Object.values(mod)) {
      if (typeof value === 'function' && value.prototype instanceof E.WaypointError) found.set(value.name, value as ErrorClass);
    }
  }
  return found;
}

const CAUSES = [new Error('upstream answered 503.'), new Error('upstream answered 503')];

describe('error messages follow the style of src/contract/errors.ts', () => {
  it('every exported error class has a factory here', () => {
    const missing = [...exportedErrorClasses().keys()].filter((name) => !(name in FACTORIES)).sort();
    assert.deepEqual(missing, [], `add a factory for ${missing.join(', ')} to FACTORIES`);
    const stale = Object.keys(FACTORIES).filter((name) => !exportedErrorClasses().has(name));
    assert.deepEqual(stale, []);
  });

  for (const [name, factory] of Object.entries(FACTORIES)) {
    it(`${name}: one final period, no doubled punctuation, names its run and step, says what to do`, () => {
      for (const cause of CAUSES) {
        const built = factory(cause);
        assert.ok(built.length > 0);
        for (const error of built) {
          assert.ok(error instanceof E.WaypointError, `${name}: the factory built ${String(error)}`);
          assert.equal(error.constructor.name, name, `${name}: the factory built a ${error.constructor.name}: ${error.message}`);
          const { message, code } = error;
          assert.deepEqual(messageProblems(message), [], `${code}: ${message}`);
          assert.ok(!/503\.[^\s)]/.test(message) && !message.includes('503..'), `${code}: the cause's period leaked: ${message}`);
          if (error.runId !== undefined) assert.ok(message.includes(`'${error.runId}'`), `${code}: the run id is not named, quoted: ${message}`);
          if (error.step !== undefined) assert.ok(message.includes(`'${error.step}'`), `${code}: the step is not named, quoted: ${message}`);
          if (!(code in NO_REMEDY)) assert.ok(hasAdvice(message), `${code}: no advice clause (what to do next): ${message}`);
        }
      }
    });
  }

  it('the style checks themselves catch what they are for', () => {
    assert.deepEqual(messageProblems("Run 'a' failed: upstream 503.."), ['it does not end with one period', "a doubled period '..'"]);
    assert.ok(messageProblems("Run 'a' failed: timeout.: retry").length > 0);
    assert.ok(messageProblems("Run 'a' failed .").length > 0);
    assert.ok(messageProblems("Run 'a' failed!.").length > 0);
    assert.ok(messageProblems("Run 'a' failed. ").length > 0);
    assert.ok(messageProblems("run 'a' failed").length > 0);
    assert.deepEqual(messageProblems("Pass Waypoint.create({ pipelines: [...] }) or fix ./x.db: it is 'a..b'."), ["a doubled period '..'"]);
    assert.deepEqual(messageProblems('Call waypoint.enqueue(...) again.'), []);
    assert.equal(hasAdvice("Run 'a' does not exist. Start it with waypoint.run()."), true);
    assert.equal(hasAdvice("Run 'a' does not exist. It was deleted."), false);
  });
});

// ---- the source scan --------------------------------------------------------------------------------

const SRC = join(__dirname, '..', '..', '..', 'src');

function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** The end of the string, template or comment that starts at `i` (the index after it). */
function skipToken(text: string, i: number): number {
  const c = text[i];
  if (c === "'" || c === '"') {
    for (let j = i + 1; j < text.length; j++) {
      if (text[j] === '\\') j++;
      else if (text[j] === c) return j + 1;
    }
  }
  if (c === '`') {
    for (let j = i + 1; j < text.length; j++) {
      if (text[j] === '\\') j++;
      else if (text[j] === '`') return j + 1;
      else if (text[j] === '$' && text[j + 1] === '{') j = skipBalanced(text, j + 1, '{', '}') - 1;
    }
  }
  if (c === '/' && text[i + 1] === '/') return text.indexOf('\n', i) === -1 ? text.length : text.indexOf('\n', i);
  if (c === '/' && text[i + 1] === '*') return text.indexOf('*/', i) + 2;
  return i + 1;
}

/** The index after the bracket that closes the one at `i`. */
function skipBalanced(text: string, i: number, open: string, close: string): number {
  let depth = 0;
  for (let j = i; j < text.length;) {
    const c = text[j];
    if (c === open) depth++;
    else if (c === close && --depth === 0) return j + 1;
    if (c === "'" || c === '"' || c === '`' || (c === '/' && (text[j + 1] === '/' || text[j + 1] === '*'))) j = skipToken(text, j);
    else j++;
  }
  return text.length;
}

/** The top-level comma-separated arguments of the call whose '(' is at `open`. */
function callArguments(text: string, open: number): string[] {
  const end = skipBalanced(text, open, '(', ')') - 1;
  const args: string[] = [];
  let start = open + 1;
  for (let j = open + 1; j < end;) {
    const c = text[j];
    if (c === '(' || c === '[' || c === '{') j = skipBalanced(text, j, c, c === '(' ? ')' : c === '[' ? ']' : '}');
    else if (c === "'" || c === '"' || c === '`' || (c === '/' && (text[j + 1] === '/' || text[j + 1] === '*'))) j = skipToken(text, j);
    else if (c === ',') {
      args.push(text.slice(start, j).trim());
      start = ++j;
    } else j++;
  }
  const last = text.slice(start, end).trim();
  if (last !== '') args.push(last);
  return args;
}

/** The top-level `+` operands of an expression. */
function operands(expression: string): string[] {
  const parts: string[] = [];
  let start = 0;
  for (let j = 0; j < expression.length;) {
    const c = expression[j];
    if (c === '(' || c === '[' || c === '{') j = skipBalanced(expression, j, c, c === '(' ? ')' : c === '[' ? ']' : '}');
    else if (c === "'" || c === '"' || c === '`' || (c === '/' && (expression[j + 1] === '/' || expression[j + 1] === '*'))) j = skipToken(expression, j);
    else if (c === '+') {
      parts.push(expression.slice(start, j).trim());
      start = ++j;
    } else j++;
  }
  parts.push(expression.slice(start).trim());
  return parts.filter((p) => p !== '');
}

/** The text of a string or template literal, each `${...}` shown as `X`; null for anything else. */
function literalText(operand: string): string | null {
  const q = operand[0];
  if ((q === "'" || q === '"') && skipToken(operand, 0) === operand.length) return operand.slice(1, -1).replace(/\\(.)/g, '$1');
  if (q === '`' && skipToken(operand, 0) === operand.length) {
    let out = '';
    for (let j = 1; j < operand.length - 1; j++) {
      if (operand[j] === '\\') out += operand[++j];
      else if (operand[j] === '$' && operand[j + 1] === '{') {
        j = skipBalanced(operand, j + 1, '{', '}') - 1;
        out += 'X';
      } else out += operand[j];
    }
    return out;
  }
  return null;
}

/** Which argument is the message, for every constructor or helper that takes a whole message. */
const MESSAGE_ARGUMENT: Record<string, number> = {
  WaypointError: 1,
  CliError: 1,
  HttpError: 2,
  usageError: 0,
  sendError: 3,
  PipelineDefinitionError: 0,
  InvalidStateError: 0,
  UndeclaredStateError: 0,
  SerializationError: 0,
  UndecodableValueError: 0,
  InjectionError: 0,
  NonRetryableError: 0,
  UiConfigError: 0,
  HttpConfigError: 0,
  PlanMismatchError: 1,
};

/** Constructors whose message continues a sentence they start ("Run 'r1': <message>"). */
const CONTINUES = new Set(['PlanMismatchError']);

interface Site {
  where: string;
  callee: string;
  message: string;
}

/** Every call in src/ that passes a whole message, with the message expression. */
function messageSites(): Site[] {
  const sites: Site[] = [];
  for (const file of sourceFiles()) {
    const text = readFileSync(file, 'utf8');
    const call = /\b(?:new\s+(\w+)|(usageError|sendError)|(super))\s*\(/g;
    for (let m = call.exec(text); m; m = call.exec(text)) {
      const callee = m[1] ?? m[2] ?? m[3];
      const args = callArguments(text, m.index + m[0].length - 1);
      let index = MESSAGE_ARGUMENT[callee];
      // super('SOME_CODE', message, ...) of a WaypointError subclass.
      if (callee === 'super' && /^'[A-Z][A-Z_]+'$/.test(args[0] ?? '')) index = 1;
      if (index === undefined || args[index] === undefined) continue;
      const line = text.slice(0, m.index).split('\n').length;
      sites.push({ where: `${relative(join(SRC, '..'), file)}:${line}`, callee, message: args[index] });
    }
  }
  return sites;
}

/** What is wrong with the message expression of one site (only its literal text can be judged). */
function siteProblems(site: Site): string[] {
  const parts = operands(site.message);
  const texts = parts.map(literalText);
  const problems: string[] = [];
  // A message ending with an interpolation (a sentence built elsewhere) is judged where that is built.
  const last = texts[texts.length - 1];
  if (last !== null && last !== undefined && !/X$/.test(last) && !/[^.]\.$/.test(last)) problems.push('it does not end with one period');
  if (last !== null && /\s$/.test(last ?? '')) problems.push('it ends with whitespace');
  const first = texts[0];
  const continuation = CONTINUES.has(site.callee);
  if (!continuation && first !== null && first !== undefined && /^[a-z]/.test(first) && !/^[a-z]\w*([A-Z.(]|: )/.test(first)) {
    problems.push('it does not start with a capital letter, a quote or a code name');
  }
  for (const text of texts) if (text !== null) problems.push(...fragmentProblems(text.replace(/X/g, 'x')));
  // Identifiers are quoted: run 'abc', step 'Agent/step'.
  if (texts.some((t) => t !== null && /\b[Rr]un X|\b[Ss]tep X|\bthread X/.test(t))) problems.push("a run id or step is not quoted (run 'X')");
  // A caught error's message goes through reasonOf, which drops its closing period.
  if (/\$\{[^}]*\b(?:error|err|cause|e)\.message\b[^}]*\}|String\((?:error|err|cause)\)\}/.test(site.message) && !/reasonOf\(/.test(site.message)) {
    problems.push("a caught error's message is interpolated without reasonOf()");
  }
  return problems;
}

describe('message literals in src/', () => {
  it('finds the message sites (the scan works)', () => {
    const sites = messageSites();
    assert.ok(sites.length > 100, `only ${sites.length} sites found`);
    assert.ok(sites.some((s) => s.callee === 'usageError'));
    assert.ok(sites.some((s) => s.callee === 'HttpError'));
    assert.ok(sites.some((s) => s.callee === 'sendError'));
    assert.ok(sites.some((s) => s.callee === 'super'));
    assert.deepEqual(siteProblems({ where: 'x', callee: 'WaypointError', message: "'Run failed: retry later'" }), ['it does not end with one period']);
    assert.deepEqual(siteProblems({ where: 'x', callee: 'WaypointError', message: '`Run ${runId} failed: ${error.message}`' }), [
      "a run id or step is not quoted (run 'X')",
      "a caught error's message is interpolated without reasonOf()",
    ]);
  });

  it('every message literal passed to a typed error follows the style', () => {
    const bad = messageSites()
      .map((site) => ({ site, problems: siteProblems(site) }))
      .filter((s) => s.problems.length > 0)
      .map(({ site, problems }) => `${site.where} ${site.callee}: ${problems.join('; ')}\n    ${site.message.slice(0, 160)}`);
    assert.equal(bad.length, 0, `${bad.length} message(s) break the style:\n${bad.join('\n')}`);
  });

  it('every plain `new Error(` in src/ says why it is not a typed WaypointError', () => {
    const unexplained: string[] = [];
    for (const file of sourceFiles()) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (!/\bnew (?:Type|Range)?Error\(/.test(line) || /^\s*(\*|\/\/|\/\*)/.test(line)) return;
        const near = lines.slice(Math.max(0, i - 3), i + 1).join('\n');
        if (!/\/\/ plain Error: \S/.test(near)) unexplained.push(`${relative(join(SRC, '..'), file)}:${i + 1}: ${line.trim()}`);
      });
    }
    assert.equal(unexplained.length, 0, `make each a typed WaypointError with a code, or add \`// plain Error: <why>\` on the line or the lines above:\n${unexplained.join('\n')}`);
  });
});
