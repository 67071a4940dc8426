#!/usr/bin/env bash
# Issue 38 (the house): the read path before vs after a refactor, in one
# interleaved run. Builds the root package's test binary of BASE (default
# main) and of this tree, then alternates them ROUNDS times (order flipped
# every round) over:
#   - BenchmarkReadPath (default Fetch, no L1, vs rueidisaside DisableCache,
#     one round per process: its contenders interleave inside it);
#   - BenchmarkL1WarmHits/round1/kura-l1 (Fetch with the L1, 64 callers);
#   - BenchmarkFetchHitBudget/ctx=background/budget=on (one caller, a
#     Redis hit), with -benchmem for allocations per op.
# Prints per-benchmark medians, after/before ratios per round (median and
# quartiles). Usage: scripts/bench-house-readpath.sh [BASE]
# Output under /tmp/bench-house-readpath (KURA_BENCH_ROUNDS, default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-main}
rounds=${KURA_BENCH_ROUNDS:-5}
out=${KURA_BENCH_OUT:-/tmp/bench-house-readpath}
mkdir -p "$out"
if [ -z "${KURA_BENCH_PREBUILT:-}" ]; then
	go test -c -o "$out/after.test" .
	rm -rf "$out/base-src"
	git worktree add --detach "$out/base-src" "$base" >/dev/null
	(cd "$out/base-src" && go test -c -o "$out/before.test" .)
	git worktree remove --force "$out/base-src"
fi
: >"$out/raw.txt"
for r in $(seq "$rounds"); do
	order="before after"
	if ((r % 2 == 0)); then order="after before"; fi
	for side in $order; do
		for bench in '^BenchmarkReadPath$' '^BenchmarkL1WarmHits$/^round1$/^kura-l1$' '^BenchmarkFetchHitBudget$/^ctx=background$/^budget=on$'; do
			KURA_BENCH_ROUNDS=1 "$out/$side.test" -test.run '^$' -test.benchmem -test.benchtime 1s -test.bench "$bench" 2>/dev/null |
				awk -v s="$side" -v r="$r" '/^Benchmark/ {print r, s, $0}' >>"$out/raw.txt" || true # a sub-benchmark's own check may fail under load
		done
	done
done
python3 - "$out/raw.txt" <<'PY'
import re, sys, statistics, collections
val = collections.defaultdict(dict)    # (bench, side) -> round -> ops/s or ns/op
allocs = collections.defaultdict(set)
for line in open(sys.argv[1]):
    f = line.split()
    if 'ns/op' not in line:
        continue  # a sub-benchmark that failed (its own check, under load)
    r, side, name = int(f[0]), f[1], re.sub(r'-\d+$', '', f[2])
    name = re.sub(r'/round\d+/', '/', name)
    m = re.search(r'([\d.]+) ops/s', line)
    if m:
        v, unit = float(m.group(1)), 'ops/s'
    else:
        v, unit = 1e9 / float(re.search(r'([\d.]+) ns/op', line).group(1)), 'ops/s (1/ns)'
    val[(name, side)][r] = v
    a = re.search(r'(\d+) allocs/op', line)
    if a:
        allocs[(name, side)].add(int(a.group(1)))
def q(v):
    v = sorted(v)
    qs = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
    return qs
print(f"{'benchmark':48s} {'before':>10s} {'after':>10s}  after/before: median [q1, q3] (rounds)  allocs/op before->after")
for name in sorted({n for n, _ in val}):
    b, a = val[(name, 'before')], val[(name, 'after')]
    ratios = [a[k] / b[k] for k in a if k in b]
    if not ratios:
        continue
    q1, med, q3 = q(ratios)
    al = f"{sorted(allocs[(name,'before')])}->{sorted(allocs[(name,'after')])}"
    print(f"{name:48s} {statistics.median(b.values()):10.0f} {statistics.median(a.values()):10.0f}  {statistics.median(ratios):.3f} [{q1:.3f}, {q3:.3f}] ({len(ratios)})  {al}")
PY
