#!/usr/bin/env bash
# The package as a user gets it: `npm pack`, then a fresh project outside this repository that has only the
# tarball and the npm registry. Checks that
#   - npm install warns of nothing but what the README's Install section explains, and that section's
#     commands to approve and build better-sqlite3 work as printed and warn of nothing;
#   - the README's quick start compiles with tsc and runs on SQLite, as a CommonJS project and as an ES-module
#     project ("type": "module"), and type-checks under moduleResolution bundler;
#   - a SQLite-only program loads none of pg, ioredis, pg-boss or BullMQ;
#   - the binary answers --help and lists runs;
#   - every subpath entry (sqlite, postgres, redis, tiered, queue, testing, ...) loads from CommonJS and an ES
#     module and type-checks, importing /sqlite loads no heavy peer, a deep import of dist/ is refused
#     (ERR_PACKAGE_PATH_NOT_EXPORTED), and waypoint-durable/testing's conformance suite passes on the memory store.
# The project also installs the optional peers (pg, ioredis, pg-boss, bullmq), so the check that a SQLite
# program does not load them means something.
# Usage: scripts/pack-test.sh   (after `npm run build`; about two minutes, most of it building better-sqlite3)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
# shellcheck source=lib/pack-common.sh
. scripts/lib/pack-common.sh
name=$(node -p "require('./package.json').name")
bin=$(node -p "Object.keys(require('./package.json').bin)[0]")
work=$(mktemp -d -t waypoint-pack-XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "pack-test: packing $name into $work"
tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)

# The quick start, exactly as the README shows it.
quickstart_from_readme "$work/quickstart.ts"
v_reflect=$(dep reflect-metadata); v_inversify=$(dep inversify); v_validator=$(dep class-validator)
v_typescript=$(dep typescript); v_types_node=$(dep @types/node)
v_pg=$(dep pg); v_ioredis=$(dep ioredis); v_pgboss=$(dep pg-boss); v_bullmq=$(dep bullmq)

cd "$work"
cat > package.json <<JSON
{
  "name": "pack-test",
  "private": true,
  "dependencies": {
    "$name": "file:./$tarball",
    "reflect-metadata": "$v_reflect",
    "inversify": "$v_inversify",
    "class-validator": "$v_validator",
    "pg": "$v_pg",
    "ioredis": "$v_ioredis",
    "pg-boss": "$v_pgboss",
    "bullmq": "$v_bullmq"
  },
  "devDependencies": {
    "typescript": "$v_typescript",
    "@types/node": "$v_types_node"
  }
}
JSON
# npm as users have it: this machine's npm config omits registry URLs from lockfiles, which makes
# `npm install-scripts approve` warn that it cannot pin a version; the default (false) is what users run.
export npm_config_omit_lockfile_registry_resolved=false
echo "pack-test: npm install (registry and tarball only)"
npm install --no-audit --no-fund > install.log 2>&1 || { cat install.log >&2; exit 1; }
# What npm prints is what the README's Install section explains: npm 11 lists the install scripts it skipped
# (better-sqlite3's native build; msgpackr-extract comes with BullMQ) and nothing else warns.
unexplained=$(grep -i '^npm warn' install.log | grep -v '^npm warn install-scripts' || true)
[ -z "$unexplained" ] || { echo "pack-test: npm install printed warnings the README does not explain:" >&2; cat install.log >&2; exit 1; }
for listed in better-sqlite3 msgpackr-extract; do
  grep -q "^npm warn install-scripts *$listed@" install.log ||
    { echo "pack-test: npm no longer lists $listed's install script, as the README says it does:" >&2; cat install.log >&2; exit 1; }
done
# Then the README's own commands to approve and build better-sqlite3, verbatim, printing no warning.
node -e '
  const text = require("fs").readFileSync(process.argv[1], "utf8");
  const block = [...text.matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes("install-scripts approve"));
  if (!block) { console.error("pack-test: no install-scripts approve block in README.md"); process.exit(1); }
  process.stdout.write(block);
' "$repo/README.md" > approve.sh
echo "pack-test: the README's approve and rebuild commands"
bash -e approve.sh > approve.log 2>&1 || { echo "pack-test: the README's approve commands failed:" >&2; cat approve.sh approve.log >&2; exit 1; }
# The one line allowed is npm's reminder that one package (msgpackr-extract, left to the user) is unapproved.
if grep -i '^npm warn' approve.log | grep -qv '^npm warn rebuild 1 package has install scripts not yet covered by allowScripts'; then
  echo "pack-test: the README's approve commands printed warnings it does not explain:" >&2; cat approve.log >&2; exit 1
