#!/usr/bin/env bash
# casefile's pages without internet: starts `casefile serve --demo --auth tokens` on a temporary
# embedded database, then opens its pages in Debian's headless Chromium, which may reach nothing
# but the server: check.mjs runs GraphiQL's example query, its docs explorer and a subscription;
# share.mjs opens the share link the demo printed, and one it creates for the running demo
# session, where an append must arrive live. Where it may (root, or user namespaces), it runs
# them in a network namespace of their own that has nothing but loopback.
#
# Usage: tests/graphiql-offline/run.sh [path/to/casefile]   (default: cargo build's debug binary)
# Environment: CHROMIUM (default /usr/bin/chromium), SCREENSHOT (where GraphiQL's screenshot
# goes), SCREENSHOT_DIR (where the share page's go; default: the temporary directory).
set -euo pipefail
unset DATABASE_URL # the embedded database, in a temporary directory
here=$(cd "$(dirname "$0")" && pwd)

bin=${1:-}
if [ -z "$bin" ]; then
  cargo build --quiet --manifest-path "$here/../../Cargo.toml"
  bin="${CARGO_TARGET_DIR:-$here/../../target}/debug/casefile"
fi
if [ ! -d "$here/node_modules/puppeteer-core" ]; then
  PUPPETEER_SKIP_DOWNLOAD=1 npm ci --prefix "$here" --no-audit --no-fund
fi

if [ -n "${GRAPHIQL_OFFLINE_NETNS:-}" ]; then
  ip link set lo up
elif command -v ip >/dev/null && unshare --net --map-root-user true 2>/dev/null; then
  echo "== in a network namespace with loopback only"
  exec env GRAPHIQL_OFFLINE_NETNS=1 unshare --net --map-root-user "$0" "$bin"
else
  echo "== no network namespace available: Chromium alone keeps the page off the network"
fi

data=$(mktemp -d)
log="$data/server.log"
server=
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$data"
}
trap cleanup EXIT

# The tokens must exist before the server holds the embedded database's directory.
token=$("$bin" token create --name graphiql-check --role reader --data-dir "$data/db" | tail -n 1)
admin=$("$bin" token create --name share-check --role admin --data-dir "$data/db" | tail -n 1)
"$bin" serve --listen 127.0.0.1:0 --demo --auth tokens --data-dir "$data/db" >"$log" 2>&1 &
server=$!
url=
for _ in $(seq 1 600); do
  url=$(grep -o 'listening on http://[0-9.:]*' "$log" | head -n 1 | sed 's/listening on //') || true
  [ -n "$url" ] && break
  if ! kill -0 "$server" 2>/dev/null; then
    cat "$log" >&2
    echo "the server exited" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$url" ]; then
  cat "$log" >&2
  echo "the server did not start within a minute" >&2
  exit 1
fi
echo "== casefile at $url"

CASEFILE_URL="$url" CASEFILE_TOKEN="$token" node "$here/check.mjs"

# The demo prints its share link on standard output once it serves.
share=
for _ in $(seq 1 100); do
  share=$(grep -o 'http://[^ ]*/share/[0-9a-f-]*#cfs_[0-9a-f]*' "$log" | head -n 1) || true
  [ -n "$share" ] && break
  sleep 0.1
done
if [ -z "$share" ]; then
  cat "$log" >&2
  echo "the demo printed no share link" >&2
  exit 1
fi
CASEFILE_URL="$url" CASEFILE_SHARE_URL="$share" CASEFILE_ADMIN_TOKEN="$admin" node "$here/share.mjs"
