package plan_test

import (
	"fmt"
	"strings"

	"github.com/kuracache/kura/plan"
)

// Sizing 120 GiB of data and 300,000 ops/s on two node types of a small
// catalog (FIXTURE figures and prices, not real ones).
func Example() {
	cat, err := plan.ParseCatalog(strings.NewReader(`{
	  "date": "2026-11-23", "currency": "USD", "price_region": "fixture",
	  "providers": [{"name": "p", "reserved_memory_pct": 25, "memory_ceiling": 1, "cpu_ceiling": 0.9}],
	  "nodes": [
	    {"name": "small", "provider": "p", "memory_gib": 16, "baseline_gbps": 1, "price_per_hour": 0.2, "date": "2026-11-23", "source": "fixture"},
	    {"name": "large", "provider": "p", "memory_gib": 64, "threads": 4, "baseline_gbps": 4, "price_per_hour": 0.7, "date": "2026-11-23", "source": "fixture"}
	  ],
	  "scaling": {"name": "fixture curve", "points": [{"threads": 1, "ops_per_sec": 100000}, {"threads": 4, "ops_per_sec": 250000}]}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := plan.New(cat, plan.Input{Workload: plan.Workload{
		DataBytes:          120 << 30,
		ReadsPerSec:        270000,
		WritesPerSec:       30000,
		AvgValueBytes:      500,
		OpsPerSecPerThread: 100000,
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range p.Rows {
		fmt.Printf("%s: %d nodes, %s-bound, %s a month\n", r.Node.Name, r.Nodes, r.Binding, p.Money(r.MonthlyCost))
	}
	fmt.Println("fewest nodes:", p.Rows[p.Fewest].Node.Name)
	fmt.Println("cheapest:", p.Rows[p.Cheapest].Node.Name)
	// Output:
	// small: 10 nodes, memory-bound, $1,460.00 a month
	// large: 3 nodes, memory-bound, $1,533.00 a month
	// fewest nodes: large
	// cheapest: small
}
