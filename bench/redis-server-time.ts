import { Redis } from 'ioredis';

/** Redis's own time per call of a command (INFO commandstats), microseconds. */
export interface RedisServerTimes {
  /** Per call of the store's append script (EVALSHA, or EVAL when the script was not loaded yet). */
  appendUs: number;
  /** Per call of the floor's SET. */
  setUs: number;
}

type CommandStats = Record<string, { calls: number; usec: number }>;

/** Parses `INFO commandstats` (`cmdstat_set:calls=3,usec=5,...`). */
function parseCommandStats(info: string): CommandStats {
  const out: CommandStats = {};
  for (const line of info.split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (match) out[match[1]] = { calls: Number(match[2]), usec: Number(match[3]) };
  }
  return out;
}

/** Server time per call of `commands` between two snapshots. */
function perCall(before: CommandStats, after: CommandStats, commands: readonly string[]): number {
  let calls = 0;
  let usec = 0;
  for (const command of commands) {
    calls += (after[command]?.calls ?? 0) - (before[command]?.calls ?? 0);
    usec += (after[command]?.usec ?? 0) - (before[command]?.usec ?? 0);
  }
  return calls > 0 ? usec / calls : 0;
}

/**
 * What Redis itself spends per call, read from its own counters around each measure: the store's append
 * script (prebuilt rows, no runtime) and the floor's SET. No network and no client in it: what the script
 * costs the server beyond a SET is the store's floor on Redis.
 *
 * @example const t = await redisServerTimes(env.redisUrl, () => appendOnly.batch(100, p), () => floor.batch(100, p));
 */
export async function redisServerTimes(url: string, append: () => Promise<unknown>, set: () => Promise<unknown>): Promise<RedisServerTimes> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on('error', () => {}); // failures reach the caller through the rejected command
  await redis.connect();
  try {
    const stats = async () => parseCommandStats(await redis.info('commandstats'));
    const a0 = await stats();
    await append();
    const a1 = await stats();
    await set();
    const s1 = await stats();
    return { appendUs: perCall(a0, a1, ['evalsha', 'eval']), setUs: perCall(a1, s1, ['set']) };
  } finally {
    await redis.quit();
  }
}
