package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Property is the guarantee a history is checked against: the one
// docs/leases.md and docs/l1.md give for a Cache's configuration.
//
//   - Leases (leases on, no L1): for every read R of k and every
//     Invalidate I of k with end(I) < start(R), R returns a value whose
//     load read the source after start(I). As a sequential model: an
//     Invalidate voids every load made before it; a read returns a load
//     that no Invalidate voided; a load reads the source's current
//     version.
//   - Window > 0 (stale-while-revalidate, or an L1 bounded by
//     MaxStaleness): the same, for the invalidations that ended at least
//     Window before R started (R may be served the previous value for at
//     most Window): the model is unchanged and each read's interval
//     starts Window earlier.
//   - Tracked (an L1 over a store whose server reports changes): besides
//     the values the Leases model allows, R in process p may return a
//     value that p's L1 read from the store (a Tracked op) unless p has
//     handled a report of a change of k (or a flush) since that read.
//   - !Leases (leases off, or a store without them): R never returns a
//     value the source never held: a version the source had reached when
//     R returned, made by a real load of that key.
type Property struct {
	Leases  bool
	Window  time.Duration
	Tracked bool
}

func (p Property) String() string {
	var parts []string
	if p.Leases {
		parts = append(parts, "no value loaded before an Invalidate that ended before the read")
	} else {
		parts = append(parts, "never a value the source never held")
	}
	if p.Window > 0 {
		parts = append(parts, fmt.Sprintf("previous value allowed for %v", p.Window))
	}
	if p.Tracked {
		parts = append(parts, "L1 value allowed until its process handles a report")
	}
	return strings.Join(parts, "; ")
}

// Result is what Check found.
type Result struct {
	// Ops and Reads count the operations checked; Keys the keys.
	Ops, Reads, Keys int
	// AfterInvalidate counts the reads that started after an Invalidate
	// of their key had ended (Window earlier); Stale those of them that
	// returned a value whose load had ended before that Invalidate began
	// (with Tracked, whether from the store or the L1).
	AfterInvalidate, Stale int
	// Unknown reports that the checker timed out on some key.
	Unknown bool
	// Failures holds, per key that broke the property, a readable
	// account and the history around the first violation.
	Failures []string
}

// OK reports whether the history satisfies the property.
func (r Result) OK() bool { return !r.Unknown && len(r.Failures) == 0 }

// state is the model's state for one key. The sets are strings so that
// states compare with ==: cur is "|id|id|" (loads since the last
// Invalidate), l1 is "p=|id|;p=|id|" (per process, the loads its L1 read
// from the store since its last report), canonically sorted.
type state struct {
	src int64
	cur string
	l1  string
}

func has(set, id string) bool { return strings.Contains(set, "|"+id+"|") }

func add(set, id string) string {
	if has(set, id) {
		return set
	}
	if set == "" {
		set = "|"
	}
	return set + id + "|"
}

func parseL1(s string) map[string]string {
	m := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		if p, set, ok := strings.Cut(part, "="); ok {
			m[p] = set
		}
	}
	return m
}

func formatL1(m map[string]string) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(m)) {
		if m[p] != "" {
			parts = append(parts, p+"="+m[p])
		}
	}
	return strings.Join(parts, ";")
}

func (p Property) step(st state, op Op) (bool, state) {
	proc := fmt.Sprint(op.Proc)
	switch op.Kind {
	case Write:
		if op.Ver != st.src+1 {
			return false, st
		}
		st.src = op.Ver
	case Invalidate:
		if p.Leases {
			st.cur = ""
		}
	case Load:
		if op.Ver != st.src {
			return false, st
		}
		if p.Leases {
			st.cur = add(st.cur, op.Load)
		}
	case Tracked:
		if op.Load == "" {
			return true, st
		}
		if !p.Leases {
			return op.Ver <= st.src, st
		}
		if !has(st.cur, op.Load) {
			return false, st
		}
		m := parseL1(st.l1)
		m[proc] = add(m[proc], op.Load)
		st.l1 = formatL1(m)
	case Report:
		m := parseL1(st.l1)
		delete(m, proc)
		st.l1 = formatL1(m)
	case Read:
		if !p.Leases {
			return op.Ver <= st.src, st
		}
		if has(st.cur, op.Load) {
			return true, st
		}
		return p.Tracked && has(parseL1(st.l1)[proc], op.Load), st
	}
	return true, st
}

func (p Property) model() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return state{} },
		Step: func(s, in, _ any) (bool, any) {
			return p.step(s.(state), in.(Op))
		},
		Equal:             func(a, b any) bool { return a.(state) == b.(state) },
		DescribeOperation: func(in, _ any) string { return describe(in.(Op), 0) },
		DescribeState: func(s any) string {
			st := s.(state)
			return fmt.Sprintf("source v%d, valid loads %s, L1 %s", st.src, st.cur, st.l1)
		},
	}
}

