package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/kuracache/kura/internal/units"
)

// HoursPerMonth is the month the monthly costs are computed over (the
// 730 hours AWS's and Google's calculators use).
const HoursPerMonth = 730

// RESP framing the planner adds to each operation when no measured
// bytes-per-operation are given: a GET request is "*2\r\n$3\r\nGET\r\n$N\r\n"
// + key + "\r\n", a SET request one more bulk string, a bulk reply
// "$N\r\n" + value + "\r\n", a SET reply "+OK\r\n".
const (
	respRequestBytes = 24
	respBulkBytes    = 14
	respReplyBytes   = 8
	respOKBytes      = 5
)

// maxKeys bounds key counts: a quadrillion keys is beyond any cache, and
// sums of bucket counts stay far from overflowing.
const maxKeys = 1e15

// DefaultNetworkCeiling is the share of a node's baseline bandwidth the
// planner lets the peak use. It is kura's default, not a provider rule:
// the remaining 20% absorbs traffic above the measured peak. Change it
// with Rules.NetworkCeiling.
const DefaultNetworkCeiling = 0.8

// Workload is what the cache must hold and serve at peak.
type Workload struct {
	// DataBytes is what the data takes in memory, as Redis counts it
	// (INFO used_memory, or the total of a scan). When zero it is
	// Keys × (AvgValueBytes + KeyBytes), which leaves out Redis's
	// per-key overhead.
	DataBytes float64
	// Keys is the number of keys; KeyBytes their average length.
	Keys     int64
	KeyBytes float64
	// AvgValueBytes is the average value size as stored.
	AvgValueBytes float64
	// MaxValueBytes is the largest value, checked against every node's
	// link. Zero skips the check.
	MaxValueBytes float64
	// ValueSizes is the value-size distribution, when a scan gave one.
	// The value-size guard needs it to change memory and traffic; without
	// it the guard only changes the largest value.
	ValueSizes []SizeBucket

	// ReadsPerSec and WritesPerSec are the peak rates over the whole
	// cache.
	ReadsPerSec  float64
	WritesPerSec float64
	// ReadValueBytes and WriteValueBytes are the value bytes one read
	// returns and one write sends. Zero means AvgValueBytes.
	ReadValueBytes  float64
	WriteValueBytes float64
	// InBytesPerOp and OutBytesPerOp, when set, are measured bytes the
	// server received and sent per operation (kura bench --json), used
	// instead of value sizes plus RESP framing.
	InBytesPerOp  float64
	OutBytesPerOp float64

	// CPUSecondsPerOp is the engine's CPU per operation on one thread
	// (kura bench: server cpu_seconds_per_1k_ops / 1000).
	CPUSecondsPerOp float64
	// OpsPerSecPerThread is the throughput one engine thread reaches when
	// saturated; used when CPUSecondsPerOp is zero.
	OpsPerSecPerThread float64
	// Scaling is the throughput-versus-threads curve; nil uses the
	// catalog's. Only its shape is used: throughput at N threads over
	// throughput at one.
	Scaling *Scaling

	// Replicas per primary. Each replica is a node to pay for and
	// receives every write from its primary.
	Replicas int
	// Growth is the expected growth of data and traffic as a fraction
	// (0.3 plans for 30% more than today).
	Growth float64
	// LargeValuesPerSec is how often the largest value crosses the link
	// at peak; it turns the largest-value check into a queue estimate.
	LargeValuesPerSec float64
	// Notes from whoever measured the inputs, printed with the plan.
	Notes []string
}

// SizeBucket is one bar of a value-size distribution: Keys values of at
// most MaxBytes each, Bytes in total.
type SizeBucket struct {
	MaxBytes float64
	Keys     int64
	Bytes    float64
}

// Rules override the providers' headroom rules for one plan. Zero fields
// keep the catalog's.
type Rules struct {
	// ReservedMemoryPct replaces every node's reserved memory share when
	// set.
	ReservedMemoryPct *float64
	// MemoryCeiling and CPUCeiling are fractions in (0, 1].
	MemoryCeiling float64
	CPUCeiling    float64
	// NetworkCeiling is the usable fraction of baseline bandwidth;
	// zero means DefaultNetworkCeiling.
	NetworkCeiling float64
}

// WhatIf changes the workload before sizing.
type WhatIf struct {
	// CodecRatio is encoded bytes after the change over bytes before
	// (0.33 for a codec that cuts bytes to a third). It scales the values
	// in memory, on the wire and the largest value. Zero means no change.
	CodecRatio float64
	// CodecName says where the ratio came from, for the report
	// ("json → zstd-3+dict-16KiB"); optional.
	CodecName string
	// MaxValueBytes is a value-size guard (kura.Options.MaxValueSize):
	// values above it are not cached. Zero means no guard.
	MaxValueBytes float64
	// Threads sets the engine's thread count on every node type (Redis
	// io-threads). Zero keeps each node's own.
	Threads int
}

// Input is everything one plan needs besides the catalog.
type Input struct {
	Workload Workload
	Rules    Rules
	WhatIf   WhatIf
	// Nodes restricts the plan to these node types; empty means all.
	Nodes []string
	// Prices add or replace hourly prices by node name (a price the user
	// has and the catalog lacks).
	Prices map[string]float64
	// Pricing chooses the region, engine and discounts.
	Pricing Pricing
	// InstanceGiB is the size of one Memorystore for Redis instance (a
	// capacity tier row); zero lets the planner pick, per tier, the size
	// that holds the data in the fewest instances.
	InstanceGiB float64

	// fleet, set by Compare, sizes one tier row for a given instance
	// count and size.
	fleet *fleetSize
}

// fleetSize is the instance count and size Compare puts a tier row at.
type fleetSize struct {
	count int
	gib   float64
}

// Constraint names what a node count is sized for.
type Constraint int

// The three constraints.
const (
	Memory Constraint = iota
	CPU
	Network
)

// String is the constraint's name as the reports print it.
func (c Constraint) String() string {
	switch c {
	case Memory:
		return "memory"
	case CPU:
		return "CPU"
	case Network:
		return "network"
	}
	return fmt.Sprintf("Constraint(%d)", int(c))
}

