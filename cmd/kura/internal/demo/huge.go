package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/inspect"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/store/redisstore"
)

// smallNodeBandwidth is the baseline network bandwidth of a small managed
// cache node: cache.t2.small's 0.128 Gbit/s (AWS ElastiCache supported node
// types), in bytes per second.
const smallNodeBandwidth = 128_000_000 / 8

func hugeScenario() scenario {
	return scenario{
		name:    "huge",
		title:   "One huge value on a small link",
		problem: "A web service caches a summary as one 1.3 MB JSON string on a small Redis node; each SET and GET occupies the node's thin network link, and the whole service slows down while nobody suspects the cache.",
		answer:  "kura warns about the value when it is written (size guard), compresses it before it crosses the link, and its tools find and show such keys.",
		needs:   []string{"redis"},
		run:     runHuge,
	}
}

// summaryRow is one row of the cached summary: a per-article report.
type summaryRow struct {
	ID       int64    `json:"id"`
	Title    string   `json:"title"`
	Category string   `json:"category"`
	Tags     []string `json:"tags"`
	Views    []int    `json:"daily_views"`
	Shares   int      `json:"shares"`
	Score    float64  `json:"score"`
}

// hugeSummary builds a deterministic JSON summary of about n bytes.
func hugeSummary(seed int64, n int) string {
	rng := rand.New(rand.NewPCG(uint64(seed), 4))
	arts := corpus.Articles(seed+2000, 50)
	var rows []summaryRow
	size := 2
	for i := 0; size < n; i++ {
		a := &arts[i%len(arts)]
		r := summaryRow{ID: int64(i + 1), Title: a.Title, Category: a.Category.Name, Tags: a.Tags, Shares: rng.IntN(5000),
			Score: float64(rng.IntN(100000)) / 1000}
		for range 30 {
			r.Views = append(r.Views, rng.IntN(20000))
		}
		b, _ := json.Marshal(r)
		size += len(b) + 1
		rows = append(rows, r)
	}
	b, _ := json.Marshal(rows)
	return string(b)
}

type hugeRow struct {
	name, short string
	kura        bool
	stored      int
	setD, getD  time.Duration
	up, down    int64
	perSecLimit float64
}

