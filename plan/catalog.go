package plan

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"
)

// defaultCatalog is the catalog kura ships: node types, provider rules and
// a measured thread-scaling curve, each with its public source.
//
//go:embed catalog.json
var defaultCatalog []byte

// ErrCatalog is returned, wrapped in a *CatalogError, for a catalog that
// cannot be used.
var ErrCatalog = errors.New("kura: bad node catalog")

// maxCatalogBytes bounds what ParseCatalog reads: a real catalog is a few
// kilobytes.
const maxCatalogBytes = 1 << 20

// Catalog is the data the planner sizes against: node types with their
// memory, CPU, network and price, the providers' headroom rules, and a
// default thread-scaling curve. Every number comes from a public source
// named on its row; a zero number was not found and is reported as
// missing, never filled in.
type Catalog struct {
	// Date is when the catalog was gathered (YYYY-MM-DD). Prices change;
	// reports always print it.
	Date string `json:"date"`
	// Currency of every price, such as "USD".
	Currency string `json:"currency"`
	// PriceRegion is the region the prices are for.
	PriceRegion string `json:"price_region"`
	// Note is free text printed with the catalog.
	Note string `json:"note,omitempty"`
	// Sources are the price sources the rows' prices name by key, each
	// with the date of its data. Optional in a user catalog: a price may
	// then name its source in words.
	Sources   []PriceSource `json:"sources,omitempty"`
	Providers []Provider    `json:"providers"`
	Nodes     []NodeType    `json:"nodes"`
	// Scaling is the default throughput-versus-threads curve, used when
	// the workload brings none of its own. Optional.
	Scaling *Scaling `json:"scaling,omitempty"`
}

// Provider holds the headroom rules a managed service asks for.
type Provider struct {
	Name  string `json:"name"`
	Title string `json:"title,omitempty"`
	// ReservedMemoryPct is the share of a node's memory kept for
	// backups, failover and replication (ElastiCache's
	// reserved-memory-percent). A node row may override it.
	ReservedMemoryPct float64 `json:"reserved_memory_pct"`
	// MemoryCeiling is the fraction of the remaining memory the data may
	// fill (Memorystore asks for 80% during maintenance). 0 is read as 1.
	MemoryCeiling float64 `json:"memory_ceiling"`
	// CPUCeiling is the fraction of the engine's CPU a primary may use
	// at peak (an alarm threshold such as 90%). 0 is read as 1.
	CPUCeiling float64 `json:"cpu_ceiling"`
	// Sources say where each rule comes from.
	Sources []string `json:"sources,omitempty"`
	// Cloud names the provider's cloud ("aws", "gcp"), for the report.
	Cloud string `json:"cloud,omitempty"`
	// Regions the catalog has prices for; the first is the default. A
	// provider without regions is priced for the catalog's PriceRegion.
	Regions []Region `json:"regions,omitempty"`
	// Engines the service runs ("redis", "valkey"); empty means any.
	Engines []string `json:"engines,omitempty"`
	// Commitments are the provider's published committed-use discounts,
	// chosen with a term (kura plan --discount memorystore-redis=1y).
	Commitments []Commitment `json:"commitments,omitempty"`
}

// PriceSource is where a group of prices came from.
type PriceSource struct {
	// Key is what a Price's Source names, such as "AWS-PL".
	Key   string `json:"key"`
	Title string `json:"title"`
	// Date is the date of the source's data (YYYY-MM-DD).
	Date string `json:"date"`
	// Refresh says where today's figures are read (a price-list API).
	Refresh string `json:"refresh,omitempty"`
}

// Region is one region a provider's rows are priced in.
type Region struct {
	Name  string `json:"name"`
	Title string `json:"title,omitempty"`
	// Aliases are other names --region accepts ("tokyo").
	Aliases []string `json:"aliases,omitempty"`
}

// Commitment is a published committed-use discount.
type Commitment struct {
	// Term is "1y" or "3y".
	Term string `json:"term"`
	// Discount is the fraction off the on-demand price (0.2 for 20%).
	Discount float64 `json:"discount"`
	Source   string  `json:"source"`
}

