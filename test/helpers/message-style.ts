// The mechanical part of the message style written down at the top of src/contract/errors.ts: what a
// test can check on a finished message (or on the literal text of one in the source) without reading it.

/** Punctuation that never belongs together in a sentence; an ellipsis ('...') and paths ('./x') are fine. */
const DOUBLED: Array<[RegExp, string]> = [
  [/(?<!\.)\.\.(?!\.)/, "a doubled period '..'"],
  [/\.\s+\.(?!\.)/, "a period after a period ('. .')"],
  [/[!?,;:]\.(?![./\w])/, "a period after other punctuation ('!.', ':.', ',.')"],
  [/(?<!\.)\.:(?!\/)/, "a colon after a period ('.:')"],
  [/\s\.(?![.\w/])/, "a space before a period (' .')"],
  [/\s[,;:](?!\w)/, "a space before a comma, semicolon or colon (' ,')"],
  [/[,;:]{2}/, "doubled commas, semicolons or colons (',,', ';;', '::')"],
  [/ {2}/, 'two spaces in a row'],
];

/**
 * What breaks the style in `message`: empty when it is a run of full sentences ending with one period,
 * without doubled punctuation or trailing space.
 *
 * @example
 * messageProblems("Run 'a' failed: upstream 503.."); // ["a doubled period '..'"]
 */
export function messageProblems(message: string): string[] {
  const problems: string[] = [];
  if (message.trim() === '') return ['it is empty'];
  if (/\s$/.test(message)) problems.push('it ends with whitespace');
  if (/^\s/.test(message)) problems.push('it starts with whitespace');
  if (!/[^.]\.$/.test(message) && !/\.\)\.$/.test(message)) problems.push('it does not end with one period');
  if (!/^[A-Z'`"@(0-9-]/.test(message) && !/^[a-z][\w.]*\(/.test(message) && !/^[a-z]\w*[A-Z.]\w*/.test(message)) {
    problems.push('it does not start with a capital letter, a quote or a code name');
  }
  problems.push(...fragmentProblems(message));
  return problems;
}

/** The doubled-punctuation problems of a piece of a message (no rule about how it starts or ends). */
export function fragmentProblems(text: string): string[] {
  return DOUBLED.filter(([pattern]) => pattern.test(text)).map(([, what]) => what);
}

// Imperatives that start a piece of advice ("Pass { runId }", "Resume it with ...", "Fix the cause and call ...").
const ADVICE_VERBS =
  'add|adopt|approve|await|bind|bump|build|call|cancel|change|check|choose|configure|create|declare|decorate|define|delete|drop|fix|finish|fork|give|install|keep|let|list|load|make|mark|move|name|omit|open|pass|pick|point|put|raise|register|remove|rename|restore|resume|retry|return|revert|run|send|set|start|stop|store|try|turn|use|wait|wrap';
const ADVICE = new RegExp(`^(?:(?:if|to|when|once|unless|for|with|on)\\b[^,]*,\\s*)?(?:then\\s+|or\\s+|and\\s+|so\\s+|instead,?\\s+|either\\s+)?(?:${ADVICE_VERBS})\\b`, 'i');

/**
 * True when a clause after the first one is advice: it starts with an imperative ("Resume it ...",
 * "If it did not, pass ...", "To run it again, call ..."), so the message says what to do next.
 *
 * @example
 * hasAdvice("Run 'a' does not exist. Start it with waypoint.run(...)."); // true
 */
export function hasAdvice(message: string): boolean {
  const clauses = message.split(/(?<=[.;:!?])\s+|,\s+(?:or|and|then)\s+|\s+or\s+(?=[a-z]+\s)/).slice(1);
  return clauses.some((clause) => ADVICE.test(clause.trim().replace(/^[(`'"]+/, '')));
}
