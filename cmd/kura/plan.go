package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/plan"
	"github.com/kuracache/kura/plan/report"
)

const planLong = `plan turns measured numbers into a node count, a binding constraint and a
monthly cost for every node type of a catalog: Amazon ElastiCache (Redis OSS
and Valkey), Google Memorystore for Redis by capacity tier (M1 to M5, Basic
and Standard) and Memorystore for Redis Cluster / Valkey nodes ship with
kura, each price with its source, the date of its data and its region.

For each node type it sizes the primaries three ways and takes the largest:
  memory   the data over the node's memory, less reserved memory, under the
           provider's memory ceiling (ElastiCache keeps 25% reserved;
           Memorystore asks for 80% during maintenance)
  CPU      the peak ops/s over what one engine thread serves (from kura bench
           on your own server, or --ops-per-thread) times the thread-scaling
           curve, under the CPU alarm ceiling (90%)
  network  the peak bytes over the node's baseline bandwidth, not its burst,
           under --network-ceiling (80%); burst is shown beside it
A Memorystore for Redis instance is sized inside its tier's GB range (from
the data, or --instance-size) and priced at that tier's rate per GB.

It prints the table ranked by monthly cost (nodes billed x 730 hours, after
discounts); node types without a price say why and follow, never ranked on
cost. Then the type with the fewest nodes and why, the cheapest and whose
price it is, the largest value against each node's link, and the sources.

Pricing: --region (us-east-1, ap-northeast-1, us-central1, asia-northeast1,
or tokyo for both clouds; default each provider's first), --engine redis or
valkey (ElastiCache's Valkey nodes cost 0.8x), --replicas (an ElastiCache or
Cluster replica is billed as a node; Memorystore for Redis with a replica is
the Standard tier, whose per-GB price includes it), --discount (your
reserved-node discount as a fraction, or Memorystore's 1y/3y committed use).

What-ifs, priced: --codec-ratio or --codecs (a codec that changes the bytes
in memory and on the wire), --max-value-size (a value-size guard),
--io-threads (server I/O threads on every node). The plan shows the
workload as asked and with the what-if, and per node type the nodes and the
monthly cost before, and the change in money and percent. --from/--to puts
the workload on two fleets ("24 of these or 6 of those") and prices both.

Prices change: the catalog date and each price's source are printed with
every plan. Give your own with --price NAME=HOURLY or a catalog file (start
from kura plan --print-catalog; docs/plan.md says where every price came
from and how to refresh them from the AWS and Google price-list APIs).`

const planExample = `  # 120 GB of data, 150k reads and 20k writes a second at peak, CPU per
  # operation measured on your own server: ranked by monthly cost
  kura bench redis://10.0.0.5:6379 -t get --prefill --json > get.json
  kura plan --data 120GB --reads 150000 --writes 20000 --value-size 2KB --bench get.json

  # the same in Tokyo on Valkey, with a 30% reserved-node discount on
  # ElastiCache and Memorystore's 1-year committed use
  kura plan --data 120GB --reads 150000 --writes 20000 --value-size 2KB --bench get.json \
    --region tokyo --engine valkey --discount elasticache=0.3 --discount memorystore-redis=1y

  # 24 of these or 6 of those: Memorystore Standard (one replica), 24 M2
  # instances or 6 M4 at the same total memory, half of it filled (the
  # maintenance rule), CPU per instance scaled from today's 40%
  kura plan --from 24:memorystore-redis-M2 --to 6:memorystore-redis-M4 --data 120GiB \
    --memory-ceiling 0.5 --replicas 1 --cpu-now 0.4

  # network bytes cut to a third by a codec: which node now holds the peak,
  # and what stepping down saves a month
  kura plan --reads 51584 --read-size 13441 --codec-ratio 0.3333 \
    --node cache.m7g.2xlarge --node cache.m7g.4xlarge

  # fewer, bigger instances: thread curve measured with kura bench sweep
  kura bench sweep --io-threads 1,2,4,6 -t hset --json > threads.json
  kura plan --data 600GB --reads 400000 --bench threads.json --memory-ceiling 0.5

  # what-if: from JSON to the codec kura codecs recommends for your values
  kura codecs values.jsonl --json > codecs.json
  kura plan --data 120GB --reads 150000 --value-size 2KB --bench get.json --codecs codecs.json

  # sizes from a scan of the live cache, what-if with its zstd estimate
  kura scan redis://10.0.0.5:6379 --json > scan.json
  kura plan --scan scan.json --reads 90000 --writes 9000 --bench get.json --codec zstd

  # a 1.3 MB value written 15 times a second: which links carry it
  kura plan --largest-value 1.3MB --writes 15 --write-size 1.3MB --large-per-sec 15

  # your own price for a node type (0.50 is a placeholder), and an HTML
  # report with charts
  kura plan --data 40GB --reads 80000 --value-size 1KB --ops-per-thread 90000 \
    --price cache.r7g.xlarge=0.50 --html plan.html`