// Price is one on-demand price of a node type: per node-hour, or per GB
// of provisioned capacity per hour (Memorystore for Redis), in one
// region, for one engine and service tier when the provider prices them
// apart.
type Price struct {
	Region string `json:"region"`
	// Engine is "redis" or "valkey"; empty when the price is the same
	// for every engine the provider runs.
	Engine string `json:"engine,omitempty"`
	// ServiceTier is "basic" (no replica) or "standard" (with one) for
	// Memorystore for Redis; empty elsewhere.
	ServiceTier string `json:"service_tier,omitempty"`
	// IncludesReplica is set when the price already covers one replica
	// (Memorystore Standard): the replica is not billed again.
	IncludesReplica bool    `json:"includes_replica,omitempty"`
	PerHour         float64 `json:"per_hour,omitempty"`
	PerGBHour       float64 `json:"per_gb_hour,omitempty"`
	// Source is a key of the catalog's sources (or, in a catalog
	// without sources, the source in words); Date is the date of the
	// price data.
	Source string `json:"source"`
	Date   string `json:"date"`
	Note   string `json:"note,omitempty"`
}

// NodeType is one row of the catalog. A zero number means the figure was
// not found in a public source; the planner says which constraint it
// could not check because of it.
type NodeType struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Aliases are short names kura plan accepts for the row ("M4").
	Aliases []string `json:"aliases,omitempty"`
	// MinGiB and MaxGiB are a capacity tier's range of instance sizes
	// (Memorystore for Redis M1 to M5): the row has no fixed memory, the
	// planner picks (or is given) an instance size inside the range and
	// prices it per GB.
	MinGiB float64 `json:"min_gib,omitempty"`
	MaxGiB float64 `json:"max_gib,omitempty"`
	// MemoryGiB is the node's memory as the provider publishes it (for a
	// Memorystore for Redis instance: the size you provision).
	MemoryGiB float64 `json:"memory_gib,omitempty"`
	// VCPUs is the node's vCPU count.
	VCPUs int `json:"vcpus,omitempty"`
	// Threads is how many threads the engine uses on this node (Redis
	// io-threads, Memorystore's threads per capacity tier). 0 means not
	// published: the planner assumes the single Redis main thread.
	Threads int `json:"threads,omitempty"`
	// BaselineGbps is the bandwidth the node sustains; BurstGbps is what
	// it reaches for a while on network credits. Sizing uses the baseline.
	BaselineGbps float64 `json:"baseline_gbps,omitempty"`
	BurstGbps    float64 `json:"burst_gbps,omitempty"`
	// ReservedMemoryPct overrides the provider's rule for this node.
	ReservedMemoryPct *float64 `json:"reserved_memory_pct,omitempty"`
	// PricePerHour is the on-demand price of one node in the catalog's
	// PriceRegion; PricePerGBHour is a per-GB price, multiplied by
	// MemoryGiB. At most one of them is set, and neither with Prices:
	// they are the simple form of a one-region user catalog.
	PricePerHour   float64 `json:"price_per_hour,omitempty"`
	PricePerGBHour float64 `json:"price_per_gb_hour,omitempty"`
	// Prices are the row's prices by region, engine and service tier.
	Prices []Price `json:"prices,omitempty"`
	// Unpriced says why a row has no price at all.
	Unpriced string `json:"unpriced,omitempty"`
	// NoCommitment says why the provider's committed-use discounts do
	// not apply to this row (Memorystore M1).
	NoCommitment string `json:"no_commitment,omitempty"`
	// Date is when the row was gathered (YYYY-MM-DD).
	Date string `json:"date"`
	// Source names the public pages the row's numbers come from.
	Source string `json:"source"`
	Note   string `json:"note,omitempty"`
}

// Scaling is a measured throughput-versus-threads curve for one command.
type Scaling struct {
	Name   string       `json:"name"`
	Source string       `json:"source,omitempty"`
	Date   string       `json:"date,omitempty"`
	Points []ScalePoint `json:"points"`
}

// ScalePoint is the throughput measured at a thread count.
type ScalePoint struct {
	Threads   int     `json:"threads"`
	OpsPerSec float64 `json:"ops_per_sec"`
}

// HourlyPrice is the simple-form price of one node for an hour
// (PricePerHour, or PricePerGBHour × MemoryGiB), and false when the row
// has none. Prices by region are chosen by the planner (Row.Quote).
func (n NodeType) HourlyPrice() (float64, bool) {
	switch {
	case n.PricePerHour > 0:
		return n.PricePerHour, true
	case n.PricePerGBHour > 0 && n.MemoryGiB > 0:
		return n.PricePerGBHour * n.MemoryGiB, true
	}
	return 0, false
}

