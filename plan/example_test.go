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

// Twenty-four Memorystore for Redis M2 instances or six M4 at the same
// total memory, Standard tier (one replica each), priced with the catalog
// kura ships.
func ExampleCompare() {
	cat := plan.DefaultCatalog()
	c, err := plan.Compare(cat, plan.CompareInput{
		Input: plan.Input{
			Workload: plan.Workload{DataBytes: 120 << 30, Replicas: 1},
			Rules:    plan.Rules{MemoryCeiling: 0.5}, // half of each instance filled
		},
		From: plan.Fleet{Node: "M2", Count: 24},
		To:   plan.Fleet{Node: "M4", Count: 6},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p := c.Plan
	fmt.Printf("%s, %g GB each: %s a month\n", c.From.Fleet, c.From.InstanceGiB, p.Money(c.From.MonthlyCost))
	fmt.Printf("%s, %g GB each: %s a month\n", c.To.Fleet, c.To.InstanceGiB, p.Money(c.To.MonthlyCost))
	fmt.Printf("change: %s (%s), CPU per instance %.2f×, %s-bound\n", p.Signed(c.CostDelta), plan.Pct(c.CostPct), c.CPUPerNode, c.To.Binding)
	// Output:
	// 24 × memorystore-redis-M2, 10 GB each: $9,460.80 a month
	// 6 × memorystore-redis-M4, 40 GB each: $6,132.00 a month
	// change: -$3,328.80 (-35%), CPU per instance 1.70×, memory-bound
}

// Pricing a plan in Tokyo, on Valkey, with a 1-year committed-use
// discount on Memorystore: each row says whose price it carries.
func ExampleNew_pricing() {
	p, err := plan.New(plan.DefaultCatalog(), plan.Input{
		Workload: plan.Workload{DataBytes: 20 << 30},
		Nodes:    []string{"cache.r7g.large", "cache.m7g.large", "redis-highmem-medium"},
		Pricing: plan.Pricing{Regions: []string{"tokyo"}, Engine: "valkey",
			Discounts: map[string]plan.Discount{"memorystore-cluster": {Term: "1y"}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range p.Rows {
		if r.Priced {
			fmt.Printf("%s: %d nodes, %s a month (%s)\n", r.Node.Name, r.Nodes, p.Money(r.MonthlyCost), r.PriceOrigin(p.Catalog))
		} else {
			fmt.Printf("%s: %d nodes, no price: %s\n", r.Node.Name, r.Nodes, r.Unpriced)
		}
	}
	// Output:
	// redis-highmem-medium: 2 nodes, $288.50 a month (GCP-BC price data of 2026-04-27 for asia-northeast1)
	// cache.r7g.large: 3 nodes, $460.78 a month (AWS-2026-NOTES price data of 2026-11-29 for ap-northeast-1)
	// cache.m7g.large: 5 nodes, no price: no Valkey price for ap-northeast-1 in the catalog (not found in a public copy of the price list)
}
