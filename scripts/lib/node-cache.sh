# Other Node lines for the tests (issue 35), sourced by scripts/with-node.sh and scripts/pack-test-nodes.sh.
#
# Node comes from the npm registry (the platform package node-<platform>-<arch>@<major>: bin/node and
# include/node, no install script), installed once per major into a cache outside the repository that
# survives between CI runs on the same machine:
#   ${WAYPOINT_NODE_CACHE:-/var/cache/waypoint-node}/<major>
# A present cache is reused as is (no registry query); a missing one is downloaded (about 60 MB per major,
# bounded by WAYPOINT_NODE_FETCH_TIMEOUT seconds). Delete a major's directory to take a newer patch release.
# better-sqlite3's native addon is built from source once per (better-sqlite3 version, Node ABI) against that
# Node's own headers (npm_config_nodedir, so node-gyp never downloads headers) and kept in the same cache.

node_cache=${WAYPOINT_NODE_CACHE:-/var/cache/waypoint-node}
node_fetch_timeout=${WAYPOINT_NODE_FETCH_TIMEOUT:-600}
node_platform="node-$(node -p 'process.platform')-$(node -p 'process.arch')"
npm_cli=$(readlink -f "$(command -v npm)") # npm-cli.js, run under the Node being tested
node_gyp="$(dirname "$npm_cli")/../node_modules/node-gyp/bin/node-gyp.js"

# Prints the directory of Node <major> (bin/node, include/node), installing it into the cache when absent.
# The install goes to a temporary sibling renamed into place, so an interrupted download never leaves a
# half-installed Node that a later run would trust.
node_dir() {
  local major=$1 dest="$node_cache/$1" tmp
  if [ -x "$dest/node_modules/$node_platform/bin/node" ] && [ -f "$dest/node_modules/$node_platform/include/node/node.h" ]; then
    echo "$dest/node_modules/$node_platform"
    return 0
  fi
  mkdir -p "$node_cache"
  tmp=$(mktemp -d "$node_cache/.install-$major-XXXXXX")
  echo "node-cache: downloading $node_platform@$major into $dest" >&2
  if ! timeout "$node_fetch_timeout" npm install --prefix "$tmp" --no-save --no-package-lock --ignore-scripts \
    --no-audit --no-fund --loglevel=error "$node_platform@$major" > "$tmp.log" 2>&1; then
    echo "node-cache: could not install $node_platform@$major from the registry:" >&2
    cat "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.log"
    return 1
  fi
  rm -f "$tmp.log"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  echo "$dest/node_modules/$node_platform"
}

# Prints the path of better-sqlite3's addon built for the Node in <node dir>, from the package at <package dir>
# (its sources), building it into the cache when absent (about a minute and a half on two cores).
sqlite_addon() {
  local dir=$1 package version abi dest tmp
  package=$(cd "$2" && pwd)
  version=$(node -p "require('$package/package.json').version")
  abi=$("$dir/bin/node" -p 'process.versions.modules')
  dest="$node_cache/addons/better-sqlite3-$version-abi$abi-$node_platform.node"
  if [ -f "$dest" ]; then
    echo "$dest"
    return 0
  fi
  mkdir -p "$node_cache/addons"
  tmp=$(mktemp -d "$node_cache/.build-XXXXXX")
  echo "node-cache: building better-sqlite3 $version for Node $("$dir/bin/node" -v) (ABI $abi)" >&2
  cp -a "$package/." "$tmp/"
  rm -rf "$tmp/build"
  if ! (cd "$tmp" && PATH="$dir/bin:$PATH" npm_config_nodedir="$dir" "$dir/bin/node" "$node_gyp" rebuild --release > "$tmp.log" 2>&1); then
    echo "node-cache: building better-sqlite3 for Node $("$dir/bin/node" -v) failed:" >&2
    tail -n 40 "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.log"
    return 1
  fi
  cp "$tmp/build/Release/better_sqlite3.node" "$dest.tmp"
  mv "$dest.tmp" "$dest"
  rm -rf "$tmp" "$tmp.log"
  echo "$dest"
}