// Missing lists the figures the row lacks, by JSON field name.
func (n NodeType) Missing() []string {
	var m []string
	if n.MemoryGiB == 0 && n.MaxGiB == 0 {
		m = append(m, "memory_gib")
	}
	if n.VCPUs == 0 && n.Threads == 0 {
		m = append(m, "vcpus/threads")
	}
	if n.BaselineGbps == 0 {
		m = append(m, "baseline_gbps")
	}
	if _, ok := n.HourlyPrice(); !ok && len(n.Prices) == 0 {
		m = append(m, "price")
	}
	return m
}

// Provider returns the named provider's rules.
func (c *Catalog) Provider(name string) (Provider, bool) {
	for _, p := range c.Providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// Node returns the named node type; a row's alias ("M4") names it too,
// in any case.
func (c *Catalog) Node(name string) (NodeType, bool) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	for _, n := range c.Nodes {
		for _, a := range n.Aliases {
			if strings.EqualFold(a, name) {
				return n, true
			}
		}
	}
	return NodeType{}, false
}

// Source returns the price source with the key.
func (c *Catalog) Source(key string) (PriceSource, bool) {
	for _, s := range c.Sources {
		if s.Key == key {
			return s, true
		}
	}
	return PriceSource{}, false
}

// DefaultCatalog returns a fresh copy of the catalog kura ships.
func DefaultCatalog() *Catalog {
	c, err := ParseCatalog(bytes.NewReader(defaultCatalog))
	if err != nil {
		// The embedded file is checked by the package's tests.
		panic("plan: embedded catalog: " + err.Error())
	}
	return c
}

// DefaultCatalogJSON returns the embedded catalog as it is stored, to
// start a user catalog from.
func DefaultCatalogJSON() []byte { return bytes.Clone(defaultCatalog) }

// CatalogError says which row and field of a catalog is wrong.
type CatalogError struct {
	// Row is the 1-based index in "nodes" or "providers"; 0 for the
	// catalog's top level or its scaling curve.
	Row int
	// Section is "nodes", "providers", "scaling" or "" (top level).
	Section string
	// Name is the row's name when it has one.
	Name string
	// Field is the JSON field name.
	Field   string
	Problem string
}

// Error names the section, row, field and problem in one line.
func (e *CatalogError) Error() string {
	var b strings.Builder
	b.WriteString("node catalog: ")
	if e.Section != "" {
		b.WriteString(e.Section)
		if e.Row > 0 {
			fmt.Fprintf(&b, " row %d", e.Row)
		}
		if e.Name != "" {
			fmt.Fprintf(&b, " (%q)", e.Name)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Problem)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrCatalog) true.
func (e *CatalogError) Unwrap() error { return ErrCatalog }

// ParseCatalog reads and validates a catalog in the JSON form of
// catalog.json. Unknown fields are errors (a typo would otherwise drop a
// price silently); every error names the row and the field.
func ParseCatalog(r io.Reader) (*Catalog, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxCatalogBytes+1))
	if err != nil {
		return nil, fmt.Errorf("node catalog: %w", err)
	}
	if len(data) > maxCatalogBytes {
		return nil, &CatalogError{Problem: fmt.Sprintf("larger than %d bytes", maxCatalogBytes)}
	}
	var top struct {
		Date        string            `json:"date"`
		Currency    string            `json:"currency"`
		PriceRegion string            `json:"price_region"`
		Note        string            `json:"note"`
		Sources     []PriceSource     `json:"sources"`
		Providers   []json.RawMessage `json:"providers"`
		Nodes       []json.RawMessage `json:"nodes"`
		Scaling     json.RawMessage   `json:"scaling"`
	}
	if err := strictDecode(data, &top); err != nil {
		return nil, &CatalogError{Field: jsonField(err), Problem: jsonProblem(err)}
	}
	c := &Catalog{Date: top.Date, Currency: top.Currency, PriceRegion: top.PriceRegion, Note: top.Note, Sources: top.Sources}
	for i, raw := range top.Providers {
		var p Provider
		if err := strictDecode(raw, &p); err != nil {
			return nil, &CatalogError{Section: "providers", Row: i + 1, Field: jsonField(err), Problem: jsonProblem(err)}
		}
		c.Providers = append(c.Providers, p)
	}
	for i, raw := range top.Nodes {
		var n NodeType
		if err := strictDecode(raw, &n); err != nil {
			var name struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(raw, &name)
			return nil, &CatalogError{Section: "nodes", Row: i + 1, Name: name.Name, Field: jsonField(err), Problem: jsonProblem(err)}
		}
		c.Nodes = append(c.Nodes, n)
	}
	if len(top.Scaling) > 0 && string(top.Scaling) != "null" {
		var s Scaling
		if err := strictDecode(top.Scaling, &s); err != nil {
			return nil, &CatalogError{Section: "scaling", Field: jsonField(err), Problem: jsonProblem(err)}
		}
		c.Scaling = &s
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// jsonField names the field a decoding error is about, when it says.
func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return strings.Trim(f, `"`)
	}
	return ""
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := "value of type " + te.Type.String()
		switch te.Type.Kind() {
		case reflect.Float32, reflect.Float64:
			want = "number"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			want = "whole number"
		case reflect.String:
			want = "text (a JSON string)"
		case reflect.Slice:
			want = "list"
		case reflect.Struct, reflect.Map:
			want = "JSON object"
		}
		return fmt.Sprintf("wants a %s, got a JSON %s", want, te.Value)
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return "unknown field (a typo? see kura plan --print-catalog)"
	}
	return "not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

