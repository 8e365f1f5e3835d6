#!/usr/bin/env bash
# The README's quick start on each Node line users run (issue 35): one `npm pack`, then for each major a fresh
# project installed and run under that Node, compiled with tsc and run as CommonJS and as an ES module on SQLite.
# The full checks (binary, subpaths, conformance, what a SQLite program loads) stay in scripts/pack-test.sh on
# the machine's own Node; this script asks only "does a user's first program work on Node N".
#
# Node and better-sqlite3's addon for it come from scripts/lib/node-cache.sh (downloaded and built once, cached
# outside the repository). The project installs with --ignore-scripts and takes that cached addon, which is
# what its own install script would build (from the same sources, against the same headers): a cold cache
# builds it once per Node line, a warm one makes each line take seconds. The install script itself, and what
# npm prints when it runs, are checked on the machine's Node by scripts/pack-test.sh.
#
# Usage: scripts/pack-test-nodes.sh [major...]   (after `npm run build`; default: 20 22 24 26)
set -euo pipefail
cd "$(dirname "$0")/.."
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(20 22 24 26)
name=$(node -p "require('./package.json').name")
work=$(mktemp -d -t waypoint-nodes-XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=lib/node-cache.sh
. scripts/lib/node-cache.sh
# shellcheck source=lib/pack-common.sh
. scripts/lib/pack-common.sh

echo "pack-test-nodes: packing $name into $work"
tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
quickstart_from_readme "$work/quickstart.ts"

v_reflect=$(dep reflect-metadata); v_inversify=$(dep inversify); v_validator=$(dep class-validator)
v_typescript=$(dep typescript); v_types_node=$(dep @types/node)
common=$pack_tsconfig_common

# One major: install the tarball in a fresh project under that Node (its addon from the cache), compile and run
# the quick start both ways.
# Output goes to $project/log; the caller prints it when this fails.
quick_start() {
  local major=$1 dir=$2 project="$work/node$1" got kind out
  mkdir -p "$project/cjs" "$project/esm"
  cp "$work/$tarball" "$project/"
  cat > "$project/package.json" <<JSON
{
  "name": "pack-test-node$major",
  "private": true,
  "dependencies": {
    "$name": "file:./$tarball",
    "reflect-metadata": "$v_reflect",
    "inversify": "$v_inversify",
    "class-validator": "$v_validator"
  },
  "devDependencies": { "typescript": "$v_typescript", "@types/node": "$v_types_node" }
}
JSON
  for kind in cjs esm; do cp "$work/quickstart.ts" "$project/$kind/"; done
  echo '{ "type": "commonjs" }' > "$project/cjs/package.json"
  echo '{ "type": "module" }' > "$project/esm/package.json"
  echo "{ \"compilerOptions\": { $common, \"module\": \"node20\", \"moduleResolution\": \"node16\", \"outDir\": \"out\" }, \"files\": [\"quickstart.ts\"] }" > "$project/cjs/tsconfig.json"
  echo "{ \"compilerOptions\": { $common, \"module\": \"nodenext\", \"moduleResolution\": \"nodenext\", \"outDir\": \"out\" }, \"files\": [\"quickstart.ts\"] }" > "$project/esm/tsconfig.json"
  (
    cd "$project"
    # That Node first on PATH, so npm and everything it starts run under it; its own headers.
    export PATH="$dir/bin:$PATH" npm_config_nodedir="$dir"
    got=$(node -v)
    case "$got" in v"$major".*) ;; *) echo "node on PATH is $got, not $major"; exit 1 ;; esac
    echo "node $got, npm $(node "$npm_cli" -v)"
    node "$npm_cli" install --ignore-scripts --no-audit --no-fund --loglevel=error || { echo "npm install failed (above)"; exit 1; }
    addon=$(sqlite_addon "$dir" node_modules/better-sqlite3) || { echo "no better-sqlite3 addon for $got"; exit 1; }
    mkdir -p node_modules/better-sqlite3/build/Release
    cp "$addon" node_modules/better-sqlite3/build/Release/better_sqlite3.node
    node -e 'new (require("better-sqlite3"))(":memory:").prepare("select 1").get()' ||
      { echo "better-sqlite3 does not load under $got"; exit 1; }
    for kind in cjs esm; do
      (cd "$kind" && node ../node_modules/typescript/bin/tsc -p tsconfig.json) || { echo "tsc ($kind) failed"; exit 1; }
      out=$(cd "$kind" && node out/quickstart.js 2>&1) || { echo "$out"; echo "the $kind quick start exited non-zero"; exit 1; }
      echo "$out" | grep -q "^completed" || { echo "$out"; echo "the $kind quick start did not complete"; exit 1; }
      echo "quick start ($kind): completed"
    done
  ) > "$project/log" 2>&1
}

failed=()
for major in "${majors[@]}"; do
  if ! dir=$(node_dir "$major"); then failed+=("$major (no Node binary)"); continue; fi
  echo "pack-test-nodes: Node $major ($("$dir/bin/node" -v)): install, quick start as CommonJS and ESM"
  if quick_start "$major" "$dir"; then
    echo "pack-test-nodes: Node $major ok"
  else
    echo "pack-test-nodes: Node $major FAILED:" >&2
    tail -n 60 "$work/node$major/log" >&2
    failed+=("$major")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "pack-test-nodes: the quick start fails on Node ${failed[*]}" >&2
  exit 1
fi
echo "pack-test-nodes: ok ($name quick start on Node ${majors[*]})"
