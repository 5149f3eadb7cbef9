#!/usr/bin/env bash
# formdb's main job: `formdb up` on a Clojure tree — import it into a store, mount the virtual
# source tree with FUSE, serve MCP, keep the tree and the store in step — then use each door once.
# Usage: scripts/demo.sh [DIR]   (default: a git copy of the embedded example, examples/shop)
# On a terminal it keeps serving until Ctrl-C; otherwise it stops after the tour.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v fusermount3 >/dev/null || ! command -v git >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 git >/dev/null
fi
# The REPL loop on the embedded example: Debian's Clojure runtime and nREPL.
if [ -z "${1:-}" ] && { ! command -v clojure >/dev/null || [ ! -e /usr/share/java/nrepl.jar ]; }; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clojure libnrepl-clojure >/dev/null
fi
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
formdb="$root/target/release/formdb"
work=$(mktemp -d)
mnt=$work/mnt
if [ -n "${1:-}" ]; then
  dir=$(cd "$1" && pwd)
else
  # The embedded example, as a git working tree of its own so the repo stays clean.
  dir=$work/shop
  cp -r "$root/examples/shop" "$dir"
  git -C "$dir" init -q
  git -C "$dir" add -A
  git -C "$dir" -c user.name=demo -c user.email=demo@example.com commit -qm "shop"
fi
mkdir -p "$mnt"

# On the embedded example, `formdb up` also starts an nREPL server for the tree (--repl).
repl_flag=()
[ -z "${1:-}" ] && repl_flag=(--repl)
"$formdb" up "$dir" --mount "$mnt" "${repl_flag[@]}" &
up=$!
cleanup() {
  kill -TERM "$up" 2>/dev/null && wait "$up" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1200); do [ -f "$dir/.formdb/server.json" ] && break; sleep 0.1; done
[ -f "$dir/.formdb/server.json" ] || { echo "formdb up did not start" >&2; exit 1; }

echo; echo "== the store, asked what grep can't answer"
(cd "$dir" && "$formdb" stats && "$formdb" ns shop.cart 2>/dev/null | head -12 || true)

echo; echo "== the mount: the tree as files"
ls -R "$mnt/src" | head -20
if [ -z "${1:-}" ]; then
  echo; echo "== an edit with sed on the mount, synced to the git tree"
  sed -i 's/(reduce + (map line-total items))/(reduce + 0 (map line-total items))/' "$mnt/src/shop/cart.clj"
  sleep 1
  git -C "$dir" --no-pager diff --stat
fi

echo; echo "== MCP: an agent host launches \`formdb mcp\`, which relays to this daemon"
(cd "$dir" && { printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"find_usages","arguments":{"symbol":"shop.cart/line-total"}}}' \
; sleep 2; } | timeout 20 "$formdb" mcp --user demo | tail -n 1 | cut -c1-400)

if [ -z "${1:-}" ]; then
  echo; echo "== the REPL loop: the store loaded into the running program (with the sed edit), evaluated, and the tests the edit reaches"
  # As an agent host does: each call waits for the answer to the one before (the server runs
  # calls concurrently, so an eval sent before the load's answer may run before the load).
  coproc MCP { cd "$dir" && exec timeout 90 "$formdb" mcp --user demo; }
  send() { printf '%s\n' "$1" >&"${MCP[1]}"; }
  answer() {
    local line
    while IFS= read -r line <&"${MCP[0]}"; do
      case $line in *"\"id\":$1,"*) [ "$1" = 1 ] || echo "$line" | cut -c1-300; return 0 ;; esac
    done
    echo "no answer to request $1" >&2
    return 1
  }
  send '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}'
  answer 1
  send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  send '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"load","arguments":{"ns":"shop.cart"}}}'
  answer 2
  send '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"eval","arguments":{"code":"(shop.cart/subtotal [{:price 350 :qty 2}])"}}}'
  answer 3
  send '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_tests","arguments":{"affected_by":["shop.cart/subtotal"]}}}'
  answer 4
  eval "exec ${MCP[1]}>&-"
  wait "${MCP_PID:-}" 2>/dev/null || true
fi

echo
echo "mount: $mnt   tree: $dir   MCP: $(sed -n 's/.*"url": *"\([^"]*\)".*/\1/p' "$dir/.formdb/server.json")"
if [ -t 0 ]; then
  echo "serving; Ctrl-C stops"
  wait "$up" || true
fi
