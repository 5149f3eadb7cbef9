#!/usr/bin/env bash
# formdb's main job on a tree: import it into a store and ask it questions grep can't answer.
# Usage: scripts/demo.sh [DIR]   (default: the embedded example project examples/shop)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/examples/shop}
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
formdb="$root/target/release/formdb"
if [ -z "${1:-}" ]; then
  # The embedded example is imported into a scratch copy so the repo stays clean.
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "$dir" "$work/shop"
  dir=$work/shop
fi
cd "$dir"
set -x
"$formdb" import .
"$formdb" stats
"$formdb" ns shop.cart 2>/dev/null || "$formdb" run stats
"$formdb" usages shop.money/format-cents 2>/dev/null || true
"$formdb" usages shop.cart/line-total --depth 3 2>/dev/null || true
"$formdb" show shop.cart/total 2>/dev/null || true
"$formdb" search receipt --limit 5
"$formdb" dead