// Need is one constraint's answer for a node type.
type Need struct {
	// Checked is false when the catalog or the input lacks a figure;
	// Why then says which.
	Checked bool
	Why     string
	// Demand is what the workload asks (bytes, ops/s or bits/s) and
	// PerNode what one primary offers under its ceiling.
	Demand  float64
	PerNode float64
	// Nodes is the primaries this constraint alone needs.
	Nodes int
	// Utilisation is Demand over the planned primaries' capacity, as a
	// fraction of the ceiling: 1 - Utilisation is the headroom left.
	Utilisation float64
}

// Row is the plan for one node type.
type Row struct {
	Node     NodeType
	Provider Provider
	// Skipped, when set, says why the row could not be sized at all.
	Skipped string
	// Shards is the primaries; Nodes adds their replicas.
	Shards int
	Nodes  int
	// Needs is indexed by Constraint.
	Needs [3]Need
	// Binding is the constraint that set Shards.
	Binding Constraint
	// Threads is the engine threads used for CPU; ThreadsAssumed is set
	// when the catalog has none and one thread was assumed.
	Threads        int
	ThreadsAssumed bool
	// Priced is false when no price is known; MonthlyCost is then zero
	// and Unpriced says why. PriceFlag is set when the price came from
	// Input.Prices rather than the catalog. HourlyPrice is one node's
	// (one instance's, for a capacity tier); MonthlyCost all billed
	// nodes' for HoursPerMonth, after Discount.
	Priced      bool
	PriceFlag   bool
	HourlyPrice float64
	MonthlyCost float64
	Unpriced    string
	// Quote is the price used, with its region, engine, source and date.
	Quote *Quote
	// Billed is the nodes paid for: Nodes, or Shards when the price
	// includes the replica (Memorystore Standard).
	Billed int
	// Discount is the fraction taken off the on-demand price; Term is
	// the commitment it comes from ("" for the user's own fraction).
	Discount     float64
	DiscountTerm string
	// Region is the region the row is priced in.
	Region string
	// InstanceGiB is a capacity tier row's instance size; InstanceGiven
	// is set when the size was given rather than picked for the data.
	InstanceGiB   float64
	InstanceGiven bool
	// The rules the row was sized under: ceilings as fractions, reserved
	// memory in percent.
	MemoryCeil  float64
	CPUCeil     float64
	NetworkCeil float64
	ReservedPct float64
	// Largest is the largest value against this node's link; nil when
	// there is no largest value or no baseline bandwidth.
	Largest *LargeValue
}

// LargeValue is the largest value against one node's link.
type LargeValue struct {
	Bytes float64
	// Seconds is one transfer at baseline bandwidth; BurstSeconds at
	// burst (zero when the node has no burst figure).
	Seconds      float64
	BurstSeconds float64
	// PerSecToSaturate is how many such transfers a second fill the
	// baseline link.
	PerSecToSaturate float64
	// Utilisation is Workload.LargeValuesPerSec over PerSecToSaturate;
	// above 1 the queue grows by Utilisation-1 seconds every second.
	Utilisation float64
}

// Effective is the workload after growth and what-ifs: the numbers the
// rows were sized for.
type Effective struct {
	// DataBytes, Keys and AvgValueBytes describe the data as sized.
	DataBytes     float64
	Keys          int64
	AvgValueBytes float64
	// MaxValueBytes is the largest value after the codec and the guard.
	MaxValueBytes float64
	// ReadsPerSec and WritesPerSec are the peak rates the cache serves.
	ReadsPerSec  float64
	WritesPerSec float64
	// InBitsPerSec and OutBitsPerSec are what all primaries receive and
	// send, replication included.
	InBitsPerSec  float64
	OutBitsPerSec float64
	// CPUSecondsOp and OpsPerThread are the CPU figures given (one of
	// them, or neither).
	CPUSecondsOp float64
	OpsPerThread float64
	// Scaling is the thread curve used; ScalingDefault is set when it is
	// the catalog's.
	Scaling        *Scaling
	ScalingDefault bool
	Replicas       int
	// GuardedKeys and GuardedBytes left the cache because of the
	// value-size guard (bytes before the codec).
	GuardedKeys  int64
	GuardedBytes float64
	// LargePerSec is the largest value's rate at peak.
	LargePerSec float64
	// The what-ifs applied: CodecRatio, GuardBytes, ThreadsWhatIf (zero:
	// none).
	CodecRatio    float64
	CodecName     string
	GuardBytes    float64
	ThreadsWhatIf int
	// MeasuredPerOp is set when network bytes came from a measurement
	// rather than value sizes plus RESP framing.
	MeasuredPerOp bool
}

// Plan is the answer: every node type sized, ranked by the nodes it
// needs (fewest first; on a tie, the one with more headroom under its
// binding constraint), rows that could not be sized last. A price never
// changes the order: most rows have none, and a ranking by cost would put
// the few priced rows first whatever they need.
type Plan struct {
	Rows []Row
	// Fewest is the index in Rows of the first sized row (the fewest
	// nodes), or -1 when no row could be sized.
	Fewest int
	// Cheapest is the index in Rows of the cheapest priced row when at
	// least two sized rows have a price, else -1: with one price there is
	// nothing to compare it with.
	Cheapest int
	// Why sums the plan up in a few sentences: the fewest nodes and what
	// binds them, then what the prices that exist say.
	Why string
	// Notes are the assumptions and gaps the reader must know about.
	Notes     []string
	Effective Effective
	Catalog   *Catalog
	// Engine is the engine priced ("redis" or "valkey"); Regions the
	// region each provider was priced in ("" for a provider left out).
	Engine  string
	Regions map[string]string
	// Discounts are the discounts applied, by provider.
	Discounts map[string]Discount
	// Before is the same input without its what-ifs, when it has one:
	// the workload as asked and what each row needs and costs then.
	Before *Plan
}

// HasWhatIf reports whether the input changes the workload before sizing.
func (in Input) HasWhatIf() bool { return in.WhatIf != (WhatIf{}) }

// Ops is the peak operations per second.
func (e Effective) Ops() float64 { return e.ReadsPerSec + e.WritesPerSec }

