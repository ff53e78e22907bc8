#!/usr/bin/env bash
# README.md's "Using it" block, run as written, top to bottom, against the receiver it starts:
# every command must succeed, the drain must end drained with nothing dead or left.
#   readme_test.sh README.md SURGE_BINARY
set -euo pipefail
readme=$1 surge=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^## Using it/ { in_section = 1 }
     in_section && /^```sh$/ { in_block = 1; next }
     in_block && /^```$/ { exit }
     in_block { print }' "$readme" >"$tmp/block.sh"
grep -q '^surge drain ' "$tmp/block.sh" || { echo "FAIL: no drain command in the block" >&2; exit 1; }
cd "$tmp"
# The block's `surge` is this build's; a background receiver it forgot to stop fails the test.
if ! PATH="$(dirname "$surge"):$PATH" timeout 150 bash -euo pipefail block.sh >out.log 2>err.log; then
  cat block.sh out.log err.log >&2
  echo "FAIL: the block did not run as written" >&2
  exit 1
fi
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
summary=$(grep '^summary: ' out.log || true)
[[ $summary == *"(drained)"* ]] || fail "the drain did not end drained: $summary"
[[ $summary == *" dead=0 "* ]] || fail "rows died: $summary"
[[ $summary == *" remaining=0 "* ]] || fail "rows were left: $summary"
[[ -s audit.png ]] || fail "no audit chart"
# `kill %1` asked the receiver to stop; it has a moment to finish.
for _ in $(seq 50); do
  pgrep -f "surge sink --db queue.db --listen 127.0.0.1:8765" >/dev/null || break
  sleep 0.1
done
if pgrep -f "surge sink --db queue.db --listen 127.0.0.1:8765" >/dev/null; then
  fail "the receiver is still running"
fi
((failures == 0)) || { cat out.log err.log >&2; exit 1; }
echo "ok: $summary"