// Validate checks every row: required fields, ranges, unique names, known
// providers. The error names the row and the field.
func (c *Catalog) Validate() error {
	top := func(field, problem string) error { return &CatalogError{Field: field, Problem: problem} }
	if err := checkDate(c.Date); err != nil {
		return top("date", err.Error())
	}
	if c.Currency == "" {
		return top("currency", "missing (the currency of every price, such as USD)")
	}
	if len(c.Providers) == 0 {
		return top("providers", "empty: give at least one provider's rules")
	}
	if len(c.Nodes) == 0 {
		return top("nodes", "empty: give at least one node type")
	}
	keys := map[string]bool{}
	for i, src := range c.Sources {
		bad := func(field, problem string) error {
			return &CatalogError{Section: "sources", Row: i + 1, Name: src.Key, Field: field, Problem: problem}
		}
		switch {
		case strings.TrimSpace(src.Key) == "":
			return bad("key", "missing")
		case keys[src.Key]:
			return bad("key", "appears twice")
		case strings.TrimSpace(src.Title) == "":
			return bad("title", "missing: say where the prices were read")
		}
		if err := checkDate(src.Date); err != nil {
			return bad("date", err.Error())
		}
		keys[src.Key] = true
	}
	seen := map[string]bool{}
	provs := map[string]Provider{}
	for i, p := range c.Providers {
		bad := func(field, problem string) error {
			return &CatalogError{Section: "providers", Row: i + 1, Name: p.Name, Field: field, Problem: problem}
		}
		if p.Name == "" {
			return bad("name", "missing")
		}
		if seen[p.Name] {
			return bad("name", "appears twice")
		}
		seen[p.Name] = true
		if p.ReservedMemoryPct < 0 || p.ReservedMemoryPct >= 100 {
			return bad("reserved_memory_pct", fmt.Sprintf("must be from 0 to below 100, got %g", p.ReservedMemoryPct))
		}
		if p.MemoryCeiling < 0 || p.MemoryCeiling > 1 {
			return bad("memory_ceiling", fmt.Sprintf("is a fraction from 0 (meaning 1) to 1, got %g", p.MemoryCeiling))
		}
		if p.CPUCeiling < 0 || p.CPUCeiling > 1 {
			return bad("cpu_ceiling", fmt.Sprintf("is a fraction from 0 (meaning 1) to 1, got %g", p.CPUCeiling))
		}
		regions := map[string]bool{}
		for _, r := range p.Regions {
			for _, name := range append([]string{r.Name}, r.Aliases...) {
				if strings.TrimSpace(name) == "" {
					return bad("regions", "a region or alias without a name")
				}
				if regions[strings.ToLower(name)] {
					return bad("regions", fmt.Sprintf("%q appears twice", name))
				}
				regions[strings.ToLower(name)] = true
			}
		}
		for _, e := range p.Engines {
			if e != strings.ToLower(strings.TrimSpace(e)) || e == "" {
				return bad("engines", fmt.Sprintf("%q: engine names are lower case, such as redis or valkey", e))
			}
		}
		terms := map[string]bool{}
		for _, cm := range p.Commitments {
			switch {
			case cm.Term == "" || terms[cm.Term]:
				return bad("commitments", fmt.Sprintf("term %q is empty or appears twice", cm.Term))
			case !(cm.Discount > 0 && cm.Discount < 1):
				return bad("commitments", fmt.Sprintf("term %s: discount is a fraction above 0 and below 1, got %g", cm.Term, cm.Discount))
			case strings.TrimSpace(cm.Source) == "":
				return bad("commitments", fmt.Sprintf("term %s: source missing", cm.Term))
			}
			terms[cm.Term] = true
		}
		provs[p.Name] = p
	}
	names := map[string]bool{}
	for _, n := range c.Nodes {
		names[n.Name] = true
	}
	aliases := map[string]bool{}
	for i, n := range c.Nodes {
		for _, a := range n.Aliases {
			if a == "" || aliases[strings.ToLower(a)] || names[a] {
				return &CatalogError{Section: "nodes", Row: i + 1, Name: n.Name, Field: "aliases", Problem: fmt.Sprintf("%q is empty or names another row too", a)}
			}
			aliases[strings.ToLower(a)] = true
		}
	}
	names = map[string]bool{}
	for i, n := range c.Nodes {
		bad := func(field, problem string) error {
			return &CatalogError{Section: "nodes", Row: i + 1, Name: n.Name, Field: field, Problem: problem}
		}
		if n.Name == "" {
			return bad("name", "missing")
		}
		if names[n.Name] {
			return bad("name", "appears twice")
		}
		names[n.Name] = true
		if n.Provider == "" {
			return bad("provider", "missing")
		}
		if !seen[n.Provider] {
			return bad("provider", fmt.Sprintf("%q is not in providers", n.Provider))
		}
		for _, f := range []struct {
			name string
			v    float64
			max  float64
			min  float64 // when set (not 0): node counts are divided by it
		}{
			{"memory_gib", n.MemoryGiB, 1e6, 0.01},
			{"min_gib", n.MinGiB, 1e6, 0.01},
			{"max_gib", n.MaxGiB, 1e6, 0.01},
			{"baseline_gbps", n.BaselineGbps, 1e4, 1e-3},
			{"burst_gbps", n.BurstGbps, 1e4, 1e-3},
			{"price_per_hour", n.PricePerHour, 1e6, 0},
			{"price_per_gb_hour", n.PricePerGBHour, 1e4, 0},
		} {
			if f.v < 0 || math.IsNaN(f.v) {
				return bad(f.name, fmt.Sprintf("must not be negative, got %g", f.v))
			}
			if f.v != 0 && f.v < f.min {
				return bad(f.name, fmt.Sprintf("%g is below %g: 0 (not known) or a real figure", f.v, f.min))
			}
			if f.v > f.max {
				return bad(f.name, fmt.Sprintf("%g is above %g: a unit mix-up?", f.v, f.max))
			}
		}
		if n.VCPUs < 0 || n.VCPUs > 10000 {
			return bad("vcpus", fmt.Sprintf("must be from 0 (not known) to 10000, got %d", n.VCPUs))
		}
		if n.Threads < 0 || n.Threads > 1024 {
			return bad("threads", fmt.Sprintf("must be from 0 (not known) to 1024, got %d", n.Threads))
		}
		if n.ReservedMemoryPct != nil && (*n.ReservedMemoryPct < 0 || *n.ReservedMemoryPct >= 100) {
			return bad("reserved_memory_pct", fmt.Sprintf("must be from 0 to below 100, got %g", *n.ReservedMemoryPct))
		}
		if n.BurstGbps > 0 && n.BaselineGbps > 0 && n.BurstGbps < n.BaselineGbps {
			return bad("burst_gbps", fmt.Sprintf("%g is below baseline_gbps %g", n.BurstGbps, n.BaselineGbps))
		}
		if n.PricePerHour > 0 && n.PricePerGBHour > 0 {
			return bad("price_per_gb_hour", "give price_per_hour or price_per_gb_hour, not both")
		}
		if (n.MinGiB > 0) != (n.MaxGiB > 0) || n.MinGiB > n.MaxGiB {
			return bad("max_gib", fmt.Sprintf("a capacity tier gives min_gib and max_gib, min first (got %g to %g)", n.MinGiB, n.MaxGiB))
		}
		if n.MaxGiB > 0 && n.MemoryGiB > 0 {
			return bad("memory_gib", "give a fixed memory_gib or a tier's min_gib and max_gib, not both")
		}
		if n.PricePerGBHour > 0 && n.MemoryGiB == 0 {
			return bad("memory_gib", "missing: price_per_gb_hour is multiplied by it")
		}
		if len(n.Prices) > 0 && (n.PricePerHour > 0 || n.PricePerGBHour > 0) {
			return bad("prices", "give prices, or price_per_hour / price_per_gb_hour, not both")
		}
		if err := c.validatePrices(n, provs[n.Provider], keys); err != nil {
			return bad("prices", err.Error())
		}
		if err := checkDate(n.Date); err != nil {
			return bad("date", err.Error())
		}
		if strings.TrimSpace(n.Source) == "" {
			return bad("source", "missing: every row names the public source of its numbers")
		}
	}
	if c.Scaling != nil {
		if err := c.Scaling.validate(); err != nil {
			return err
		}
	}
	return nil
}