func runHuge(ctx context.Context, env *Env, res *Result) error {
	value := hugeSummary(env.cfg.Seed, env.cfg.Size.HugeBytes)
	proxy, err := faults.NewProxy(env.redis.Addr, faults.ProxyOptions{Bandwidth: smallNodeBandwidth, Protocol: faults.RESP})
	if err != nil {
		return err
	}
	defer proxy.Close()
	st, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{proxy.Addr()}})
	if err != nil {
		return err
	}
	defer st.Close()

	measure := func(name, short string, isKura bool, set func() (int, error), get func() error) (hugeRow, error) {
		r := hugeRow{name: name, short: short, kura: isKura}
		s0 := proxy.Stats()
		t0 := time.Now()
		n, err := set()
		if err != nil {
			return r, err
		}
		r.setD = time.Since(t0)
		s1 := proxy.Stats()
		t0 = time.Now()
		if err := get(); err != nil {
			return r, err
		}
		r.getD = time.Since(t0)
		s2 := proxy.Stats()
		r.stored = n
		r.up = s1.BytesUp - s0.BytesUp
		r.down = s2.BytesDown - s1.BytesDown
		r.perSecLimit = float64(smallNodeBandwidth) / float64(max(r.down, 1))
		return r, nil
	}

	fmt.Fprintf(env.progress, "  a %s JSON summary as a plain string, over a link limited to %.3f Gbit/s ...\n", human(int64(len(value))), float64(smallNodeBandwidth)*8/1e9)
	const rawKey, kuraKey = "summary:raw", "summary:kura"
	raw, err := measure("plain JSON string (as the service stored it)", "plain JSON string", false,
		func() (int, error) { return len(value), st.Set(ctx, rawKey, []byte(value), time.Hour) },
		func() error { _, err := st.Get(ctx, rawKey); return err })
	if err != nil {
		return err
	}

	var warnings []string
	c, err := kura.New[json.RawMessage](st, kura.Options{Name: "summary", TTL: time.Hour,
		OnLargeValue: func(key string, size int) {
			warnings = append(warnings, fmt.Sprintf("kura: large value: key %q is %s encoded (warning threshold %s): every read of it occupies the network link",
				key, human(int64(size)), human(kura.DefaultWarnValueSize)))
		}})
	if err != nil {
		return err
	}
	fmt.Fprintln(env.progress, "  the same summary through a kura Cache ...")
	viaKura, err := measure("kura Cache (default codec)", "kura Cache", true,
		func() (int, error) {
			before := c.Stats().BytesWritten
			err := c.Set(ctx, kuraKey, json.RawMessage(value), 0)
			return int(c.Stats().BytesWritten - before), err
		},
		func() error {
			v, err := c.Get(ctx, kuraKey)
			if err == nil && len(v) != len(value) {
				err = fmt.Errorf("read back %d bytes, wrote %d", len(v), len(value))
			}
			return err
		})
	if err != nil {
		return err
	}
	large := c.Stats().LargeValues
	res.count("kura.large_value_warnings", int64(large))

	t := Table{Title: fmt.Sprintf("A %s summary over a %.3f Gbit/s link (a small node's baseline)", human(int64(len(value))), float64(smallNodeBandwidth)*8/1e9),
		Columns: []string{"how it is stored", "stored bytes", "bytes up (SET)", "SET", "bytes down (GET)", "GET", "GETs/s that fill the link"}}
	sizeChart := Chart{Title: "Bytes on the link for one SET and one GET", Unit: "bytes"}
	timeChart := Chart{Title: "Time of one GET on the small link", Unit: "ms"}
	for _, r := range []hugeRow{raw, viaKura} {
		t.Rows = append(t.Rows, []string{r.name, human(int64(r.stored)), human(r.up), round(r.setD), human(r.down), round(r.getD),
			fmt.Sprintf("%.0f", r.perSecLimit)})
		res.count(r.short+".bytes_up", r.up)
		res.count(r.short+".bytes_down", r.down)
		sizeChart.Bars = append(sizeChart.Bars, Bar{Label: r.short, Value: float64(r.up + r.down), Kura: r.kura})
		timeChart.Bars = append(timeChart.Bars, Bar{Label: r.short, Value: ms(r.getD), Kura: r.kura})
	}
	res.Tables = append(res.Tables, t)
	res.Charts = append(res.Charts, sizeChart, timeChart)
	res.Checks = append(res.Checks,
		Check{What: "bytes on the link for one SET, plain string vs kura", Before: raw.up, After: viaKura.up, Want: "less"},
		Check{What: "bytes on the link for one GET, plain string vs kura", Before: raw.down, After: viaKura.down, Want: "less"},
		Check{What: "size-guard warnings for the huge value (none without kura)", Before: 0, After: int64(large), Want: "more"},
	)
	res.Headline = fmt.Sprintf("one GET on a %.3f Gbit/s link: %s (%s) as a plain string, %s (%s) through kura; the size guard warned %s",
		float64(smallNodeBandwidth)*8/1e9, human(raw.down), round(raw.getD), human(viaKura.down), round(viaKura.getD), count(int64(large), "times"))
	for _, w := range warnings {
		res.note("size guard: %s", w)
	}

	// kura inspect: what a person sees for the key.
	rep, err := inspect.Key(ctx, st, kuraKey, inspect.Options{})
	if err != nil {
		return err
	}
	it := Table{Title: "kura inspect " + kuraKey, Columns: []string{"key", "format", "serializer", "compressor", "stored", "uncompressed", "TTL"}}
	ser, comp := "-", "-"
	if rep.Kura != nil {
		ser, comp = rep.Kura.Serializer, rep.Kura.Compressor
	}
	ttl := "none"
	if rep.TTLSeconds != nil {
		ttl = fmt.Sprintf("%.0fs", *rep.TTLSeconds)
	}
	it.Rows = append(it.Rows, []string{rep.Key, rep.Format, ser, comp, human(int64(rep.StoredBytes)), human(int64(rep.RawBytes)), ttl})
	res.Tables = append(res.Tables, it)

	res.note("The proxy limits each direction to %s/s, shared by every connection, as one node's link; bytes are counted by the proxy.", human(smallNodeBandwidth))
	res.note("In production a 1.3 MB SET took 8 s on a t2.small because everything else shared that link; alone on the link it takes the time shown, and the last column is how many reads per second fill the link by themselves.")
	res.Commands = append(res.Commands, "kura demo --only huge", "kura inspect redis://HOST:PORT "+kuraKey)

	// kura scan: the walk a person would run to find such values.
	big, walked, err := scanBigValues(ctx, st, "redis://"+env.redis.Addr, float64(smallNodeBandwidth)*8)
	switch {
	case errors.Is(err, errScanNotBuilt):
		res.Missing = append(res.Missing, "kura scan (walking a live server for its biggest values) is not built yet")
	case err != nil:
		return fmt.Errorf("kura scan: %w", err)
	default:
		bt := Table{Title: fmt.Sprintf("kura scan: values over 100 KB among the %d keys on the server, costed at %.3f Gbit/s", walked, float64(smallNodeBandwidth)*8/1e9),
			Columns: []string{"key", "value bytes", "one read", "reads/s that fill the link"}}
		found := false
		for _, b := range big {
			bt.Rows = append(bt.Rows, []string{b.key, human(b.bytes), round(time.Duration(b.readSeconds * float64(time.Second))), fmt.Sprintf("%.0f", b.readsPerSec)})
			found = found || b.key == rawKey
		}
		res.Tables = append(res.Tables, bt)
		var foundN int64
		if found {
			foundN = 1
		}
		res.count("scan.big_values", int64(len(big)))
		res.count("scan.found_huge", foundN)
		res.Commands = append(res.Commands, fmt.Sprintf("kura scan redis://HOST:PORT --bandwidth %.0fMbit", float64(smallNodeBandwidth)*8/1e6))
	}
	// kura plan: which node type's link carries this value.
	const readsPerSec = 20 // labelled: the field report gives no rate
	rows, err := planLargest(float64(raw.stored), readsPerSec)
	switch {
	case errors.Is(err, errPlanNotBuilt):
		res.Missing = append(res.Missing, "kura plan naming a node type whose link carries this value is not built yet")
	case err != nil:
		return fmt.Errorf("kura plan: %w", err)
	default:
		pt := Table{Title: fmt.Sprintf("kura plan: the %s value read %d times a second, against each node type's baseline link", human(int64(raw.stored)), readsPerSec),
			Columns: []string{"node type", "one transfer", "link keeps up", "per month"}}
		var carry, fail []string
		for _, r := range rows {
			fits := "no"
			if r.largestFits {
				fits = "yes"
				carry = append(carry, r.node)
			} else {
				fail = append(fail, r.node)
			}
			pt.Rows = append(pt.Rows, []string{r.node, round(time.Duration(r.largestSeconds * float64(time.Second))), fits, r.monthly})
		}
		res.Tables = append(res.Tables, pt)
		if len(carry) > 0 {
			res.note("kura plan: node types whose baseline link carries %d reads/s of this value: %s; too thin: %s.",
				readsPerSec, strings.Join(carry, ", "), strings.Join(fail, ", "))
		}
		res.Commands = append(res.Commands, fmt.Sprintf("kura plan --keys 1 --value-size %d --largest-value %d --reads %d --large-per-sec %d", raw.stored, raw.stored, readsPerSec, readsPerSec))
	}
	return nil
}
