#!/usr/bin/env bash
# kura bench vs redis-benchmark, before and after a change, in one run
# (issue 26: one parser per protocol answer must not slow `kura bench`), and
# the memcached batching benchmarks of BENCHMARKS.md ("Issue 3") before and
# after. Interleaved rounds; medians.
# Usage: scripts/bench-house.sh [BASE_REF]   (default main)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-main}
rounds=${KURA_BENCH_ROUNDS:-3}
n=${KURA_BENCH_N:-400000}
out=/tmp/bench-house
mkdir -p "$out"
rm -rf "$out/base-src"
git worktree add --detach "$out/base-src" "$base" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis_pid=
trap 'kill $redis_pid 2>/dev/null || true; git worktree remove --force "$out/base-src" 2>/dev/null || true' EXIT
go build -o "$out/kura-after" ./cmd/kura
go test -c -o "$out/memcache-after.test" ./store/memcache/
(cd "$out/base-src" && go build -o "$out/kura-before" ./cmd/kura && go test -c -o "$out/memcache-before.test" ./store/memcache/)

redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$out/kura-after" bench "redis://127.0.0.1:$port" -t set -r 100000 -d 100 -n 100000 -q --prefill >/dev/null

: >"$out/redis.txt"
for r in $(seq "$rounds"); do
  for P in 1 16; do
    for cmd in get set; do
      rb=$(redis-benchmark -p "$port" -t $cmd -c 50 -n "$n" -d 100 -r 100000 -P $P -q | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
      echo "$r P$P $cmd redis-benchmark $rb" >>"$out/redis.txt"
      for side in before after; do
        ops=$("$out/kura-$side" bench "redis://127.0.0.1:$port" -t $cmd -c 50 -n "$n" -d 100 -r 100000 -P $P -q --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ops_per_sec"])')
        echo "$r P$P $cmd kura-$side $ops" >>"$out/redis.txt"
      done
    done
  done
done

: >"$out/memcache.txt"
for r in $(seq "$rounds"); do
  for side in before after; do
    (cd store/memcache && "$out/memcache-$side.test" -test.run XXX -test.bench 'SeedWriteBack/loopback|GetMany1000/loopback' -test.benchtime=2s -test.count=1) |
      awk -v s=$side '/^Benchmark/ {print s, $1, $3}' >>"$out/memcache.txt"
  done
done

python3 - "$out/redis.txt" "$out/memcache.txt" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, p, cmd, tool, ops = line.split()
    v[(p, cmd, tool)].append(float(ops))
print("| -P | cmd | redis-benchmark ops/s | kura before | kura after | before/rb | after/rb | after/before |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for p in ("P1", "P16"):
    for cmd in ("get", "set"):
        rb, b, a = (statistics.median(v[(p, cmd, t)]) for t in ("redis-benchmark", "kura-before", "kura-after"))
        print(f"| {p[1:]} | {cmd.upper()} | {rb:,.0f} | {b:,.0f} | {a:,.0f} | {b/rb:.2f} | {a/rb:.2f} | {a/b:.2f} |")
m = collections.defaultdict(list)
for line in open(sys.argv[2]):
    side, name, ns = line.split()
    m[(name, side)].append(float(ns))
print()
print("| memcached benchmark | before ms | after ms | after/before |")
print("|---|---:|---:|---:|")
for name in sorted({k[0] for k in m}):
    b, a = statistics.median(m[(name, "before")]) / 1e6, statistics.median(m[(name, "after")]) / 1e6
    print(f"| {name} | {b:.2f} | {a:.2f} | {a/b:.2f} |")
PY