// validatePrices checks one row's prices: a known region and engine of
// its provider, one kind of price, a known source, a date, no two prices
// for the same region, engine and service tier.
func (c *Catalog) validatePrices(n NodeType, p Provider, keys map[string]bool) error {
	seen := map[string]bool{}
	for i, pr := range n.Prices {
		at := fmt.Sprintf("price %d (%s)", i+1, pr.Region)
		if len(p.Regions) > 0 {
			if _, ok := p.region(pr.Region); !ok {
				return fmt.Errorf("%s: region %q is not one of provider %s's regions", at, pr.Region, p.Name)
			}
		} else if pr.Region == "" {
			return fmt.Errorf("%s: region missing", at)
		}
		if pr.Engine != "" && len(p.Engines) > 0 && !slicesContains(p.Engines, pr.Engine) {
			return fmt.Errorf("%s: engine %q is not one provider %s runs (%s)", at, pr.Engine, p.Name, strings.Join(p.Engines, ", "))
		}
		for _, v := range []float64{pr.PerHour, pr.PerGBHour} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > 1e6 {
				return fmt.Errorf("%s: a price must be a positive number of %s an hour, got %g", at, c.Currency, v)
			}
		}
		if (pr.PerHour > 0) == (pr.PerGBHour > 0) {
			return fmt.Errorf("%s: give per_hour or per_gb_hour (one of them)", at)
		}
		if pr.PerGBHour > 0 && n.MemoryGiB == 0 && n.MaxGiB == 0 {
			return fmt.Errorf("%s: per_gb_hour needs the row's memory_gib or tier range", at)
		}
		if pr.PerHour > 0 && n.MaxGiB > 0 {
			return fmt.Errorf("%s: a capacity tier is priced per_gb_hour", at)
		}
		if strings.TrimSpace(pr.Source) == "" {
			return fmt.Errorf("%s: source missing: every price names where it was read", at)
		}
		if len(keys) > 0 && !keys[pr.Source] {
			return fmt.Errorf("%s: source %q is not a key of the catalog's sources", at, pr.Source)
		}
		if err := checkDate(pr.Date); err != nil {
			return fmt.Errorf("%s: date %v", at, err)
		}
		k := pr.Region + "|" + pr.Engine + "|" + pr.ServiceTier
		if seen[k] {
			return fmt.Errorf("%s: a second price for the same region, engine and service tier", at)
		}
		seen[k] = true
	}
	return nil
}

