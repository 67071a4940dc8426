package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Pricing chooses which of a catalog's prices a plan uses. The zero value
// is each provider's first region, the Redis OSS engine, on-demand
// prices.
type Pricing struct {
	// Regions are region names or aliases ("us-east-1", "tokyo"). Each
	// provider is priced in the first of them it has; a provider with
	// none of them is left out of the plan. Empty means each provider's
	// first region.
	Regions []string
	// Engine is "redis" (Redis OSS, the default) or "valkey". A service
	// that does not run the engine is not sized.
	Engine string
	// Discounts are by provider name: a fraction off the on-demand price
	// (the user's own reserved-node discount) or a term of the
	// provider's published committed-use discounts.
	Discounts map[string]Discount
}

// Discount is a discount off one provider's on-demand prices.
type Discount struct {
	// Fraction is the share taken off (0.3 for 30%). Set by New from the
	// catalog when Term is given.
	Fraction float64
	// Term is a committed-use term of the catalog ("1y", "3y"); empty
	// for a fraction the user gives.
	Term string
	// Source says where the fraction came from.
	Source string
}

// Quote is the price a row was costed with.
type Quote struct {
	// PerHour is one node's (or Memorystore instance's) on-demand price
	// for an hour; PerGBHour is set when PerHour is that rate times the
	// instance size.
	PerHour   float64
	PerGBHour float64
	Region    string
	Engine    string
	// ServiceTier is Memorystore for Redis's "basic" or "standard".
	ServiceTier     string
	IncludesReplica bool
	// Source is the source key (or the row's source for a simple-form
	// price, "--price" for the user's); SourceTitle its description;
	// Date the date of the price data.
	Source      string
	SourceTitle string
	Date        string
	Note        string
	// User is set for a price given in Input.Prices.
	User bool
}

// DefaultEngine is the engine a plan prices when Pricing.Engine is empty.
const DefaultEngine = "redis"

// engineTitle is how the reports name an engine.
func engineTitle(e string) string {
	switch e {
	case "redis":
		return "Redis OSS"
	case "valkey":
		return "Valkey"
	}
	return e
}

// EngineTitle is the engine as the reports name it ("Redis OSS").
func (p *Plan) EngineTitle() string { return engineTitle(p.Engine) }