fi
# npm writes "better-sqlite3" or, when the lockfile pins it, "better-sqlite3@<version>".
node -e 'const a = require("./package.json").allowScripts || {}; process.exit(Object.keys(a).some((k) => /^better-sqlite3(@|$)/.test(k) && a[k] === true) ? 0 : 1)' ||
  { echo "pack-test: approving did not write better-sqlite3 to allowScripts in package.json:" >&2; cat package.json approve.log >&2; exit 1; }

common=$pack_tsconfig_common

mkdir -p cjs esm bundler node16
cp quickstart.ts cjs/quickstart.ts
cp quickstart.ts esm/quickstart.ts
cp quickstart.ts bundler/quickstart.ts
echo '{ "type": "commonjs" }' > cjs/package.json
echo '{ "type": "module" }' > esm/package.json
echo '{ "type": "commonjs" }' > node16/package.json
# inversify 8 is an ES module: a CommonJS project needs module node20 (or nodenext), where require() of an
# ES module is allowed. Waypoint's own types are also checked under plain node16 below.
echo "{ \"compilerOptions\": { $common, \"module\": \"node20\", \"moduleResolution\": \"node16\", \"outDir\": \"out\" }, \"files\": [\"quickstart.ts\"] }" > cjs/tsconfig.json
cat > node16/types.ts <<TS
import { Waypoint, sqliteStorage, WaypointError, type RunResult, type StepContext } from '$name';
import { sqliteStorage as sqliteFromSubpath, TypeOrmCheckpointStore, type SqliteStoreOptions } from '$name/sqlite';
import { postgresStorage, type PostgresStoreOptions } from '$name/postgres';
import { redisStorage, RedisCheckpointStore, type RedisStoreOptions } from '$name/redis';
import { tieredStorage, TieredCheckpointStore, type TieredStorageOptions } from '$name/tiered';
import { enqueue, startWorker, pgBossQueue, bullmqQueue } from '$name/queue';
import { runStoreConformance, type StoreFixture, type StoreConformanceOptions } from '$name/testing';
export const subpaths = [sqliteFromSubpath, TypeOrmCheckpointStore, postgresStorage, redisStorage, RedisCheckpointStore, tieredStorage,
  TieredCheckpointStore, enqueue, startWorker, pgBossQueue, bullmqQueue, runStoreConformance];
export type SubpathTypes = [SqliteStoreOptions, PostgresStoreOptions, RedisStoreOptions, TieredStorageOptions, StoreFixture, StoreConformanceOptions];
export async function check(): Promise<RunResult | WaypointError> {
  const waypoint: Waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: 'x.db' })] });
  const context: StepContext<{ a: number }> | undefined = undefined;
  void context;
  return new WaypointError('INVALID_ARGUMENT', String(waypoint.store.backend));
}
TS
echo "{ \"compilerOptions\": { $common, \"module\": \"node16\", \"moduleResolution\": \"node16\", \"noEmit\": true }, \"files\": [\"types.ts\"] }" > node16/tsconfig.json
echo "{ \"compilerOptions\": { $common, \"module\": \"nodenext\", \"moduleResolution\": \"nodenext\", \"outDir\": \"out\" }, \"files\": [\"quickstart.ts\"] }" > esm/tsconfig.json
echo "{ \"compilerOptions\": { $common, \"module\": \"esnext\", \"moduleResolution\": \"bundler\", \"noEmit\": true }, \"files\": [\"quickstart.ts\"] }" > bundler/tsconfig.json

for kind in cjs esm bundler node16; do
  echo "pack-test: tsc ($kind)"
  (cd "$kind" && ../node_modules/.bin/tsc -p tsconfig.json)
done

for kind in cjs esm; do
  echo "pack-test: run the quick start ($kind)"
  out=$(cd "$kind" && node out/quickstart.js)
  echo "$out" | grep -q "^completed" || { echo "pack-test: the $kind quick start did not complete:" >&2; echo "$out" >&2; exit 1; }
done