// Check checks ops against p, key by key, giving the checker at most
// timeout per key.
func Check(ops []Op, p Property, timeout time.Duration) Result {
	var res Result
	res.Ops = len(ops)
	var base int64
	for i, op := range ops {
		if i == 0 || op.Start < base {
			base = op.Start
		}
	}
	byKey := map[string][]Op{}
	var flushes []Op
	for _, op := range ops {
		if op.Kind == Read {
			res.Reads++
		}
		if op.Kind == Report && op.Flush {
			flushes = append(flushes, op)
			continue
		}
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	res.Keys = len(byKey)
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		kops := byKey[key]
		for _, f := range flushes { // a flush drops every key
			f.Key = key
			kops = append(kops, f)
		}
		after, stale, first := p.count(kops)
		res.AfterInvalidate += after
		res.Stale += stale
		if msg := p.orphans(kops); msg != "" {
			res.Failures = append(res.Failures, fmt.Sprintf("key %s: %s", key, msg))
			continue
		}
		hist := make([]porcupine.Operation, len(kops))
		for i, op := range kops {
			call := op.Start
			if op.Kind == Read {
				call -= int64(p.Window)
			}
			hist[i] = porcupine.Operation{ClientId: op.Proc*1000 + op.Client, Input: op, Call: call, Return: op.End}
		}
		r, info := porcupine.CheckOperationsVerbose(p.model(), hist, timeout)
		switch r {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			res.Unknown = true
			res.Failures = append(res.Failures, fmt.Sprintf("key %s: the checker timed out after %v on %d operations", key, timeout, len(kops)))
			continue
		}
		res.Failures = append(res.Failures, p.explain(key, kops, first, info, base))
	}
	return res
}

// orphans reports reads of values that no load of the key produced.
func (p Property) orphans(ops []Op) string {
	loads := map[string]Op{}
	for _, op := range ops {
		if op.Kind == Load {
			loads[op.Load] = op
		}
	}
	for _, op := range ops {
		if (op.Kind == Read || op.Kind == Tracked) && op.Load != "" {
			l, ok := loads[op.Load]
			if !ok || l.Ver != op.Ver {
				return fmt.Sprintf("%s returned v%d of load %q, which no load of this key made: a value the source never held here", op.Kind, op.Ver, op.Load)
			}
		}
	}
	return ""
}

// count counts the reads that started Window after an Invalidate ended,
// and those of them served a load that ended before that Invalidate
// began; first is the first such stale read (zero Op if none).
func (p Property) count(ops []Op) (after, stale int, first Op) {
	var invs []Op
	loads := map[string]Op{}
	for _, op := range ops {
		switch op.Kind {
		case Invalidate:
			invs = append(invs, op)
		case Load:
			loads[op.Load] = op
		}
	}
	sort.Slice(invs, func(i, j int) bool { return invs[i].End < invs[j].End })
	// latest[i] is the latest start among invs[:i+1].
	latest := make([]int64, len(invs))
	for i, inv := range invs {
		latest[i] = inv.Start
		if i > 0 {
			latest[i] = max(latest[i], latest[i-1])
		}
	}
	for _, op := range ops {
		if op.Kind != Read {
			continue
		}
		t := op.Start - int64(p.Window)
		n := sort.Search(len(invs), func(i int) bool { return invs[i].End >= t })
		if n == 0 {
			continue
		}
		after++
		if l, ok := loads[op.Load]; ok && l.End < latest[n-1] {
			stale++
			if first.Kind == 0 || op.Start < first.Start {
				first = op
			}
		}
	}
	return after, stale, first
}

// explain describes a violation on key for a person: the first read that
// was served a value loaded before an Invalidate that had ended, with the
// operations around it; or, when no single read shows it (the model
// failed elsewhere), the operations where the checker's longest partial
// linearization stopped.
func (p Property) explain(key string, ops []Op, first Op, info porcupine.LinearizationInfo, base int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %s: the history breaks %q (times in ms after the first operation of the run)\n", key, p)
	var from, to int64
	if first.Kind == Read {
		loads := map[string]Op{}
		var inv Op
		for _, op := range ops {
			if op.Kind == Load {
				loads[op.Load] = op
			}
			if op.Kind == Invalidate && op.End < first.Start-int64(p.Window) && op.Start > inv.Start {
				inv = op
			}
		}
		l := loads[first.Load]
		fmt.Fprintf(&b, "  the read by p%d/g%d at %s ms returned v%d, read from the source by load %s at %s-%s ms,\n  before the Invalidate that ran %s-%s ms (ended before the read began)\n",
			first.Proc, first.Client, strings.TrimSpace(ms(first.Start, base)), first.Ver, first.Load,
			strings.TrimSpace(ms(l.Start, base)), strings.TrimSpace(ms(l.End, base)),
			strings.TrimSpace(ms(inv.Start, base)), strings.TrimSpace(ms(inv.End, base)))
		from, to = min(l.Start, inv.Start), first.End
	} else {
		// The first operation that no partial linearization reached.
		done := map[int]bool{}
		parts := info.PartialLinearizations()
		if len(parts) > 0 {
			longest := []int{}
			for _, lin := range parts[0] {
				if len(lin) > len(longest) {
					longest = lin
				}
			}
			for _, i := range longest {
				done[i] = true
			}
		}
		idx := slices.Collect(func(yield func(int) bool) {
			for i := range ops {
				if !yield(i) {
					return
				}
			}
		})
		slices.SortFunc(idx, func(i, j int) int { return cmp.Compare(ops[i].Start, ops[j].Start) })
		for _, i := range idx {
			if !done[i] {
				fmt.Fprintf(&b, "  no order of the operations explains: %s\n", describe(ops[i], base))
				from, to = ops[i].Start-int64(5*time.Millisecond)-int64(p.Window), ops[i].End
				break
			}
		}
	}
	var window []Op
	for _, op := range ops {
		if op.End >= from && op.Start <= to && (op.Kind != Read || op.Start >= to-int64(2*time.Millisecond)) {
			window = append(window, op)
		}
	}
	if len(window) > 40 { // keep the writes, invalidations and loads
		var keep []Op
		for _, op := range window {
			if op.Kind != Read || op.Start >= to-int64(time.Millisecond) {
				keep = append(keep, op)
			}
		}
		window = keep
		if len(window) > 40 {
			window = window[len(window)-40:]
		}
	}
	b.WriteString(Format(window, base))
	return b.String()
}
