#!/usr/bin/env bash
# The measurements of issue 18 (one read path), in one run:
#  1. BenchmarkReadPath: kura's default Fetch (no L1) vs rueidisaside with
#     DisableCache, interleaved rounds in one process; medians and min-max.
#  2. The hit path with and without the StoreTimeout budget: the
#     interleaved benchmark (its budget-% is the figure to read), then
#     BenchmarkFetchHitBudget in ABBA pairs of processes for benchstat.
#  3. BenchmarkL1WarmHits/kura-l1: allocations per L1 hit of this tree and
#     of BASE (default: the merge base with main before the change), built
#     from a git worktree and run alternately, 5 times each.
# Usage: scripts/bench-readpath.sh [BASE]   (output under /tmp/bench-readpath)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-084828f}
out=/tmp/bench-readpath
mkdir -p "$out"
rounds=${KURA_BENCH_ROUNDS:-5}

go test -c -o "$out/new.test" .
if [ ! -x "$out/base.test" ]; then
	rm -rf "$out/base-src"
	git worktree add --detach "$out/base-src" "$base" >/dev/null
	(cd "$out/base-src" && go test -c -o "$out/base.test" .)
	git worktree remove --force "$out/base-src"
fi

echo "== 1. default Fetch vs rueidisaside (DisableCache), $rounds interleaved rounds"
KURA_BENCH_ROUNDS=$rounds "$out/new.test" -test.run '^$' -test.bench '^BenchmarkReadPath$' -test.benchtime 2s | tee "$out/readpath.txt"
python3 - "$out/readpath.txt" <<'PY'
import re, sys, statistics, collections
ops = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkReadPath/round(\d+)/(\S+?)(-\d+)?\s.*?([\d.]+) ops/s', line)
    if m:
        ops[m.group(2)][int(m.group(1))] = float(m.group(4))
for name, r in sorted(ops.items()):
    v = list(r.values())
    print(f"{name:24s} median {statistics.median(v):10.0f} ops/s  min {min(v):10.0f}  max {max(v):10.0f}  rounds {len(v)}")
peer = ops.get('rueidisaside-nocache', {})
for name in ('kura', 'kura-no-budget', 'kura-rueidis-conns'):
    ratios = [ops[name][k] / peer[k] for k in ops.get(name, {}) if k in peer]
    if ratios:
        print(f"{name} / rueidisaside-nocache per round: median {statistics.median(ratios):.2f}x  min {min(ratios):.2f}x  max {max(ratios):.2f}x")
PY

echo "== 2. the budget on a one-caller hit: interleaved in one loop ($rounds runs), then ABBA for benchstat"
"$out/new.test" -test.run '^$' -test.bench '^BenchmarkFetchHitBudgetInterleaved$' -test.benchtime 4s -test.count "$rounds" | tee "$out/budget-interleaved.txt"
# One process per sample, the order flipped every pair: Go's -count runs a
# sub-benchmark's samples back to back, so a drifting machine would read
# as a difference between the two sides.
for ctx in background with-cancel; do
	: >"$out/budget-$ctx.on"
	: >"$out/budget-$ctx.off"
	for i in $(seq "${KURA_BENCH_PAIRS:-10}"); do
		order="on off"
		if ((i % 2 == 0)); then order="off on"; fi
		for v in $order; do
			"$out/new.test" -test.run '^$' -test.bench "^BenchmarkFetchHitBudget/ctx=$ctx/budget=$v\$" -test.benchmem -test.benchtime 1s |
				grep -E '^(goos|goarch|pkg|cpu|Benchmark)' | sed -E 's#/budget=(on|off)##' >>"$out/budget-$ctx.$v"
		done
	done
	if command -v benchstat >/dev/null; then benchstat "$out/budget-$ctx.off" "$out/budget-$ctx.on"; fi
done

echo "== 3. allocations per L1 hit: this tree vs $base, alternately"
for i in 1 2 3 4 5; do
	for bin in base new; do
		"$out/$bin.test" -test.run '^$' -test.bench '^BenchmarkL1WarmHits$/round1/kura-l1$' -test.benchtime 1s 2>/dev/null |
			awk -v b="$bin" '/kura-l1/ {print b, $0}'
	done
done | tee "$out/l1.txt"
