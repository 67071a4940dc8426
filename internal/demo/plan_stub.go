//go:build !kura_plan

package demo

import "github.com/kuracache/kura/loadgen"

// planRow is one node type of a plan, formatted for the demo's tables.
type planRow struct {
	node, binding, monthly string
	nodes                  int
	cheapest               bool
	largestSeconds         float64
	largestFits            bool
}

// planNodes sizes the article cache for every node type of kura plan's
// catalog from the sweep's measured numbers.
func planNodes(*loadgen.SweepResult, planWorkload) ([]planRow, []string, error) {
	return nil, nil, errPlanNotBuilt
}

// planLargest checks a value of size bytes, read perSec times a second,
// against every node type's link.
func planLargest(float64, float64) ([]planRow, error) {
	return nil, errPlanNotBuilt
}