type planFlags struct {
	data, valueSize, keySize, maxValue, readSize, writeSize, guard string
	keys                                                           int64
	reads, writes, largePerSec                                     float64
	opsPerThread, cpuMicros                                        float64
	scaling                                                        string
	replicas                                                       int
	growth                                                         float64
	memCeil, cpuCeil, netCeil, reserved                            float64
	codecRatio                                                     float64
	threads                                                        int
	benchFile, catalogFile, htmlFile, scanFile, codec              string
	codecsFile, codecFrom                                          string
	nodes, prices                                                  []string
	printCatalog                                                   bool
	from, to                                                       string
	cpuNow                                                         float64
	regions, discounts                                             []string
	engine, instanceSize                                           string
}

func newPlanCmd() *cobra.Command {
	var pf planFlags
	cmd := &cobra.Command{
		Use:     "plan",
		Short:   "Size a cache: nodes, binding constraint and monthly cost per node type",
		Long:    planLong,
		Example: planExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if pf.printCatalog {
				_, err := out.Write(plan.DefaultCatalogJSON())
				return err
			}
			cat, err := pf.catalog()
			if err != nil {
				return err
			}
			in, err := pf.input(cmd)
			if err != nil {
				return err
			}
			if pf.from != "" || pf.to != "" {
				return pf.compare(cmd, cat, in)
			}
			if err := checkWritable(pf.htmlFile); err != nil {
				return err
			}
			p, err := plan.New(cat, in)
			if err != nil {
				return planError(cmd, err)
			}
			if err := report.WriteText(out, p); err != nil {
				return err
			}
			if pf.htmlFile == "" {
				return nil
			}
			points, err := plan.Traffic(cat, in, plan.DefaultMultipliers())
			if err != nil {
				return planError(cmd, err)
			}
			f, err := os.Create(pf.htmlFile)
			if err != nil {
				return fmt.Errorf("--html: %w", err)
			}
			err = report.WriteHTML(f, p, points)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("--html: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", pf.htmlFile)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&pf.scanFile, "scan", "", "kura scan --json output: data size, keys, value sizes, largest value, codec estimates")
	f.StringVar(&pf.data, "data", "", "data in memory as Redis counts it (INFO used_memory), such as 120GB")
	f.Int64Var(&pf.keys, "keys", 0, "number of keys")
	f.StringVar(&pf.keySize, "key-size", "", "average key length, such as 40")
	f.StringVar(&pf.valueSize, "value-size", "", "average value size as stored, such as 2KB")
	f.StringVar(&pf.maxValue, "largest-value", "", "the largest value you store, checked against every node's link, such as 1.3MB")
	deprecatedAlias(f, "largest-value", "max-value")
	f.Float64Var(&pf.reads, "reads", 0, "peak reads per second over the whole cache")
	f.Float64Var(&pf.writes, "writes", 0, "peak writes per second over the whole cache")
	f.StringVar(&pf.readSize, "read-size", "", "value bytes one read returns (default --value-size)")
	f.StringVar(&pf.writeSize, "write-size", "", "value bytes one write sends (default --value-size)")
	f.Float64Var(&pf.largePerSec, "large-per-sec", 0, "how often the largest value crosses the link at peak (turns the link check into a queue estimate)")
	f.StringVar(&pf.benchFile, "bench", "", "kura bench --json output (CPU and bytes per operation), or kura bench sweep --io-threads --json (also the thread curve)")
	f.Float64Var(&pf.opsPerThread, "ops-per-thread", 0, "ops/s one engine thread serves when saturated (instead of --bench)")
	f.Float64Var(&pf.cpuMicros, "cpu-us-per-op", 0, "engine CPU microseconds per operation (instead of --bench)")
	f.StringVar(&pf.scaling, "scaling", "", "throughput per thread count, such as 1:68877,2:113889,6:161774 (default: the catalog's curve)")
	f.IntVar(&pf.replicas, "replicas", 0, "replicas per primary (each one a node to pay for)")
	f.Float64Var(&pf.growth, "growth", 0, "growth to plan for as a fraction of today: 0.3 = 30% more data and traffic")
	f.Float64Var(&pf.memCeil, "memory-ceiling", 0, "fraction of usable memory the data may fill (default: the provider's rule)")
	f.Float64Var(&pf.cpuCeil, "cpu-ceiling", 0, "fraction of engine CPU a primary may use at peak (default: the provider's rule)")
	f.Float64Var(&pf.netCeil, "network-ceiling", 0, "fraction of baseline bandwidth the peak may use (default 0.8)")
	f.Float64Var(&pf.reserved, "reserved-memory", 0, "fraction of node memory reserved for backups and failover, such as 0.25 (default: the catalog's)")
	f.Float64Var(&pf.codecRatio, "codec-ratio", 0, "what-if: encoded bytes after a codec change over bytes before, such as 0.33")
	f.StringVar(&pf.codecsFile, "codecs", "", "kura codecs --json output: the what-if codec ratio from its measured sizes")
	f.StringVar(&pf.codec, "codec", "", "what-if: with --codecs, the candidate to move to (default: its recommendation); with --scan, the compressor whose estimate to use (s2, zstd)")
	f.StringVar(&pf.codecFrom, "codec-from", "json", "with --codecs: the candidate the values are stored as today")
	f.StringVar(&pf.guard, "max-value-size", "", "what-if: value-size guard (kura Options.MaxValueSize); larger values are not cached")
	f.IntVar(&pf.threads, "io-threads", 0, "what-if: server I/O threads (io-threads) on every node type")
	deprecatedAlias(f, "io-threads", "threads")
	f.StringVar(&pf.catalogFile, "catalog", "", "node catalog JSON to use instead of kura's (see --print-catalog)")
	f.BoolVar(&pf.printCatalog, "print-catalog", false, "print kura's node catalog as JSON and exit")
	f.StringArrayVar(&pf.nodes, "node", nil, "only this node type (repeat for more)")
	f.StringArrayVar(&pf.prices, "price", nil, "hourly price for a node type, NAME=PRICE (repeat for more)")
	f.StringArrayVar(&pf.regions, "region", nil, "price in this region: us-east-1, ap-northeast-1 (ElastiCache), us-central1, asia-northeast1 (Memorystore), tokyo (both); repeat or comma-separate (default: each provider's first)")
	f.StringVar(&pf.engine, "engine", "", "engine to price: redis (Redis OSS, the default) or valkey")
	f.StringArrayVar(&pf.discounts, "discount", nil, "discount off one provider's on-demand prices, PROVIDER=FRACTION (yours, such as elasticache=0.3) or PROVIDER=TERM (a committed-use term of the catalog, such as memorystore-redis=1y); repeat for more")
	f.StringVar(&pf.instanceSize, "instance-size", "", "size of one Memorystore for Redis instance, such as 40GB (default: per tier, the size that holds the data in the fewest instances)")
	f.StringVar(&pf.htmlFile, "html", "", "also write an HTML report with charts to this file")
	f.StringVar(&pf.from, "from", "", "resize: the fleet today, COUNT:NODE[:SIZE] such as 24:memorystore-redis-M2 or 24:M2:10GB (with --to)")
	f.StringVar(&pf.to, "to", "", "resize: the fleet to compare it with, COUNT:NODE[:SIZE] such as 6:memorystore-redis-M4 (with --from)")
	f.Float64Var(&pf.cpuNow, "cpu-now", 0, "resize: the CPU share the --from fleet's instances use at peak today, such as 0.4")
	cmd.SetFlagErrorFunc(flagError)
	return cmd
}

