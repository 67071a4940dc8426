package history

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sort"
	"strconv"
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
//   - Window > 0 (stale-while-revalidate): the same, for the
//     invalidations that ended at least Window before R started (R may be
//     served the previous value for at most Window): the model keeps, per
//     Invalidate, the loads it voided and the time it ended, and a read
//     may return one of them if that Invalidate ended less than Window
//     before the read started.
//   - L1 (an L1 in front of the store): R in process p may also return a
//     value that p's L1 read from the store (a Tracked op T, itself a
//     store read held to the property) when T ended before R did and
//     either (Staleness > 0, docs/l1.md's MaxStaleness) T began at most
//     Staleness before R started (the L1 counts from before its store
//     read was sent, so this is the exact bound), or (Staleness == 0: the server reports
//     changes) p handled no report of a change of k, and no flush,
//     between the end of T and the start of R.
//   - !Leases (leases off, or a store without them): R never returns a
//     value the source never held: a version the source had reached when
//     R returned, made by a real load of that key.
type Property struct {
	Leases    bool
	Window    time.Duration
	L1        bool
	Staleness time.Duration
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
	switch {
	case p.L1 && p.Staleness > 0:
		parts = append(parts, fmt.Sprintf("an L1 value allowed for %v after its store read", p.Staleness))
	case p.L1:
		parts = append(parts, "an L1 value allowed until its process handles a report of the key")
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
	// Partitions counts the reads and loads checked one by one; Broken
	// those that break the property.
	Partitions, Broken int
	// Unknown reports that the checker timed out on some partition.
	Unknown bool
	// Failures holds, per key that broke the property, a readable
	// account and the history around the first violation.
	Failures []string
}

// OK reports whether the history satisfies the property.
func (r Result) OK() bool { return !r.Unknown && len(r.Failures) == 0 }

// state is the model's state for one key. cur, the loads made since the
// last Invalidate, is a string "|id|id|" so that states compare with ==.
type state struct {
	src int64
	cur string
	// prev (Window > 0) lists the recent invalidations as
	// "end:|id|id|;...": the loads each one voided and when it ended.
	prev string
}

var seed = maphash.MakeSeed()

// input is an operation as the model sees it: l1 marks a read that its
// process's L1 can explain (see Property), decided from the Tracked and
// Report operations before the check.
type input struct {
	op Op
	l1 bool
}

func has(set, id string) bool { return strings.Contains(set, "|"+id+"|") }

// add returns set with id, sorted: equal sets are equal strings, so the
// checker's cache of visited states works.
func add(set, id string) string {
	if has(set, id) {
		return set
	}
	ids := append(strings.Split(strings.Trim(set, "|"), "|"), id)
	if set == "" {
		ids = ids[1:]
	}
	slices.Sort(ids)
	return "|" + strings.Join(ids, "|") + "|"
}

func (p Property) step(st state, in input) (bool, state) {
	op := in.op
	switch op.Kind {
	case Write:
		if op.Ver != st.src+1 {
			return false, st
		}
		st.src = op.Ver
	case Invalidate:
		if p.Leases {
			if p.Window > 0 {
				st.prev += fmt.Sprintf(";%d:%s", op.End, st.cur)
			}
			st.cur = ""
		}
	case Load:
		if op.Ver != st.src {
			return false, st
		}
		if p.Leases {
			st.cur = add(st.cur, op.Load)
		}
	case Tracked, Read: // a store read for an L1 is held to the property too
		if op.Load == "" {
			return true, st
		}
		if !p.Leases {
			return op.Ver <= st.src, st
		}
		return has(st.cur, op.Load) || in.l1 || p.recent(st.prev, op), st
	}
	return true, st
}

// recent reports whether read r may return a load voided by an
// Invalidate that ended less than Window before r started.
func (p Property) recent(prev string, r Op) bool {
	for _, e := range strings.Split(prev, ";") {
		end, set, ok := strings.Cut(e, ":")
		if !ok {
			continue
		}
		if t, _ := strconv.ParseInt(end, 10, 64); t >= r.Start-int64(p.Window) && has(set, r.Load) {
			return true
		}
	}
	return false
}

func (p Property) model(src int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return state{src: src} },
		Step: func(s, in, _ any) (bool, any) {
			return p.step(s.(state), in.(input))
		},
		Equal: func(a, b any) bool { return a.(state) == b.(state) },
		Hash: func(s any) uint64 {
			st := s.(state)
			return uint64(st.src)*1_000_003 ^ maphash.String(seed, st.cur) ^ maphash.String(seed, st.prev)*31
		},
		DescribeOperation: func(in, _ any) string { return describe(in.(input).op, 0) },
		DescribeState: func(s any) string {
			st := s.(state)
			return fmt.Sprintf("source v%d, valid loads %s, recently voided %s", st.src, st.cur, st.prev)
		},
	}
}