// New sizes every node type of the catalog for the input.
func New(cat *Catalog, in Input) (*Plan, error) {
	if cat == nil {
		return nil, fmt.Errorf("%w: no catalog", ErrInput)
	}
	if err := in.validate(cat); err != nil {
		return nil, err
	}
	if err := in.validatePricing(cat); err != nil {
		return nil, err
	}
	regions, err := resolveRegions(cat, in.Pricing.Regions)
	if err != nil {
		return nil, err
	}
	p := &Plan{Catalog: cat, Fewest: -1, Cheapest: -1, Engine: in.Pricing.Engine, Regions: regions, Discounts: in.Pricing.Discounts}
	if p.Engine == "" {
		p.Engine = DefaultEngine
	}
	if in.HasWhatIf() {
		base := in
		base.WhatIf = WhatIf{}
		if p.Before, err = New(cat, base); err != nil {
			return nil, err
		}
	}
	p.Effective, p.Notes = effective(cat, in)
	p.Notes = append(append([]string(nil), in.Workload.Notes...), p.Notes...)
	want := map[string]bool{}
	for _, n := range in.Nodes {
		c, _ := cat.Node(n)
		want[c.Name] = true
	}
	var left []string
	for _, n := range cat.Nodes {
		if len(want) > 0 && !want[n.Name] {
			continue
		}
		prov, _ := cat.Provider(n.Provider)
		region := regions[prov.Name]
		if region == "" {
			if len(want) == 0 {
				left = append(left, n.Name)
				continue
			}
			return nil, fmt.Errorf("%w: region = %s: node type %s has no price in it (%s is priced in %s)", ErrInput,
				strings.Join(in.Pricing.Regions, ","), n.Name, prov.Name, strings.Join(prov.regionList(), ", "))
		}
		r, err := p.sizeNode(n, prov, region, in, len(want) > 0)
		if err != nil {
			return nil, err
		}
		p.Rows = append(p.Rows, r)
	}
	if len(left) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d node types left out: none of --region %s is a region of their provider", len(left), strings.Join(in.Pricing.Regions, ",")))
	}
	if len(p.Rows) == 0 {
		return nil, fmt.Errorf("%w: region = %s: no node type of the catalog is priced there", ErrInput, strings.Join(in.Pricing.Regions, ","))
	}
	sort.SliceStable(p.Rows, func(i, j int) bool { return rowLess(p.Rows[i], p.Rows[j]) })
	for i, r := range p.Rows {
		if r.Skipped == "" && (p.Fewest < 0 || r.Nodes < p.Rows[p.Fewest].Nodes ||
			r.Nodes == p.Rows[p.Fewest].Nodes && r.Needs[r.Binding].Utilisation < p.Rows[p.Fewest].Needs[p.Rows[p.Fewest].Binding].Utilisation) {
			p.Fewest = i
		}
	}
	if p.pricedRows() >= 2 {
		for i, r := range p.Rows {
			if r.Skipped == "" && r.Priced && (p.Cheapest < 0 || r.MonthlyCost < p.Rows[p.Cheapest].MonthlyCost) {
				p.Cheapest = i
			}
		}
	}
	p.Why = p.explain()
	p.Notes = append(p.Notes, p.gaps()...)
	return p, nil
}

// rowLess ranks sized rows before rows that could not be sized, priced
// rows before unpriced ones, priced rows by monthly cost, the rest by the
// nodes they need (on a tie, more headroom under the binding constraint
// first).
func rowLess(a, b Row) bool {
	if (a.Skipped != "") != (b.Skipped != "") {
		return a.Skipped == ""
	}
	if a.Skipped != "" {
		return a.Node.Name < b.Node.Name
	}
	if a.Priced != b.Priced {
		return a.Priced
	}
	if a.Priced && a.MonthlyCost != b.MonthlyCost {
		return a.MonthlyCost < b.MonthlyCost
	}
	if a.Nodes != b.Nodes {
		return a.Nodes < b.Nodes
	}
	if ua, ub := a.Needs[a.Binding].Utilisation, b.Needs[b.Binding].Utilisation; ua != ub {
		return ua < ub
	}
	return a.Node.Name < b.Node.Name
}