echo "pack-test: what a SQLite-only program loads"
cd cjs
node -e '
  require("./out/quickstart.js");
  setTimeout(() => {
    const loaded = Object.keys(require.cache);
    if (!loaded.some((f) => /node_modules\/better-sqlite3\//.test(f))) { console.error("pack-test: the load check saw no store at all"); process.exit(1); }
    // The quick start ran once above, so the schema is current: opening it loads no TypeORM (issue 40).
    const heavy = loaded.filter((f) => /node_modules\/(pg|ioredis|pg-boss|bullmq|typeorm)\//.test(f));
    if (heavy.length > 0) { console.error("pack-test: a SQLite-only run loaded " + heavy.slice(0, 5).join(", ")); process.exit(1); }
  }, 1500);
' > /dev/null

echo "pack-test: the $bin binary"
npx --no-install "$bin" --help > help.txt
grep -q "runs" help.txt || { echo "pack-test: $bin --help does not list the runs command" >&2; cat help.txt >&2; exit 1; }
npx --no-install "$bin" --store sqlite:./.waypoint/waypoint.db runs list > list.txt
grep -q "q3-aapl" list.txt || { echo "pack-test: runs list does not show the quick start's run" >&2; cat list.txt >&2; exit 1; }

echo "pack-test: the subpath entries"
# name of the subpath -> names it must export (a function or class each).
subpaths='{
  "": ["Waypoint", "sqliteStorage", "postgresStorage", "redisStorage", "tieredStorage", "enqueue", "MemoryCheckpointStore", "TypeOrmCheckpointStore"],
  "/sqlite": ["sqliteStorage", "TypeOrmCheckpointStore"],
  "/postgres": ["postgresStorage", "TypeOrmCheckpointStore"],
  "/redis": ["redisStorage", "RedisCheckpointStore"],
  "/tiered": ["tieredStorage", "TieredCheckpointStore", "WriteBehindCheckpointStore", "TierCopyNotDroppedError"],
  "/queue": ["enqueue", "startWorker", "pgBossQueue", "bullmqQueue", "recoverOrphans", "QueueUnavailableError"],
  "/testing": ["runStoreConformance", "runArchiveSinkConformance", "newRun", "stepRecord", "crashTest", "testEnvironment"],
  "/s3": ["S3ArchiveSink"],
  "/telemetry": ["telemetryModule"],
  "/http": ["createHttpHandler", "toNodeListener", "createApprovalToken"]
}'
node -e '
  const [name, subpaths] = [process.argv[1], JSON.parse(process.argv[2])];
  for (const [sub, names] of Object.entries(subpaths)) {
    const m = require(name + sub);
    const missing = names.filter((n) => typeof m[n] !== "function");
    if (missing.length > 0) { console.error("pack-test: require(\"" + name + sub + "\") lacks " + missing.join(", ")); process.exit(1); }
  }
' "$name" "$subpaths"
(cd ../esm && node --input-type=module -e '
  const [name, subpaths] = [process.argv[1], JSON.parse(process.argv[2])];
  for (const [sub, names] of Object.entries(subpaths)) {
    const m = await import(name + sub);
    const missing = names.filter((n) => typeof m[n] !== "function");
    if (missing.length > 0) { console.error("pack-test: import(\"" + name + sub + "\") lacks " + missing.join(", ")); process.exit(1); }
  }
' "$name" "$subpaths")
node -e '
  const name = process.argv[1];
  require(name); require(name + "/sqlite"); require(name + "/s3");
  const heavy = Object.keys(require.cache).filter((f) => /node_modules\/(pg|ioredis|pg-boss|bullmq|@aws-sdk)\//.test(f));
  if (heavy.length > 0) { console.error("pack-test: importing the root, /sqlite and /s3 loaded " + heavy.slice(0, 5).join(", ")); process.exit(1); }
  for (const deep of [name + "/dist/src/index.js", name + "/dist/src/storage/memory-store.js"]) {
    try { require(deep); } catch (error) {
      if (error.code === "ERR_PACKAGE_PATH_NOT_EXPORTED") continue;
      console.error("pack-test: require(\"" + deep + "\") failed with " + error.code + " instead of ERR_PACKAGE_PATH_NOT_EXPORTED"); process.exit(1);
    }
    console.error("pack-test: the deep import " + deep + " still loads; dist/ must not be exported"); process.exit(1);
  }
' "$name"

echo "pack-test: $name/testing against the memory store"
cat > conformance.test.js <<JS
const { runStoreConformance } = require('$name/testing');
const { MemoryCheckpointStore } = require('$name');
runStoreConformance({
  name: 'memory (packed)',
  processLocal: true,
  makeStore: async () => {
    const store = new MemoryCheckpointStore();
    return { store, cleanup: () => store.close() };
  },
});
JS
node --test --test-reporter=tap conformance.test.js > conformance.txt 2>&1 || { echo "pack-test: the conformance suite failed on the memory store:" >&2; tail -40 conformance.txt >&2; exit 1; }
grep -q "^# pass [1-9]" conformance.txt || { echo "pack-test: the conformance suite ran no test:" >&2; tail -20 conformance.txt >&2; exit 1; }
grep -q "^# fail 0" conformance.txt || { echo "pack-test: the conformance suite reported failures" >&2; tail -20 conformance.txt >&2; exit 1; }

echo "pack-test: ok ($name from $tarball: CommonJS, ES module, bundler types, binary, subpath entries, conformance suite)"