// Check checks ops against p.
//
// The property is per read: it relates one read to the invalidations and
// writes of its key and to the load it returned, not reads to each other
// (a read that overlaps an Invalidate may return the old value even after
// another read has returned the new one: the docs allow it, a
// linearizable register would not). So each read is checked on its own,
// with porcupine, against the model: the partition of a read holds the
// read, its load, and the writes and invalidations of its key that
// overlap them, from the source version they start at. Each load is
// checked the same way against the source (it read a version the source
// held). A partition gets at most timeout.
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
		explained := p.explained(kops)
		after, stale, definite := p.count(kops, explained)
		res.AfterInvalidate += after
		res.Stale += stale
		if msg := p.orphans(kops); msg != "" {
			res.Failures = append(res.Failures, fmt.Sprintf("key %s: %s", key, msg))
			continue
		}
		res.checkKey(p, key, kops, explained, definite, timeout, base)
	}
	return res
}

// checkKey checks every read and load of one key, each in its partition.
func (res *Result) checkKey(p Property, key string, ops []Op, explained, definite []bool, timeout time.Duration, base int64) {
	loads := map[string]Op{}
	var changes []Op // writes and invalidations, by start
	for _, op := range ops {
		switch op.Kind {
		case Load:
			loads[op.Load] = op
		case Write, Invalidate:
			changes = append(changes, op)
		}
	}
	slices.SortFunc(changes, func(a, b Op) int { return cmp.Compare(a.Start, b.Start) })
	var failed []Op
	var first []Op
	for i, op := range ops {
		var part []Op
		switch {
		case op.Kind == Load:
			part = []Op{op}
		case (op.Kind == Read || op.Kind == Tracked) && op.Load != "" && !explained[i]:
			part = []Op{op}
			if p.Leases {
				part = append(part, loads[op.Load])
			}
		default:
			continue
		}
		lo, hi := part[0].Start, part[0].End
		for _, x := range part {
			lo, hi = min(lo, x.Start), max(hi, x.End)
		}
		var src int64
		for _, c := range changes {
			switch {
			case c.End < lo:
				if c.Kind == Write {
					src = max(src, c.Ver)
				}
			case c.Start <= hi:
				part = append(part, c)
			}
		}
		hist := make([]porcupine.Operation, len(part))
		for j, x := range part {
			hist[j] = porcupine.Operation{ClientId: j, Input: input{op: x}, Call: x.Start, Return: x.End}
		}
		res.Partitions++
		if !definite[i] { // a definite violation needs no search (see count)
			switch porcupine.CheckOperationsTimeout(p.model(src), hist, timeout) {
			case porcupine.Ok:
				continue
			case porcupine.Unknown:
				res.Unknown = true
			}
		}
		failed = append(failed, op)
		if first == nil || op.Start < first[0].Start {
			first = part
		}
	}
	res.Broken += len(failed)
	if len(failed) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "key %s: %d operations break %q (times in ms after the first operation of the run); the first:\n", key, len(failed), p)
	x := first[0]
	switch x.Kind {
	case Load:
		fmt.Fprintf(&b, "  a load read v%d, a version the source did not hold while it ran\n", x.Ver)
	default:
		l := loads[x.Load]
		fmt.Fprintf(&b, "  p%d/g%d's %s at %s ms returned v%d of load %s, which read the source at %s-%s ms; no order of these operations within their intervals allows it:\n",
			x.Proc, x.Client, x.Via, strings.TrimSpace(ms(x.Start, base)), x.Ver, x.Load,
			strings.TrimSpace(ms(l.Start, base)), strings.TrimSpace(ms(l.End, base)))
	}
	if len(first) > 40 {
		first = append(first[:2], first[len(first)-38:]...)
	}
	b.WriteString(Format(first, base))
	res.Failures = append(res.Failures, b.String())
}

// explained marks the reads of ops (one key) that their process's L1 can
// explain: it read the same load from the store (Tracked) before the
// read returned, and kept it until the read began (see Property).
func (p Property) explained(ops []Op) []bool {
	out := make([]bool, len(ops))
	if !p.L1 {
		return out
	}
	type pl struct {
		proc int
		load string
	}
	tracked := map[pl][]Op{}
	reports := map[int][]Op{}
	for _, op := range ops {
		switch op.Kind {
		case Tracked:
			if op.Load != "" {
				tracked[pl{op.Proc, op.Load}] = append(tracked[pl{op.Proc, op.Load}], op)
			}
		case Report:
			reports[op.Proc] = append(reports[op.Proc], op)
		}
	}
	for i, r := range ops {
		if r.Kind != Read {
			continue
		}
		for _, t := range tracked[pl{r.Proc, r.Load}] {
			if t.End > r.End {
				continue
			}
			if p.Staleness > 0 {
				if t.Start+int64(p.Staleness) >= r.Start {
					out[i] = true
				}
				continue
			}
			dropped := false
			for _, rep := range reports[r.Proc] {
				if rep.Start > t.End && rep.End < r.Start {
					dropped = true
					break
				}
			}
			if !dropped {
				out[i] = true
				break
			}
		}
	}
	return out
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
// began; definite marks those of them that no L1 explains: with leases,
// no linearization can accept them (the load ended before an Invalidate
// that ended before the read began), so the search need not prove it.
func (p Property) count(ops []Op, explained []bool) (after, stale int, definite []bool) {
	definite = make([]bool, len(ops))
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
	for i, op := range ops {
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
			definite[i] = p.Leases && !explained[i]
		}
	}
	return after, stale, definite
}