func (in Input) validate(cat *Catalog) error {
	w := in.Workload
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("%w: %s = %v: %s", ErrInput, field, v, rule)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"data bytes", w.DataBytes}, {"key bytes", w.KeyBytes}, {"average value bytes", w.AvgValueBytes},
		{"largest value bytes", w.MaxValueBytes}, {"reads per second", w.ReadsPerSec}, {"writes per second", w.WritesPerSec},
		{"read value bytes", w.ReadValueBytes}, {"write value bytes", w.WriteValueBytes},
		{"in bytes per op", w.InBytesPerOp}, {"out bytes per op", w.OutBytesPerOp},
		{"CPU seconds per op", w.CPUSecondsPerOp}, {"ops per second per thread", w.OpsPerSecPerThread},
		{"growth", w.Growth}, {"large values per second", w.LargeValuesPerSec},
	} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return bad(f.name, f.v, "must be a finite number, not negative")
		}
		if f.v > maxBytes {
			return bad(f.name, f.v, "is beyond any cache (above 10^18)")
		}
	}
	if w.Keys < 0 || w.Keys > maxKeys {
		return bad("keys", w.Keys, "must be from 0 to 10^15")
	}
	if w.Replicas < 0 || w.Replicas > 100 {
		return bad("replicas", w.Replicas, "must be from 0 to 100")
	}
	if w.Growth > 1000 {
		return bad("growth", w.Growth, "is a fraction (0.3 = 30% more); above 1000 is a unit mix-up")
	}
	// Figures a count of nodes is divided by: a tiny one would overflow
	// it (1e-300 ops per thread sized "1 node at 10^300 %").
	if w.OpsPerSecPerThread != 0 && w.OpsPerSecPerThread < 1 {
		return bad("ops per second per thread", w.OpsPerSecPerThread, "must be 0 (not known) or at least 1")
	}
	if w.CPUSecondsPerOp != 0 && w.CPUSecondsPerOp < 1e-9 {
		return bad("CPU seconds per op", w.CPUSecondsPerOp, "must be 0 (not known) or at least 1 ns (1e-9)")
	}
	if w.CPUSecondsPerOp > 10 {
		return bad("CPU seconds per op", w.CPUSecondsPerOp, "is above 10 s per operation: a unit mix-up?")
	}
	for i, b := range w.ValueSizes {
		if b.MaxBytes < 0 || b.Keys < 0 || b.Keys > maxKeys || b.Bytes < 0 || b.Bytes > maxBytes || b.MaxBytes > maxBytes || math.IsNaN(b.MaxBytes) || math.IsNaN(b.Bytes) ||
			math.IsInf(b.MaxBytes, 0) || math.IsInf(b.Bytes, 0) {
			return bad(fmt.Sprintf("value size bucket %d", i+1), b, "must hold finite, non-negative numbers")
		}
	}
	if w.Scaling != nil {
		if err := w.Scaling.validate(); err != nil {
			return fmt.Errorf("%w: thread scaling: %v", ErrInput, err)
		}
	}
	r := in.Rules
	for name, v := range map[string]float64{"memory ceiling": r.MemoryCeiling, "CPU ceiling": r.CPUCeiling, "network ceiling": r.NetworkCeiling} {
		if v < 0 || v > 1 || math.IsNaN(v) {
			return bad(name, v, "is a fraction in (0, 1]")
		}
	}
	if r.ReservedMemoryPct != nil && (*r.ReservedMemoryPct < 0 || *r.ReservedMemoryPct >= 100 || math.IsNaN(*r.ReservedMemoryPct)) {
		return bad("reserved memory percent", *r.ReservedMemoryPct, "must be from 0 to below 100")
	}
	wi := in.WhatIf
	if wi.CodecRatio < 0 || wi.CodecRatio > 100 || math.IsNaN(wi.CodecRatio) {
		return bad("codec ratio", wi.CodecRatio, "is encoded bytes after over before, such as 0.33")
	}
	if wi.MaxValueBytes < 0 || math.IsNaN(wi.MaxValueBytes) || wi.MaxValueBytes > maxBytes {
		return bad("value-size guard", wi.MaxValueBytes, "must be a size in bytes")
	}
	if wi.Threads < 0 || wi.Threads > 1024 {
		return bad("threads", wi.Threads, "must be from 0 (each node's own) to 1024")
	}
	for _, n := range in.Nodes {
		if _, ok := cat.Node(n); !ok {
			return fmt.Errorf("%w: node type %q is not in the catalog", ErrInput, n)
		}
	}
	for n, price := range in.Prices {
		row, ok := cat.Node(n)
		if !ok {
			return fmt.Errorf("%w: price for %q: node type not in the catalog", ErrInput, n)
		}
		if !(price > 0) || price > 1e6 || math.IsInf(price, 0) {
			return fmt.Errorf("%w: price for %q must be a positive hourly price, got %v", ErrInput, n, price)
		}
		if row.MaxGiB > 0 {
			return fmt.Errorf("%w: price for %q: a capacity tier is priced per GB; give a catalog file with its per_gb_hour", ErrInput, n)
		}
	}
	if g := in.InstanceGiB; g < 0 || math.IsNaN(g) || g > 1e6 {
		return bad("instance size", g, "must be a size in GB")
	}

	if w.DataBytes == 0 && w.Keys == 0 && w.ReadsPerSec == 0 && w.WritesPerSec == 0 && w.MaxValueBytes == 0 {
		return fmt.Errorf("%w: nothing to size: give the data size, the traffic or the largest value", ErrInput)
	}
	return nil
}

