import type { CheckpointMigration, MigratableCheckpoint } from '../../decorators/options';

/** True when `version` matches a migration's `from` pattern: exact, or with `x` / `*` wildcards per part. */
export function versionMatches(pattern: string, version: string): boolean {
  const want = pattern.split('.');
  const have = version.split('.');
  for (let i = 0; i < want.length; i++) {
    const part = want[i];
    if (part === 'x' || part === '*') {
      if (i === want.length - 1) return have.length >= want.length;
      continue;
    }
    if (have[i] !== part) return false;
  }
  return want.length === have.length;
}

/**
 * The chain of registered migrations from `from` to `to`, or null when there is none. Each step takes
 * the first migration whose `from` matches the current version; a chain longer than the number of
 * migrations is a cycle and counts as no path.
 */
export function migrationPath(migrations: readonly CheckpointMigration[], from: string, to: string): CheckpointMigration[] | null {
  const path: CheckpointMigration[] = [];
  let current = from;
  while (current !== to) {
    const next = migrations.find((m) => versionMatches(m.from, current) && m.to !== current);
    if (!next || path.length > migrations.length) return null;
    path.push(next);
    current = next.to;
  }
  return path;
}

/** Applies a migration chain to a checkpoint; each migration gets a copy it may change freely. */
export async function applyMigrations(path: readonly CheckpointMigration[], checkpoint: MigratableCheckpoint): Promise<MigratableCheckpoint> {
  let current = checkpoint;
  for (const migration of path) {
    current = await migration.migrate(structuredClone(current));
  }
  return current;
}