func (pf *planFlags) catalog() (*plan.Catalog, error) {
	if pf.catalogFile == "" {
		return plan.DefaultCatalog(), nil
	}
	f, err := os.Open(pf.catalogFile)
	if err != nil {
		return nil, fmt.Errorf("--catalog: %w", err)
	}
	defer f.Close()
	c, err := plan.ParseCatalog(f)
	if err != nil {
		return nil, fmt.Errorf("--catalog %s: %s", pf.catalogFile, strings.TrimPrefix(err.Error(), "node catalog: "))
	}
	return c, nil
}

func (pf *planFlags) input(cmd *cobra.Command) (plan.Input, error) {
	var in plan.Input
	w := &in.Workload
	sizes := []struct {
		flag string
		s    string
		dst  *float64
	}{
		{"data", pf.data, &w.DataBytes}, {"key-size", pf.keySize, &w.KeyBytes}, {"value-size", pf.valueSize, &w.AvgValueBytes},
		{"largest-value", pf.maxValue, &w.MaxValueBytes}, {"read-size", pf.readSize, &w.ReadValueBytes},
		{"write-size", pf.writeSize, &w.WriteValueBytes}, {"max-value-size", pf.guard, &in.WhatIf.MaxValueBytes},
	}
	for _, s := range sizes {
		if s.s == "" {
			continue
		}
		v, err := plan.ParseBytes(s.s)
		if err != nil {
			return in, fmt.Errorf("--%s: %s", s.flag, strings.TrimPrefix(err.Error(), plan.ErrInput.Error()+": "))
		}
		*s.dst = v
	}
	w.Keys, w.ReadsPerSec, w.WritesPerSec, w.LargeValuesPerSec = pf.keys, pf.reads, pf.writes, pf.largePerSec
	w.OpsPerSecPerThread, w.CPUSecondsPerOp = pf.opsPerThread, pf.cpuMicros/1e6
	w.Replicas, w.Growth = pf.replicas, pf.growth
	in.Rules = plan.Rules{MemoryCeiling: pf.memCeil, CPUCeiling: pf.cpuCeil, NetworkCeiling: pf.netCeil}
	if cmd.Flags().Changed("reserved-memory") {
		// A fraction like every other ceiling flag; the catalog keeps a
		// percent, as the providers publish it.
		if !(pf.reserved >= 0 && pf.reserved < 1) { // NaN too
			hint := ""
			if pf.reserved >= 1 && pf.reserved < 100 {
				hint = fmt.Sprintf(" (%g%% is %g)", pf.reserved, pf.reserved/100)
			}
			return in, fmt.Errorf("--reserved-memory %g: give a fraction from 0 to below 1, such as 0.25%s", pf.reserved, hint)
		}
		r := pf.reserved * 100
		in.Rules.ReservedMemoryPct = &r
	}
	in.WhatIf.CodecRatio, in.WhatIf.Threads = pf.codecRatio, pf.threads
	for _, name := range []string{"codec-ratio", "io-threads", "memory-ceiling", "cpu-ceiling", "network-ceiling", "ops-per-thread", "cpu-us-per-op"} {
		if fl := cmd.Flags().Lookup(name); cmd.Flags().Changed(name) && (fl.Value.String() == "0" || fl.Value.String() == "0.0") {
			return in, fmt.Errorf("--%s 0 has no meaning; give a positive value or leave the flag out", name)
		}
	}
	// The model checks CPU seconds per op; its message would name neither
	// the flag nor its unit.
	if !(pf.cpuMicros >= 0 && pf.cpuMicros <= 1e7) {
		return in, fmt.Errorf("--cpu-us-per-op %g: give engine CPU microseconds per operation, from 0.001 to 10,000,000 (10 s)", pf.cpuMicros)
	}
	if cmd.Flags().Changed("max-value-size") && in.WhatIf.MaxValueBytes == 0 {
		return in, errors.New("--max-value-size 0 has no meaning; give the largest value to allow, such as 1MB, or leave the flag out")
	}
	if cmd.Flags().Changed("cpu-now") {
		if pf.from == "" && pf.to == "" {
			return in, errors.New("--cpu-now is the CPU share of the --from fleet today; it goes with --from and --to")
		}
		if !(pf.cpuNow > 0 && pf.cpuNow <= 1) {
			hint := ""
			if pf.cpuNow > 1 && pf.cpuNow <= 100 {
				hint = fmt.Sprintf(" (%g%% is %g)", pf.cpuNow, pf.cpuNow/100)
			}
			return in, fmt.Errorf("--cpu-now %g: the CPU share today must be 0 to 1 (above 0), such as 0.4%s", pf.cpuNow, hint)
		}
	}
	if pf.opsPerThread > 0 && pf.cpuMicros > 0 {
		return in, errors.New("give --ops-per-thread or --cpu-us-per-op, not both")
	}
	if pf.scaling != "" {
		s, err := parseScaling(pf.scaling)
		if err != nil {
			return in, err
		}
		w.Scaling = s
	}
	if pf.benchFile != "" {
		f, err := os.Open(pf.benchFile)
		if err != nil {
			return in, fmt.Errorf("--bench: %w", err)
		}
		m, err := plan.ReadBench(f)
		f.Close()
		if err != nil {
			return in, fmt.Errorf("--bench %s: %s", pf.benchFile, strings.TrimPrefix(err.Error(), plan.ErrInput.Error()+": "))
		}
		m.Apply(w)
	}
	if pf.scanFile != "" {
		f, err := os.Open(pf.scanFile)
		if err != nil {
			return in, fmt.Errorf("--scan: %w", err)
		}
		sc, err := plan.ReadScan(f)
		f.Close()
		if err != nil {
			return in, fmt.Errorf("--scan %s: %s", pf.scanFile, strings.TrimPrefix(err.Error(), plan.ErrInput.Error()+": "))
		}
		sc.Apply(w)
		if !sc.Complete {
			fmt.Fprintf(cmd.ErrOrStderr(), "kura plan: the scan in %s did not finish: its sizes are a lower bound\n", pf.scanFile)
		}
		if pf.codec != "" {
			r, ok := sc.CodecRatios[pf.codec]
			if !ok {
				return in, fmt.Errorf("--codec %s: the scan has no estimate for it (it has %s)", pf.codec, codecNames(sc.CodecRatios))
			}
			if pf.codecRatio > 0 {
				return in, errors.New("give --codec or --codec-ratio, not both")
			}
			in.WhatIf.CodecRatio = r
			in.WhatIf.CodecName = pf.codec + ", as kura scan estimated it"
		}
	} else if pf.codec != "" && pf.codecsFile == "" {
		return in, errors.New("--codec reads the estimate from --codecs or --scan; without them give --codec-ratio")
	}
	if pf.codecsFile != "" {
		if pf.codecRatio > 0 {
			return in, errors.New("give --codecs or --codec-ratio, not both")
		}
		f, err := os.Open(pf.codecsFile)
		if err != nil {
			return in, fmt.Errorf("--codecs: %w", err)
		}
		cs, err := plan.ReadCodecs(f)
		f.Close()
		if err != nil {
			return in, fmt.Errorf("--codecs %s: %s", pf.codecsFile, strings.TrimPrefix(err.Error(), plan.ErrInput.Error()+": "))
		}
		to := pf.codec
		if to == "" {
			to = cs.Recommended
		}
		r, err := cs.Ratio(pf.codecFrom, to)
		if err != nil {
			return in, fmt.Errorf("--codecs: %s", strings.TrimPrefix(err.Error(), plan.ErrInput.Error()+": "))
		}
		in.WhatIf.CodecRatio = r
		in.WhatIf.CodecName = pf.codecFrom + " → " + to
	} else if cmd.Flags().Changed("codec-from") {
		return in, errors.New("--codec-from needs --codecs")
	}
	in.Nodes = pf.nodes
	if err := pf.pricing(&in); err != nil {
		return in, err
	}
	for _, pr := range pf.prices {
		name, val, ok := strings.Cut(pr, "=")
		v, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(val), "$"), 64)
		if !ok || name == "" || err != nil {
			return in, fmt.Errorf("--price %q: write it as NAME=HOURLY, such as cache.r7g.xlarge=0.50", pr)
		}
		if !(v > 0) || math.IsInf(v, 0) || v > 1e6 {
			return in, fmt.Errorf("--price %s: an hourly price is a positive number, such as cache.r7g.xlarge=0.50", pr)
		}
		if in.Prices == nil {
			in.Prices = map[string]float64{}
		}
		in.Prices[strings.TrimSpace(name)] = v
	}
	return in, nil
}

