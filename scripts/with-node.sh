#!/usr/bin/env bash
# Runs a command under another Node line (issue 35): CI runs the whole suite on the current LTS this way,
#   bash scripts/with-node.sh 24 npm test
# Node <major> goes first on PATH (npm itself runs under it, so do its scripts and every child process the
# tests spawn), and this checkout's better-sqlite3 addon is swapped for one built for that Node's ABI
# (scripts/lib/node-cache.sh: cached, built once), then put back when the command ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/with-node.sh <major> <command...>" >&2; exit 2; }
major=$1
shift
# shellcheck source=lib/node-cache.sh
. scripts/lib/node-cache.sh

dir=$(node_dir "$major")
addon=node_modules/better-sqlite3/build/Release/better_sqlite3.node
[ -f "$addon" ] || { echo "with-node: $addon is missing; run npm ci first" >&2; exit 1; }
built=$(sqlite_addon "$dir" node_modules/better-sqlite3)

saved=$(mktemp -t waypoint-addon-XXXXXX.node)
cp "$addon" "$saved"
restore() { cp "$saved" "$addon" && rm -f "$saved"; }
trap restore EXIT
cp "$built" "$addon"

export PATH="$dir/bin:$PATH" npm_config_nodedir="$dir"
echo "with-node: $(node -v) ($(command -v node)), better-sqlite3 built for ABI $(node -p process.versions.modules)"
node -e 'new (require("better-sqlite3"))(":memory:").prepare("select 1").get()'
# `npm` on PATH is a script whose shebang finds node on PATH, so it too runs under this Node.
"$@"