// effective applies growth and the what-ifs, in the order they happen:
// the codec changes the encoded size, the guard then drops encoded
// values above it.
func effective(cat *Catalog, in Input) (Effective, []string) {
	w := in.Workload
	var notes []string
	e := Effective{
		Keys:          w.Keys,
		AvgValueBytes: w.AvgValueBytes,
		MaxValueBytes: w.MaxValueBytes,
		Replicas:      w.Replicas,
		CPUSecondsOp:  w.CPUSecondsPerOp,
		OpsPerThread:  w.OpsPerSecPerThread,
		Scaling:       w.Scaling,
		LargePerSec:   w.LargeValuesPerSec,
		CodecRatio:    in.WhatIf.CodecRatio,
		CodecName:     in.WhatIf.CodecName,
		GuardBytes:    in.WhatIf.MaxValueBytes,
		ThreadsWhatIf: in.WhatIf.Threads,
	}
	if e.Scaling == nil && cat.Scaling != nil {
		e.Scaling, e.ScalingDefault = cat.Scaling, true
	}
	keyBytes := w.KeyBytes
	data := w.DataBytes
	if data == 0 {
		data = float64(w.Keys) * (w.AvgValueBytes + keyBytes)
		if data > 0 {
			notes = append(notes, "data size is keys × (value + key) bytes, without Redis's per-key overhead; give the data size from INFO used_memory for the real figure")
		}
	}
	// The part of the data a codec or a guard can change: the values.
	values := data
	if w.Keys > 0 && w.AvgValueBytes > 0 {
		values = math.Min(data, float64(w.Keys)*w.AvgValueBytes)
	}
	readVal, writeVal := w.ReadValueBytes, w.WriteValueBytes
	if readVal == 0 {
		readVal = w.AvgValueBytes
	}
	if writeVal == 0 {
		writeVal = w.AvgValueBytes
	}
	inPerOp, outPerOp := w.InBytesPerOp, w.OutBytesPerOp
	e.MeasuredPerOp = inPerOp > 0 || outPerOp > 0

	// readShare is the share of operations still served by the cache.
	readShare := 1.0
	if r := in.WhatIf.CodecRatio; r > 0 && r != 1 {
		if !(w.Keys > 0 && w.AvgValueBytes > 0) && data > 0 {
			notes = append(notes, "codec ratio applied to the whole data size: without a key count and average value size keys and overhead cannot be told apart, so memory is underestimated")
		}
		data = data - values + values*r
		values *= r
		readVal *= r
		writeVal *= r
		e.AvgValueBytes *= r
		e.MaxValueBytes *= r
		inPerOp *= r
		outPerOp *= r
		if e.MeasuredPerOp {
			notes = append(notes, "codec ratio applied to the measured bytes per operation, framing included (a slight underestimate)")
		}
		notes = append(notes, "codec ratio changes bytes, not CPU per operation: below about 1,500 bytes value size barely changes Redis's CPU cost")
	}

	if g := in.WhatIf.MaxValueBytes; g > 0 {
		if len(w.ValueSizes) > 0 {
			var keptKeys int64
			var keptBytes, allBytes float64
			var allKeys int64
			for _, b := range w.ValueSizes {
				avg := 0.0
				if b.Keys > 0 {
					avg = b.Bytes / float64(b.Keys)
				}
				if in.WhatIf.CodecRatio > 0 {
					avg *= in.WhatIf.CodecRatio
				}
				allKeys += b.Keys
				allBytes += b.Bytes
				if avg > g {
					e.GuardedKeys += b.Keys
					e.GuardedBytes += b.Bytes
					continue
				}
				keptKeys += b.Keys
				keptBytes += b.Bytes
			}
			if allBytes > 0 && allKeys > 0 && e.GuardedKeys > 0 {
				ratio := 1.0
				if in.WhatIf.CodecRatio > 0 {
					ratio = in.WhatIf.CodecRatio
				}
				dropped := e.GuardedBytes * ratio
				data = math.Max(0, data-dropped)
				oldAvg := allBytes / float64(allKeys)
				newAvg := 0.0
				if keptKeys > 0 {
					newAvg = keptBytes / float64(keptKeys)
				}
				scale := newAvg / oldAvg
				readVal *= scale
				writeVal *= scale
				inPerOp *= scale
				outPerOp *= scale
				e.AvgValueBytes *= scale
				e.Keys -= e.GuardedKeys
				// Reads of guarded keys miss and go to the database.
				readShare = float64(keptKeys) / float64(allKeys)
				notes = append(notes, fmt.Sprintf("value-size guard %s: %d keys (%s) are no longer cached; assuming operations spread evenly over keys, %.1f%% of reads and writes go to the database instead",
					FormatBytes(g), e.GuardedKeys, FormatBytes(dropped), 100*(1-readShare)))
			}
		} else {
			notes = append(notes, "value-size guard: without a value-size distribution it only changes the largest value; memory and traffic are unchanged")
		}
		if e.MaxValueBytes > g {
			e.MaxValueBytes = g
		}
	}

	grow := 1 + w.Growth
	e.DataBytes = data * grow
	e.Keys = int64(float64(e.Keys) * grow)
	e.ReadsPerSec = w.ReadsPerSec * readShare * grow
	e.WritesPerSec = w.WritesPerSec * readShare * grow
	e.LargePerSec = w.LargeValuesPerSec * grow

	// Network: what the primaries receive and send, replication included.
	var in_, out float64
	if e.MeasuredPerOp {
		in_ = e.Ops() * inPerOp
		out = e.Ops()*outPerOp + e.WritesPerSec*inPerOp*float64(w.Replicas)
	} else {
		req := respRequestBytes + keyBytes
		in_ = e.ReadsPerSec*req + e.WritesPerSec*(req+respBulkBytes+writeVal)
		out = e.ReadsPerSec*(respReplyBytes+readVal) + e.WritesPerSec*respOKBytes +
			e.WritesPerSec*(req+respBulkBytes+writeVal)*float64(w.Replicas)
	}
	e.InBitsPerSec, e.OutBitsPerSec = 8*in_, 8*out
	if w.Replicas > 0 {
		notes = append(notes, "reads are sized on the primaries; replicas add cost and receive every write")
	}
	return e, notes
}

// threadFactor is throughput at t threads over throughput at one, from
// the curve; flat beyond its last point.
func threadFactor(s *Scaling, t int) float64 {
	if s == nil || len(s.Points) == 0 || t <= 1 {
		return 1
	}
	at := func(x float64) float64 {
		pts := s.Points
		if x <= float64(pts[0].Threads) {
			return pts[0].OpsPerSec
		}
		for i := 1; i < len(pts); i++ {
			if x <= float64(pts[i].Threads) {
				a, b := pts[i-1], pts[i]
				f := (x - float64(a.Threads)) / float64(b.Threads-a.Threads)
				return a.OpsPerSec + f*(b.OpsPerSec-a.OpsPerSec)
			}
		}
		return pts[len(pts)-1].OpsPerSec
	}
	return at(float64(t)) / at(1)
}