// pricing reads --region, --engine, --discount and --instance-size.
func (pf *planFlags) pricing(in *plan.Input) error {
	for _, r := range pf.regions {
		for _, name := range strings.Split(r, ",") {
			if name = strings.TrimSpace(name); name != "" {
				in.Pricing.Regions = append(in.Pricing.Regions, name)
			}
		}
	}
	switch e := strings.ToLower(strings.TrimSpace(pf.engine)); e {
	case "":
	case "redis", "redis-oss", "valkey":
		in.Pricing.Engine = strings.TrimSuffix(e, "-oss")
	default:
		return fmt.Errorf("--engine %s: give redis (Redis OSS) or valkey", pf.engine)
	}
	for _, d := range pf.discounts {
		name, val, ok := strings.Cut(d, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || val == "" {
			return fmt.Errorf("--discount %q: write it as PROVIDER=FRACTION or PROVIDER=TERM, such as elasticache=0.3 or memorystore-redis=1y", d)
		}
		if in.Pricing.Discounts == nil {
			in.Pricing.Discounts = map[string]plan.Discount{}
		}
		if _, dup := in.Pricing.Discounts[name]; dup {
			return fmt.Errorf("--discount %s: a second discount for %s", d, name)
		}
		if strings.HasSuffix(val, "y") {
			in.Pricing.Discounts[name] = plan.Discount{Term: val}
			continue
		}
		pct := strings.HasSuffix(val, "%")
		v, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
		if err != nil {
			return fmt.Errorf("--discount %s: %q is not a fraction (0.3), a percentage (30%%) or a term (1y, 3y)", d, val)
		}
		if pct {
			v /= 100
		}
		if !(v > 0 && v < 1) {
			hint := ""
			if !pct && v >= 1 && v < 100 {
				hint = fmt.Sprintf(" (%g%% is %g)", v, v/100)
			}
			return fmt.Errorf("--discount %s: a discount is a fraction above 0 and below 1, such as 0.3%s", d, hint)
		}
		in.Pricing.Discounts[name] = plan.Discount{Fraction: v}
	}
	if pf.instanceSize != "" {
		v, err := plan.ParseBytes(pf.instanceSize)
		if err != nil {
			return fmt.Errorf("--instance-size: %s", strings.TrimPrefix(err.Error(), plan.ErrInput.Error()+": "))
		}
		gib, err := wholeGB(v)
		if err != nil {
			return fmt.Errorf("--instance-size %s: %v", pf.instanceSize, err)
		}
		in.InstanceGiB = gib
	}
	return nil
}

// maxInstanceGB is the largest Memorystore for Redis instance (M5 tops out
// at 300 GB); 1TB was taken and matched no tier without an error.
const maxInstanceGB = 300

// wholeGB reads an instance size as the whole GB Memorystore provisions
// (its GB are GiB: 40GB and 40GiB both name a 40 GB instance).
func wholeGB(bytes float64) (float64, error) {
	for _, unit := range []float64{1 << 30, 1e9} {
		if g := bytes / unit; g >= 1 && g <= maxInstanceGB && math.Abs(g-math.Round(g)) < 1e-9 {
			return math.Round(g), nil
		}
	}
	return 0, errors.New("a Memorystore instance is a whole number of GB from 1 to 300, such as 40GB")
}

func codecNames(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// parseScaling reads "1:68877,2:113889,6:161774".
func parseScaling(s string) (*plan.Scaling, error) {
	sc := &plan.Scaling{Name: "--scaling " + s}
	for _, part := range strings.Split(s, ",") {
		t, ops, ok := strings.Cut(strings.TrimSpace(part), ":")
		threads, err1 := strconv.Atoi(t)
		v, err2 := strconv.ParseFloat(ops, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("--scaling %q: write THREADS:OPS pairs, such as 1:68877,2:113889,6:161774", s)
		}
		sc.Points = append(sc.Points, plan.ScalePoint{Threads: threads, OpsPerSec: v})
	}
	sort.SliceStable(sc.Points, func(i, j int) bool { return sc.Points[i].Threads < sc.Points[j].Threads })
	return sc, nil
}

// planError keeps the model's errors to one line without the sentinel's
// prefix, and names the flag a person gave where the model names its
// field ("--reads -1: ...", not "reads per second = -1: ...").
func planError(cmd *cobra.Command, err error) error {
	msg := strings.ReplaceAll(err.Error(), plan.ErrInput.Error()+": ", "")
	for field, flag := range planFieldFlags {
		if rest, ok := strings.CutPrefix(msg, field+" = "); ok && cmd.Flags().Changed(flag) {
			msg = "--" + flag + " " + rest
			break
		}
	}
	return fmt.Errorf("plan: %s", strings.ReplaceAll(msg, "\n", " "))
}

// planFieldFlags maps the model's field names to the flags that set them
// in the same unit (--cpu-us-per-op is in µs, the field in seconds: not
// mapped).
var planFieldFlags = map[string]string{
	"reads per second": "reads", "writes per second": "writes", "growth": "growth", "replicas": "replicas",
	"keys": "keys", "large values per second": "large-per-sec", "ops per second per thread": "ops-per-thread",
	"memory ceiling": "memory-ceiling", "CPU ceiling": "cpu-ceiling", "network ceiling": "network-ceiling",
	"codec ratio": "codec-ratio", "threads": "io-threads", "region": "region", "engine": "engine", "discount": "discount", "instance size": "instance-size",
}

// compare answers --from/--to: the workload (if any) on both fleets, per
// instance.
func (pf *planFlags) compare(cmd *cobra.Command, cat *plan.Catalog, in plan.Input) error {
	if pf.from == "" || pf.to == "" {
		return errors.New("--from and --to go together: the fleet today and the one to compare it with")
	}
	if pf.htmlFile != "" {
		return errors.New("--html: a resize comparison prints text only")
	}
	if pf.instanceSize != "" {
		// Compare sizes each fleet on its own (a 24 × M2 and a 6 × M4 fleet
		// never share an instance size); the flag was silently ignored.
		return errors.New("--instance-size sizes the ranked plan; with --from/--to give each fleet's size as COUNT:NODE:SIZE, such as 24:memorystore-redis-M2:5GB")
	}
	from, err := parseFleet("--from", pf.from)
	if err != nil {
		return err
	}
	to, err := parseFleet("--to", pf.to)
	if err != nil {
		return err
	}
	c, err := plan.Compare(cat, plan.CompareInput{Input: in, From: from, To: to, FromCPU: pf.cpuNow})
	var fe *plan.FleetError
	if errors.As(err, &fe) {
		flag, v := "--from", pf.from
		if fe.To {
			flag, v = "--to", pf.to
		}
		msg := strings.ReplaceAll(fe.Err.Error(), plan.ErrInput.Error()+": ", "")
		if rest, ok := strings.CutPrefix(msg, "region = "); ok {
			return fmt.Errorf("--region %s", rest)
		}
		msg = strings.TrimPrefix(msg, "instance size = ")
		return fmt.Errorf("%s %s: %s", flag, v, msg)
	}
	if err != nil {
		return planError(cmd, err)
	}
	return report.WriteComparison(cmd.OutOrStdout(), c)
}

// parseFleet reads COUNT:NODE[:SIZE].
func parseFleet(flag, v string) (plan.Fleet, error) {
	n, node, ok := strings.Cut(v, ":")
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || strings.TrimSpace(node) == "" {
		return plan.Fleet{}, fmt.Errorf("%s %q: want COUNT:NODE[:SIZE], such as 24:memorystore-redis-M2 or 24:M2:10GB", flag, v)
	}
	f := plan.Fleet{Node: strings.TrimSpace(node), Count: count}
	if name, size, ok := strings.Cut(f.Node, ":"); ok {
		b, err := plan.ParseBytes(strings.TrimSpace(size))
		if err != nil {
			return f, fmt.Errorf("%s %s: the instance size: %s", flag, v, strings.TrimPrefix(err.Error(), plan.ErrInput.Error()+": "))
		}
		if f.GiB, err = wholeGB(b); err != nil {
			return f, fmt.Errorf("%s %s: %v", flag, v, err)
		}
		f.Node = strings.TrimSpace(name)
	}
	return f, nil
}
