#!/usr/bin/env bash
# Loader calls in a rolling upgrade: an old reader (the release before the
# compact envelope, OLD_REF) and a new process share a key space on one
# Redis server, with the new process's compact write switch off, then on.
# Usage: scripts/mixed-version.sh [OLD_REF]   (BENCHMARKS.md, "Small values")
set -euo pipefail
cd "$(dirname "$0")/.."
OLD_REF=${1:-382f2fb}   # main before codec.Options.Compact
tmp=$(mktemp -d)
trap 'kill $redis_pid 2>/dev/null || true; git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/old" "$OLD_REF" >/dev/null 2>&1
mkdir -p "$tmp/old/internal/harness/mixedversion"
cp internal/harness/mixedversion/main.go "$tmp/old/internal/harness/mixedversion/"
(cd "$tmp/old" && go build -o "$tmp/mv-old" ./internal/harness/mixedversion)
go build -o "$tmp/mv-new" ./internal/harness/mixedversion
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
for compact in false true; do
  redis-cli -p "$port" flushall >/dev/null
  start=$(( $(date +%s%3N) + 300 ))
  "$tmp/mv-old" -addr 127.0.0.1:$port -name old -start $start &
  p1=$!
  "$tmp/mv-new" -addr 127.0.0.1:$port -name new -compact=$compact -start $start &
  p2=$!
  wait $p1 $p2
done