func sizeRow(n NodeType, prov Provider, in Input, e Effective) Row {
	r := Row{Node: n, Provider: prov}
	rules := in.Rules
	r.ReservedPct = prov.ReservedMemoryPct
	if n.ReservedMemoryPct != nil {
		r.ReservedPct = *n.ReservedMemoryPct
	}
	if rules.ReservedMemoryPct != nil {
		r.ReservedPct = *rules.ReservedMemoryPct
	}
	r.MemoryCeil = firstPositive(rules.MemoryCeiling, prov.MemoryCeiling, 1)
	r.CPUCeil = firstPositive(rules.CPUCeiling, prov.CPUCeiling, 1)
	r.NetworkCeil = firstPositive(rules.NetworkCeiling, DefaultNetworkCeiling)

	// Memory.
	mem := &r.Needs[Memory]
	mem.Demand = e.DataBytes
	switch {
	case e.DataBytes == 0:
		mem.Why = "no data size given"
	case n.MemoryGiB == 0:
		mem.Why = "memory not in the catalog"
	default:
		mem.Checked = true
		mem.PerNode = n.MemoryGiB * (1 << 30) * (1 - r.ReservedPct/100) * r.MemoryCeil
	}

	// CPU.
	r.Threads = n.Threads
	if e.ThreadsWhatIf > 0 {
		r.Threads = e.ThreadsWhatIf
	}
	if r.Threads == 0 {
		r.Threads, r.ThreadsAssumed = 1, true
	}
	cpu := &r.Needs[CPU]
	cpu.Demand = e.Ops()
	perThread := e.OpsPerThread
	if e.CPUSecondsOp > 0 {
		perThread = 1 / e.CPUSecondsOp
	}
	switch {
	case e.Ops() == 0:
		cpu.Why = "no traffic given"
	case perThread == 0:
		cpu.Why = "no CPU cost per operation (give kura bench --json from your server, or --ops-per-thread)"
	default:
		cpu.Checked = true
		cpu.PerNode = perThread * threadFactor(e.Scaling, r.Threads) * r.CPUCeil
	}

	// Network, at baseline.
	net := &r.Needs[Network]
	net.Demand = math.Max(e.InBitsPerSec, e.OutBitsPerSec)
	switch {
	case net.Demand == 0:
		net.Why = "no traffic given"
	case n.BaselineGbps == 0:
		net.Why = "baseline bandwidth not in the catalog"
	default:
		net.Checked = true
		net.PerNode = n.BaselineGbps * 1e9 * r.NetworkCeil
	}

	if e.DataBytes > 0 && n.MemoryGiB == 0 {
		// Sizing by CPU or network alone would print a node count that
		// cannot hold the data.
		r.Skipped = "cannot be sized: memory_gib not in the catalog, and the data needs it"
		r.Largest = largest(n, e)
		return r
	}

	// The binding constraint is the one with the largest exact need.
	best, bestRatio := -1, 0.0
	for c := range r.Needs {
		nd := &r.Needs[c]
		if !nd.Checked {
			continue
		}
		ratio := nd.Demand / nd.PerNode
		nd.Nodes = max(1, int(math.Ceil(ratio-1e-9)))
		if best < 0 || ratio > bestRatio {
			best, bestRatio = c, ratio
		}
	}
	if best < 0 {
		var why []string
		for c, nd := range r.Needs {
			why = append(why, Constraint(c).String()+": "+nd.Why)
		}
		r.Skipped = "not sized (" + strings.Join(why, "; ") + ")"
		r.Largest = largest(n, e)
		return r
	}
	r.Binding = Constraint(best)
	r.Shards = max(1, int(math.Ceil(bestRatio-1e-9)))
	r.Nodes = r.Shards * (1 + e.Replicas)
	for c := range r.Needs {
		nd := &r.Needs[c]
		if nd.Checked {
			nd.Utilisation = nd.Demand / (float64(r.Shards) * nd.PerNode)
		}
	}
	r.Largest = largest(n, e)
	return r
}

// sizeNode sizes one catalog row in its region and prices it: a capacity
// tier gets its instance size first (given, or picked for the data), a
// service that does not run the engine is not sized. named is set when
// the user asked for the row by name: a size its tier cannot take is
// then an error rather than a row left unsized.
func (p *Plan) sizeNode(n NodeType, prov Provider, region string, in Input, named bool) (Row, error) {
	var given bool
	if n.MaxGiB > 0 {
		r := Row{Node: n, Provider: prov, Region: region}
		reserved := prov.ReservedMemoryPct
		if in.Rules.ReservedMemoryPct != nil {
			reserved = *in.Rules.ReservedMemoryPct
		}
		usable := (1 - reserved/100) * firstPositive(in.Rules.MemoryCeiling, prov.MemoryCeiling, 1)
		size, count := in.InstanceGiB, 0
		if in.fleet != nil {
			size, count = in.fleet.gib, in.fleet.count
		}
		given = size > 0
		gib, why := tierSize(n, usable, p.Effective.DataBytes, size, count)
		if why != "" {
			if named || in.fleet != nil {
				return r, fmt.Errorf("%w: instance size = %s", ErrInput, why)
			}
			r.Skipped = why
			return r, nil
		}
		n.MemoryGiB = gib
	}
	r := sizeRow(n, prov, in, p.Effective)
	r.Region = region
	if n.MaxGiB > 0 {
		r.InstanceGiB, r.InstanceGiven = n.MemoryGiB, given
	}
	if len(prov.Engines) > 0 && !slicesContains(prov.Engines, p.Engine) {
		r.Skipped = fmt.Sprintf("%s runs %s, not %s", prov.Name, strings.Join(titles(prov.Engines), " and "), engineTitle(p.Engine))
		return r, nil
	}
	if r.Skipped != "" {
		return r, nil
	}
	q, why := p.quote(n, region, in)
	if q == nil {
		r.Unpriced = why
		return r, nil
	}
	r.Quote, r.Priced, r.PriceFlag, r.HourlyPrice = q, true, q.User, q.PerHour
	r.Billed = r.Nodes
	if q.IncludesReplica {
		r.Billed = r.Shards
	}
	if d, ok := p.Discounts[prov.Name]; ok && !q.User {
		if d.Term != "" && n.NoCommitment != "" {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: no %s commitment discount: %s", n.Name, d.Term, n.NoCommitment))
		} else {
			r.Discount, r.DiscountTerm = d.Fraction, d.Term
		}
	}
	r.MonthlyCost = q.PerHour * HoursPerMonth * float64(r.Billed) * (1 - r.Discount)
	return r, nil
}

func titles(engines []string) []string {
	out := make([]string, len(engines))
	for i, e := range engines {
		out[i] = engineTitle(e)
	}
	return out
}

// regionList is the provider's region names.
func (p Provider) regionList() []string {
	var out []string
	for _, r := range p.Regions {
		out = append(out, r.Name)
	}
	return out
}

func largest(n NodeType, e Effective) *LargeValue {
	if e.MaxValueBytes == 0 || n.BaselineGbps == 0 {
		return nil
	}
	lv := &LargeValue{Bytes: e.MaxValueBytes}
	lv.Seconds = e.MaxValueBytes * 8 / (n.BaselineGbps * 1e9)
	lv.PerSecToSaturate = 1 / lv.Seconds
	if n.BurstGbps > 0 {
		lv.BurstSeconds = e.MaxValueBytes * 8 / (n.BurstGbps * 1e9)
	}
	lv.Utilisation = e.LargePerSec / lv.PerSecToSaturate
	return lv
}

func firstPositive(v ...float64) float64 {
	for _, x := range v {
		if x > 0 {
			return x
		}
	}
	return 1
}