// region finds a region of the provider by name or alias, in any case.
func (p Provider) region(name string) (Region, bool) {
	for _, r := range p.Regions {
		if strings.EqualFold(r.Name, name) {
			return r, true
		}
		for _, a := range r.Aliases {
			if strings.EqualFold(a, name) {
				return r, true
			}
		}
	}
	return Region{}, false
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (s *Scaling) validate() error {
	bad := func(field, problem string) error {
		return &CatalogError{Section: "scaling", Name: s.Name, Field: field, Problem: problem}
	}
	if len(s.Points) == 0 {
		return bad("points", "empty")
	}
	prev := 0
	for i, p := range s.Points {
		if p.Threads < 1 || p.Threads > 1024 {
			return bad("threads", fmt.Sprintf("point %d: threads must be from 1 to 1024, got %d", i+1, p.Threads))
		}
		if p.Threads <= prev {
			return bad("threads", fmt.Sprintf("point %d: thread counts must rise from point to point", i+1))
		}
		prev = p.Threads
		if !(p.OpsPerSec > 0) || math.IsInf(p.OpsPerSec, 0) {
			return bad("ops_per_sec", fmt.Sprintf("point %d: must be positive, got %g", i+1, p.OpsPerSec))
		}
	}
	return nil
}

func checkDate(s string) error {
	if s == "" {
		return errors.New("missing (YYYY-MM-DD: when the numbers were gathered)")
	}
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return fmt.Errorf("%q is not a date in the form YYYY-MM-DD", s)
	}
	return nil
}
