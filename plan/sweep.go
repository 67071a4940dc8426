package plan

// TrafficPoint is the plan at one traffic level: the input's reads and
// writes multiplied by Multiplier, data unchanged.
type TrafficPoint struct {
	Multiplier float64
	// Ops is the peak operations per second at this level.
	Ops  float64
	Plan *Plan
}

// DefaultMultipliers are the traffic levels of the report's charts:
// a sixteenth of today's peak to sixteen times it.
func DefaultMultipliers() []float64 {
	return []float64{0.0625, 0.125, 0.25, 0.5, 1, 2, 4, 8, 16}
}

// Traffic plans the input at each traffic multiplier: how the node count,
// the binding constraint and the cost move as traffic grows while the
// data stays the same (the instance-count-versus-users graph).
func Traffic(cat *Catalog, in Input, multipliers []float64) ([]TrafficPoint, error) {
	var out []TrafficPoint
	for _, m := range multipliers {
		x := in
		x.Workload.ReadsPerSec *= m
		x.Workload.WritesPerSec *= m
		x.Workload.LargeValuesPerSec *= m
		p, err := New(cat, x)
		if err != nil {
			return nil, err
		}
		out = append(out, TrafficPoint{Multiplier: m, Ops: p.Effective.Ops(), Plan: p})
	}
	return out, nil
}

// RowFor returns the plan's row for a node type.
func (p *Plan) RowFor(name string) (Row, bool) {
	for _, r := range p.Rows {
		if r.Node.Name == name {
			return r, true
		}
	}
	return Row{}, false
}