// explain sums the plan up: the fewest nodes and what binds them, then
// the prices there are. It names a cheapest choice only among two or
// more priced rows.
func (p *Plan) explain() string {
	if p.Fewest < 0 {
		return "no node type could be sized: see why under each row"
	}
	r := p.Rows[p.Fewest]
	var b strings.Builder
	fmt.Fprintf(&b, "Fewest nodes: %s, %s, %s-bound: %s", r.Node.Name, nodeCount(r.Nodes), r.Binding, r.bindingSentence())
	var others []string
	for c := range r.Needs {
		nd := r.Needs[c]
		if Constraint(c) == r.Binding {
			continue
		}
		if !nd.Checked {
			others = append(others, fmt.Sprintf("%s not checked (%s)", Constraint(c), nd.Why))
			continue
		}
		others = append(others, fmt.Sprintf("%s uses %.0f%% of its ceiling", Constraint(c), 100*nd.Utilisation))
	}
	if len(others) > 0 {
		b.WriteString("; " + strings.Join(others, ", "))
	}
	b.WriteString(".")
	sized := 0
	for _, q := range p.Rows {
		if q.Skipped == "" {
			sized++
		}
	}
	switch n := p.pricedRows(); {
	case n == 0:
		fmt.Fprintf(&b, " No node type planned has a price, so no cost is shown: give prices with --price NAME=HOURLY or a catalog file (kura plan --print-catalog shows the format).")
	case n == 1:
		for _, q := range p.Rows {
			if q.Priced && q.Skipped == "" {
				fmt.Fprintf(&b, " Only %s has a price (%s): %s cost %s a month. No other node type planned has one, so there is no cost to compare it with.",
					q.Node.Name, q.PriceOrigin(p.Catalog), nodeCount(q.Nodes), money(p.Catalog.Currency, q.MonthlyCost))
			}
		}
	default:
		c := p.Rows[p.Cheapest]
		fmt.Fprintf(&b, " Cheapest of the %d priced node types: %s, %s at %s a month (%s), %s-bound.",
			n, c.Node.Name, nodeCount(c.Nodes), money(p.Catalog.Currency, c.MonthlyCost), c.PriceOrigin(p.Catalog), c.Binding)
		if c.Largest != nil && c.Largest.Utilisation >= 1 {
			fmt.Fprintf(&b, " But the largest value alone keeps its link %.0f%% busy", 100*c.Largest.Utilisation)
			for _, q := range p.Rows {
				if q.Priced && q.Skipped == "" && q.Largest != nil && q.Largest.Utilisation < 1 {
					fmt.Fprintf(&b, "; the cheapest whose link carries it: %s, %s at %s a month", q.Node.Name, nodeCount(q.Nodes), money(p.Catalog.Currency, q.MonthlyCost))
					break
				}
			}
			b.WriteString(".")
		}
		switch sized - n {
		case 0:
		case 1:
			b.WriteString(" 1 node type has no price and is not in that comparison.")
		default:
			fmt.Fprintf(&b, " %d node types have no price and are not in that comparison.", sized-n)
		}
	}
	if w := p.whatIfSentence(); w != "" {
		b.WriteString(" " + w)
	}
	return b.String()
}

// PriceOrigin says whose price a row carries: the user's (Input.Prices,
// kura plan --price) or the catalog's, with its source key, the date of
// the price data and its region; "" for a row without a price.
func (r Row) PriceOrigin(cat *Catalog) string {
	switch {
	case !r.Priced || r.Quote == nil:
		return ""
	case r.PriceFlag:
		return "your price, from --price"
	}
	q := r.Quote
	if cat != nil {
		if _, ok := cat.Source(q.Source); ok {
			return fmt.Sprintf("%s price data of %s for %s", q.Source, q.Date, q.Region)
		}
	}
	d := q.Date
	if d == "" && cat != nil {
		d = cat.Date
	}
	return "the catalog's price of " + d
}

// nodeCount is "1 node" or "12 nodes".
func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

func (r Row) bindingSentence() string {
	nd := r.Needs[r.Binding]
	switch r.Binding {
	case Memory:
		return fmt.Sprintf("%s of data over %s usable per node (%.0f%% reserved, %.0f%% ceiling) needs %d", FormatBytes(nd.Demand), FormatGiB(nd.PerNode), r.ReservedPct, 100*r.MemoryCeil, nd.Nodes)
	case CPU:
		threads := "1 thread"
		if r.Threads != 1 {
			threads = fmt.Sprintf("%d threads", r.Threads)
		}
		return fmt.Sprintf("%.0f ops/s over %.0f ops/s per node (%s, %.0f%% CPU ceiling) needs %d", nd.Demand, nd.PerNode, threads, 100*r.CPUCeil, nd.Nodes)
	default:
		return fmt.Sprintf("%.2f Gbps over %.2f Gbps per node (%.0f%% of %g Gbps baseline) needs %d", nd.Demand/1e9, nd.PerNode/1e9, 100*r.NetworkCeil, r.Node.BaselineGbps, nd.Nodes)
	}
}

func (p *Plan) pricedRows() int {
	n := 0
	for _, r := range p.Rows {
		if r.Priced && r.Skipped == "" {
			n++
		}
	}
	return n
}

// gaps lists what the catalog and input did not give.
func (p *Plan) gaps() []string {
	var notes []string
	var unpriced, nothreads, nonet []string
	for _, r := range p.Rows {
		if r.Skipped == "" && r.Needs[Network].Demand > 0 && !r.Needs[Network].Checked {
			nonet = append(nonet, r.Node.Name)
		}
		if !r.Priced && r.Skipped == "" {
			unpriced = append(unpriced, r.Node.Name)
		}
		if r.ThreadsAssumed && r.Needs[CPU].Checked {
			nothreads = append(nothreads, r.Node.Name)
		}
	}
	if len(unpriced) > 0 {
		why := map[string][]string{}
		var reasons []string
		for _, r := range p.Rows {
			if !r.Priced && r.Skipped == "" {
				if why[r.Unpriced] == nil {
					reasons = append(reasons, r.Unpriced)
				}
				why[r.Unpriced] = append(why[r.Unpriced], r.Node.Name)
			}
		}
		notes = append(notes, fmt.Sprintf("no price for %d of %d node types: their cost is left empty and they are not ranked on cost; add prices with --price NAME=HOURLY or a catalog file",
			len(unpriced), len(p.Rows)))
		for _, w := range reasons {
			notes = append(notes, fmt.Sprintf("unpriced, %s: %s", w, strings.Join(why[w], ", ")))
		}
	}
	for _, r := range p.Rows {
		if r.Needs[CPU].Checked && r.Threads > 1 && threadFactor(p.Effective.Scaling, r.Threads) < 1 {
			notes = append(notes, fmt.Sprintf("the thread curve gives less throughput at %d threads than at one (%.2f×): check how it was measured", r.Threads, threadFactor(p.Effective.Scaling, r.Threads)))
			break
		}
	}
	var overloaded []string
	for _, r := range p.Rows {
		if r.Largest != nil && r.Largest.Utilisation >= 1 {
			overloaded = append(overloaded, r.Node.Name)
		}
	}
	if len(overloaded) > 0 {
		notes = append(notes, fmt.Sprintf("the largest value alone overloads the link of %s at %.3g a second: more nodes help only if those transfers are of different keys, since one key stays on one node",
			strings.Join(overloaded, ", "), p.Effective.LargePerSec))
	}
	if len(nonet) > 0 {
		notes = append(notes, fmt.Sprintf("network not checked for %s: baseline bandwidth not in the catalog", strings.Join(nonet, ", ")))
	}
	if len(nothreads) > 0 {
		notes = append(notes, fmt.Sprintf("engine threads not in the catalog for %s: CPU sized for the single Redis main thread (set --io-threads)", strings.Join(nothreads, ", ")))
	}
	e := p.Effective
	if e.Scaling != nil && e.ScalingDefault && (e.ThreadsWhatIf > 1 || p.anyThreads()) {
		notes = append(notes, "thread scaling from the catalog's curve: "+e.Scaling.Name)
	}
	return notes
}

func (p *Plan) anyThreads() bool {
	for _, r := range p.Rows {
		if r.Threads > 1 && r.Needs[CPU].Checked {
			return true
		}
	}
	return false
}

func money(currency string, v float64) string {
	sym := currency + " "
	if currency == "USD" {
		sym = "$"
	}
	return sym + commas(v)
}

// commas prints v with two decimals and thousands separators.
func commas(v float64) string { return units.Group(fmt.Sprintf("%.2f", v)) }

// Money formats an amount in the catalog's currency, as the reports do.
func (p *Plan) Money(v float64) string { return money(p.Catalog.Currency, v) }

// Price formats an hourly price, keeping the digits providers publish
// ($0.034, not $0.03).
func (p *Plan) Price(v float64) string {
	if v >= 100 {
		return p.Money(v)
	}
	digits := strings.TrimRight(fmt.Sprintf("%.4f", v), "0")
	if i := strings.IndexByte(digits, '.'); len(digits)-i < 3 {
		digits += strings.Repeat("0", 3-(len(digits)-i))
	}
	return strings.TrimSuffix(p.Money(0), "0.00") + digits
}

// Cheapest row of the plan with a price, or false.
func (p *Plan) firstPriced() (Row, bool) {
	for _, r := range p.Rows {
		if r.Priced && r.Skipped == "" {
			return r, true
		}
	}
	return Row{}, false
}

// WhatIfCost is the what-if in money: the cheapest priced answer before
// and after it, and the change per month (negative: a saving).
type WhatIfCost struct {
	Before, After Row
	Delta         float64
	// Pct is Delta over the cost before, as a fraction.
	Pct float64
}

// WhatIf prices the what-if: the cheapest answer as asked against the
// cheapest with the what-if; false without a what-if or prices.
func (p *Plan) WhatIf() (WhatIfCost, bool) {
	if p.Before == nil {
		return WhatIfCost{}, false
	}
	b, ok1 := p.Before.firstPriced()
	a, ok2 := p.firstPriced()
	if !ok1 || !ok2 || b.MonthlyCost == 0 {
		return WhatIfCost{}, false
	}
	d := a.MonthlyCost - b.MonthlyCost
	return WhatIfCost{Before: b, After: a, Delta: d, Pct: d / b.MonthlyCost}, true
}

// Signed prints a change of money with its sign: -$458.44, +$12.00.
func (p *Plan) Signed(v float64) string {
	if v < 0 {
		return "-" + p.Money(-v)
	}
	return "+" + p.Money(v)
}

// Pct prints a fraction as a signed whole percentage: -35%.
func Pct(f float64) string {
	v := math.Round(100 * f)
	if v == 0 {
		return "0%"
	}
	return fmt.Sprintf("%+.0f%%", v)
}

// whatIfSentence says what the what-if changes: the node type whose
// count it cuts first (and which of its limits now holds the load), and
// the cheapest answer before and after, in money.
func (p *Plan) whatIfSentence() string {
	if p.Before == nil {
		return ""
	}
	var b strings.Builder
	for _, r := range p.Rows {
		old, ok := p.Before.RowFor(r.Node.Name)
		if !ok || r.Skipped != "" || old.Skipped != "" || r.Nodes >= old.Nodes {
			continue
		}
		fmt.Fprintf(&b, "With the what-if %s needs %s where it needed %d", r.Node.Name, nodeCount(r.Nodes), old.Nodes)
		nd := r.Needs[r.Binding]
		switch r.Binding {
		case Network:
			fmt.Fprintf(&b, ": its %g Gbps baseline now holds the %.2f Gbps peak (%.0f%% of its %.0f%% ceiling)", r.Node.BaselineGbps, nd.Demand/1e9, 100*nd.Utilisation, 100*r.NetworkCeil)
		case Memory:
			fmt.Fprintf(&b, ": %s of data now fits in %s usable per node", FormatBytes(nd.Demand), FormatGiB(nd.PerNode))
		case CPU:
			fmt.Fprintf(&b, ": %.0f ops/s at %.0f ops/s per node", nd.Demand, nd.PerNode)
		}
		b.WriteString(".")
		break
	}
	if w, ok := p.WhatIf(); ok {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "The cheapest answer goes from %s × %s (%s a month) to %s × %s (%s): %s a month (%s).",
			fmt.Sprint(w.Before.Nodes), w.Before.Node.Name, p.Money(w.Before.MonthlyCost), fmt.Sprint(w.After.Nodes), w.After.Node.Name,
			p.Money(w.After.MonthlyCost), p.Signed(w.Delta), Pct(w.Pct))
	}
	return b.String()
}
