/** Default key prefix of the LangGraph saver on Redis. */
export const DEFAULT_LANGGRAPH_KEY_PREFIX = 'waypoint:lg:';

/** Separates the parts of an index member; identifiers containing it are refused by the saver. */
export const SEP = '\u0000';

/**
 * Key names and index members of the LangGraph saver on Redis, as pure functions of a prefix. Every key
 * of one thread carries the hash tag `{threadId}`, so on a Redis Cluster a thread lives in one slot (the
 * two global indexes do not: give the prefix a hash tag of its own on a cluster, e.g. `lg:{lg}:`).
 *
 * Layout (prefix `waypoint:lg:`):
 * - `…thread:{t}:checkpoints`: hash, field `ns NUL id` -> JSON checkpoint record.
 * - `…thread:{t}:blobs`: hash, field address (SHA-256) -> JSON blob record.
 * - `…thread:{t}:writes:<ns NUL id>`: hash, field `task NUL idx` -> JSON write record (one per checkpoint).
 * - `…thread:{t}:writekeys`: set of that thread's writes keys (so deleting a thread never scans).
 * - `…thread:{t}:by-ns`: sorted set (all scores 0, ordered by member bytes) of `ns NUL id`: newest of a namespace.
 * - `…thread:{t}:by-id`: sorted set of `id NUL ns`: the thread's checkpoints newest first.
 * - `…checkpoints`: sorted set of `id NUL thread NUL ns`: every checkpoint, newest first.
 * - `…threads`: sorted set of thread ids scored by the time of their last checkpoint (ms).
 *
 * @example
 * const keys = langGraphRedisKeys('app:lg:');
 * keys.checkpoints('t1'); // 'app:lg:thread:{t1}:checkpoints'
 */
export interface LangGraphRedisKeys {
  readonly prefix: string;
  checkpoints(threadId: string): string;
  blobs(threadId: string): string;
  writes(threadId: string, checkpointNs: string, checkpointId: string): string;
  writeKeys(threadId: string): string;
  byNamespace(threadId: string): string;
  byId(threadId: string): string;
  allCheckpoints(): string;
  threads(): string;
}

export function langGraphRedisKeys(prefix: string = DEFAULT_LANGGRAPH_KEY_PREFIX): LangGraphRedisKeys {
  const thread = (threadId: string) => `${prefix}thread:{${threadId}}`;
  return {
    prefix,
    checkpoints: (t) => `${thread(t)}:checkpoints`,
    blobs: (t) => `${thread(t)}:blobs`,
    writes: (t, ns, id) => `${thread(t)}:writes:${checkpointField(ns, id)}`,
    writeKeys: (t) => `${thread(t)}:writekeys`,
    byNamespace: (t) => `${thread(t)}:by-ns`,
    byId: (t) => `${thread(t)}:by-id`,
    allCheckpoints: () => `${prefix}checkpoints`,
    threads: () => `${prefix}threads`,
  };
}

/** Field of a checkpoint in its thread's hash, and member of the `by-ns` index. */
export function checkpointField(checkpointNs: string, checkpointId: string): string {
  return `${checkpointNs}${SEP}${checkpointId}`;
}

/** Member of the `by-id` index. */
export function byIdMember(checkpointNs: string, checkpointId: string): string {
  return `${checkpointId}${SEP}${checkpointNs}`;
}

/** Member of the global index. */
export function globalMember(threadId: string, checkpointNs: string, checkpointId: string): string {
  return `${checkpointId}${SEP}${threadId}${SEP}${checkpointNs}`;
}

export function writeField(taskId: string, idx: number): string {
  return `${taskId}${SEP}${idx}`;
}

/**
 * The ZRANGEBYLEX bounds (max, min; for ZREVRANGEBYLEX) selecting one page of an index, newest first.
 * `prefix` restricts to members starting with it; `below` excludes everything from that member up.
 *
 * @example
 * lexRange({ prefix: 'ns\u0000' }) // { max: '(ns\u0001', min: '[ns\u0000' }
 */
export function lexRange(options: { prefix?: string; below?: string }): { max: string; min: string } {
  const { prefix, below } = options;
  const min = prefix === undefined || prefix === '' ? '-' : `[${prefix}`;
  let max = prefix === undefined || prefix === '' ? '+' : `(${nextPrefix(prefix)}`;
  if (below !== undefined && (max === '+' || bytesBefore(below, max.slice(1)))) max = `(${below}`;
  return { max, min };
}

/** Byte order (as Redis compares members), which differs from JS string order for astral characters. */
export function bytesBefore(a: string, b: string): boolean {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')) < 0;
}

/** The smallest string greater than every string starting with `prefix` (prefix ends in SEP, so this is safe). */
function nextPrefix(prefix: string): string {
  const last = prefix.charCodeAt(prefix.length - 1);
  return prefix.slice(0, -1) + String.fromCharCode(last + 1);
}