// resolveRegions picks each provider's region: the first of the wanted
// names it has, else (with names given) "" to leave it out, else its
// first region. A name no provider has is an error.
func resolveRegions(cat *Catalog, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range names {
		found := false
		for _, p := range cat.Providers {
			if _, ok := p.region(name); ok {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: region = %s: not in the catalog (it has %s)", ErrInput, name, strings.Join(cat.regionNames(), ", "))
		}
	}
	for _, p := range cat.Providers {
		if len(p.Regions) == 0 {
			out[p.Name] = cat.PriceRegion
			continue
		}
		if len(names) == 0 {
			out[p.Name] = p.Regions[0].Name
			continue
		}
		out[p.Name] = ""
		for _, name := range names {
			if r, ok := p.region(name); ok {
				out[p.Name] = r.Name
				break
			}
		}
	}
	return out, nil
}

// regionNames lists every region and alias of the catalog, sorted.
func (c *Catalog) regionNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range c.Providers {
		for _, r := range p.Regions {
			for _, n := range append([]string{r.Name}, r.Aliases...) {
				if !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"no regions: its prices are for " + c.PriceRegion}
	}
	return out
}

// engines lists every engine the catalog's providers run.
func (c *Catalog) engines() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range c.Providers {
		for _, e := range p.Engines {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	sort.Strings(out)
	return out
}

// validatePricing checks the engine and discounts against the catalog,
// and fills commitment fractions in from it.
func (in *Input) validatePricing(cat *Catalog) error {
	pr := &in.Pricing
	if pr.Engine != "" {
		if es := cat.engines(); len(es) > 0 && !slicesContains(es, pr.Engine) {
			return fmt.Errorf("%w: engine = %s: the catalog prices %s", ErrInput, pr.Engine, strings.Join(es, " and "))
		}
	}
	if len(pr.Discounts) == 0 {
		return nil
	}
	ds := make(map[string]Discount, len(pr.Discounts))
	names := make([]string, 0, len(pr.Discounts))
	for name := range pr.Discounts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d := pr.Discounts[name]
		p, ok := cat.Provider(name)
		if !ok {
			var names []string
			for _, p := range cat.Providers {
				names = append(names, p.Name)
			}
			return fmt.Errorf("%w: discount = %s: no provider of that name (the catalog has %s)", ErrInput, name, strings.Join(names, ", "))
		}
		if d.Term != "" {
			var terms []string
			found := false
			for _, cm := range p.Commitments {
				terms = append(terms, cm.Term)
				if cm.Term == d.Term {
					d.Fraction, d.Source, found = cm.Discount, cm.Source, true
				}
			}
			if !found {
				if len(terms) == 0 {
					return fmt.Errorf("%w: discount = %s=%s: the catalog has no committed-use discounts for %s; give your own as a fraction, such as %s=0.3", ErrInput, name, d.Term, name, name)
				}
				return fmt.Errorf("%w: discount = %s=%s: the catalog's terms for %s are %s", ErrInput, name, d.Term, name, strings.Join(terms, ", "))
			}
		} else if !(d.Fraction > 0 && d.Fraction < 1) {
			return fmt.Errorf("%w: discount = %s=%v: a discount is a fraction above 0 and below 1, such as 0.3", ErrInput, name, d.Fraction)
		} else if d.Source == "" {
			d.Source = "yours"
		}
		ds[name] = d
	}
	pr.Discounts = ds
	return nil
}

// quote chooses the row's price for the region, engine and replicas, or
// says why there is none.
func (p *Plan) quote(n NodeType, region string, in Input) (*Quote, string) {
	engine := p.Engine
	if price, ok := in.Prices[n.Name]; ok {
		return &Quote{PerHour: price, Region: region, Engine: engine, Source: "--price", SourceTitle: "your price, from --price", User: true}, ""
	}
	if price, ok := n.HourlyPrice(); ok {
		q := &Quote{PerHour: price, PerGBHour: n.PricePerGBHour, Region: p.Catalog.PriceRegion, Engine: engine,
			Source: n.Source, SourceTitle: n.Source, Date: n.Date}
		return q, ""
	}
	if len(n.Prices) == 0 {
		if n.Unpriced != "" {
			return nil, n.Unpriced
		}
		return nil, "no price in the catalog"
	}
	replicas := in.Workload.Replicas
	var cands []Price
	for _, pr := range n.Prices {
		if pr.Region == region && (pr.Engine == "" || pr.Engine == engine) {
			cands = append(cands, pr)
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Sprintf("no %s price for %s in the catalog (not found in a public copy of the price list)", engineTitle(engine), region)
	}
	pick := cands[0]
	if cands[0].ServiceTier != "" {
		want := "basic"
		if replicas > 0 {
			want = "standard"
		}
		found := false
		for _, c := range cands {
			if c.ServiceTier == want {
				pick, found = c, true
			}
		}
		if !found {
			return nil, fmt.Sprintf("no %s tier price for %s in the catalog", want, region)
		}
	}
	if pick.IncludesReplica && replicas > 1 {
		return nil, fmt.Sprintf("the %s price includes one replica; the price of %d replicas is not in the catalog", pick.ServiceTier, replicas)
	}
	q := &Quote{PerHour: pick.PerHour, PerGBHour: pick.PerGBHour, Region: pick.Region, Engine: engine, ServiceTier: pick.ServiceTier,
		IncludesReplica: pick.IncludesReplica, Source: pick.Source, SourceTitle: pick.Source, Date: pick.Date, Note: pick.Note}
	if s, ok := p.Catalog.Source(pick.Source); ok {
		q.SourceTitle = s.Title
	}
	if q.PerGBHour > 0 {
		q.PerHour = q.PerGBHour * n.MemoryGiB
	}
	return q, ""
}

// tierSize picks a capacity tier's instance size in GiB: the size given
// (which must fall in the tier's range), or the whole-GB size that holds
// the data in the fewest instances, at least the tier's smallest. The
// string says why a given size does not fit.
func tierSize(n NodeType, usable, dataBytes, given float64, count int) (float64, string) {
	rng := fmt.Sprintf("%s's %g–%g GB", n.Name, n.MinGiB, n.MaxGiB)
	if given > 0 {
		if given < n.MinGiB || given > n.MaxGiB {
			return 0, fmt.Sprintf("%g GB is outside %s capacity tier", given, rng)
		}
		return given, ""
	}
	need := dataBytes / (1 << 30) / usable
	if count > 0 {
		size := math.Ceil(need/float64(count) - 1e-9)
		if size > n.MaxGiB {
			return 0, fmt.Sprintf("the data needs %g GB per instance on %d instances (at %.0f%% usable), above %s capacity tier", size, count, 100*usable, rng)
		}
		return math.Max(size, n.MinGiB), ""
	}
	if need <= 0 {
		return n.MinGiB, ""
	}
	inst := math.Ceil(need/n.MaxGiB - 1e-9)
	return math.Max(math.Ceil(need/inst-1e-9), n.MinGiB), ""
}
