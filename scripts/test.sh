#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need (Debian's Clojure runtime and
# libraries for the corpus), then formatting, lints and every test of the workspace.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export FORMDB_CORPUS=${FORMDB_CORPUS:-$root/target/corpus}
scripts/corpus.sh "$FORMDB_CORPUS"
# The mount tests mount for real and run vim and emacs against the mount; `formdb up`'s tests use git.
if ! command -v fusermount3 >/dev/null || ! command -v vim >/dev/null || ! command -v emacs >/dev/null \
  || ! command -v git >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 vim emacs-nox git >/dev/null
fi
# The REPL tests (tests/repl.rs) start a real nREPL: Debian's clojure with libnrepl-clojure.
if ! command -v clojure >/dev/null || [ ! -e /usr/share/java/nrepl.jar ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clojure libnrepl-clojure >/dev/null
fi
# The MCP tests drive formdb with the official MCP Inspector (node and npm), its pinned version
# installed into target/inspector. It declares node >= 22 for its web UI; its CLI runs on
# Debian's node 20.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
inspector=@modelcontextprotocol/inspector@0.18.0
inspector_dir=$root/target/inspector
if [ "$(cat "$inspector_dir/.installed" 2>/dev/null)" != "$inspector" ] \
  || [ ! -x "$inspector_dir/node_modules/.bin/mcp-inspector" ]; then
  npm install --no-audit --no-fund --loglevel=error --prefix "$inspector_dir" "$inspector"
  echo "$inspector" >"$inspector_dir/.installed"
fi
export FORMDB_INSPECTOR=$inspector_dir/node_modules/.bin/mcp-inspector
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace
