package codecfit_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codecfit"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/harness/vistest"
	"github.com/kuracache/kura/internal/units"
	"github.com/kuracache/kura/store/storeurl"
)

// fast keeps the timing loops short: these tests check decisions and
// reports, not speeds.
var fast = codecfit.Options{MinTime: time.Millisecond, DictSizes: []int{4 << 10}}

func values(t *testing.T, docs []any) []codecfit.Value {
	t.Helper()
	var out []codecfit.Value
	for _, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		v, err := codecfit.FromJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func articles(n int) []any {
	var out []any
	for _, a := range corpus.Articles(21, n) {
		out = append(out, a)
	}
	return out
}

// Values of one kind sharing their structure: a dictionary wins.
func TestRecommendDictionaryOnArticles(t *testing.T) {
	rep, err := codecfit.Analyze(values(t, articles(40)), fast)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Recommended, "+dict-") || rep.Dictionary(rep.Recommended) == nil {
		t.Fatalf("recommended %q (%s); want a dictionary", rep.Recommended, rep.Reason)
	}
	if rep.TrainValues != 20 || rep.TestValues != 20 {
		t.Fatalf("split %d/%d", rep.TrainValues, rep.TestValues)
	}
	seed, ok := rep.Result("msgpack+snappy")
	if !ok || seed.VsSeed != 1 || seed.EncodeNs <= 0 || seed.DecodeNs <= 0 {
		t.Fatalf("reference row %+v", seed)
	}
	got, _ := rep.Result(rep.Recommended)
	if got.Bytes >= seed.Bytes || !got.Pareto && got.EncodeNs+got.DecodeNs > seed.EncodeNs+seed.DecodeNs {
		t.Fatalf("recommended %+v against the seed's %+v", got, seed)
	}
	if !got.Pareto && !strings.Contains(rep.Reason, "off the Pareto frontier because") {
		t.Errorf("%s is starred off its own Pareto frontier without a word why: %s", got.Name, rep.Reason)
	}
	// The compact envelope is a candidate, with and without a dictionary,
	// and stores the same payload in a smaller header than version 2. The
	// payloads differ by the order msgpack writes a map's keys in (Go's
	// map order), which moves compressed sizes by up to ~1%.
	for _, pair := range [][2]string{{"s2", "s2-compact"}, {"s2+dict-4KiB", "s2-compact+dict-4KiB"}} {
		v2, ok2 := rep.Result(pair[0])
		v3, ok3 := rep.Result(pair[1])
		if !ok2 || !ok3 || float64(v3.Bytes) > 1.02*float64(v2.Bytes) {
			t.Errorf("%s %d B (%v), %s %d B (%v): want the compact candidate, no more than 2%% larger", pair[0], v2.Bytes, ok2, pair[1], v3.Bytes, ok3)
		}
	}
	if strings.HasPrefix(rep.Recommended, codecfit.CompactPrefix) && !strings.Contains(rep.Reason, "upgrade every reader first") {
		t.Errorf("a compact recommendation without the upgrade order: %s", rep.Reason)
	}
}

// Random bytes (base64 text, which only the entropy coder can shrink by
// its 6/8 alphabet, and not by 10% after msgpack framing): no compression.
func TestRecommendIncompressible(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var docs []any
	for i := 0; i < 40; i++ {
		b := make([]byte, 2000)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		docs = append(docs, map[string]any{"blob": base64.StdEncoding.EncodeToString(b)[:2000]})
	}
	var vals []codecfit.Value
	for _, v := range values(t, docs) {
		// The raw bytes themselves, as a binary value.
		s := v.V.(map[string]any)["blob"].(string)
		raw, _ := base64.StdEncoding.DecodeString(s[:len(s)/4*4])
		vals = append(vals, codecfit.FromBytes(raw))
	}
	rep, err := codecfit.Analyze(vals, fast)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended != "none" && rep.Recommended != "s2" && rep.Recommended != codecfit.CompactPrefix {
		t.Fatalf("recommended %q for random bytes (%s)", rep.Recommended, rep.Reason)
	}
	if !strings.Contains(rep.Reason, "compress") {
		t.Fatalf("reason %q does not say why", rep.Reason)
	}
}

func TestRecommendTiny(t *testing.T) {
	var docs []any
	for i := 0; i < 40; i++ {
		docs = append(docs, map[string]any{"n": i})
	}
	rep, err := codecfit.Analyze(values(t, docs), fast)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended != "none" || !strings.Contains(rep.Reason, "tiny") {
		t.Fatalf("recommended %q for 6-byte values (%s)", rep.Recommended, rep.Reason)
	}
}

// Values that compress well each on its own (a long repeated token) but
// share nothing with each other: a dictionary trained on some does not
// help the others, so no dictionary.
func TestRecommendNoDictionaryWhenUseless(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var docs []any
	for i := 0; i < 40; i++ {
		tok := make([]byte, 24)
		for j := range tok {
			tok[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)]
		}
		docs = append(docs, map[string]any{fmt.Sprintf("%x", r.Uint64()): strings.Repeat(string(tok), 60)})
	}
	rep, err := codecfit.Analyze(values(t, docs), fast)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rep.Recommended, "dict") || rep.Recommended == "none" {
		t.Fatalf("recommended %q (%s); want a codec without a dictionary", rep.Recommended, rep.Reason)
	}
	if !strings.Contains(rep.Reason, "dictionary") {
		t.Fatalf("reason %q does not say why no dictionary", rep.Reason)
	}
}

func TestTooFewValues(t *testing.T) {
	if _, err := codecfit.Analyze(values(t, articles(3)), fast); err != codecfit.ErrTooFewValues {
		t.Fatalf("3 values: %v", err)
	}
}

func TestRead(t *testing.T) {
	for name, in := range map[string]string{
		"jsonl":  "{\"a\":1}\n{\"a\":2}\n\n{\"a\":3}\n",
		"array":  " [ {\"a\":1}, {\"a\":2}, {\"a\":3} ]",
		"pretty": "{\n \"a\": 1\n}\n{\n \"a\": 2\n}{\"a\":3}",
	} {
		vs, err := codecfit.Read(strings.NewReader(in), name)
		if err != nil || len(vs) != 3 {
			t.Fatalf("%s: %d values, %v", name, len(vs), err)
		}
		if _, ok := vs[0].V.(map[string]any)["a"].(int64); !ok {
			t.Fatalf("%s: integer became %T", name, vs[0].V.(map[string]any)["a"])
		}
	}
	if _, err := codecfit.Read(strings.NewReader("{\"a\":1}\n{broken"), "bad"); err == nil || !strings.Contains(err.Error(), "document 2") {
		t.Fatalf("broken JSON Lines: %v", err)
	}
}

func TestReports(t *testing.T) {
	rep, err := codecfit.Analyze(values(t, articles(16)), fast)
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := codecfit.WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Schema      string            `json:"schema"`
		Recommended string            `json:"recommended"`
		Results     []codecfit.Result `json:"results"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Schema != "kura.codecs/v1" || back.Recommended != rep.Recommended || len(back.Results) != len(rep.Results) {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	var txt, html bytes.Buffer
	if err := codecfit.WriteText(&txt, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "recommended: "+rep.Recommended) || !strings.Contains(txt.String(), "msgpack+snappy") {
		t.Fatalf("text report:\n%s", txt.String())
	}
	if err := codecfit.WriteHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	esc := strings.ReplaceAll(rep.Recommended, "+", "&#43;") // html/template's escaping
	for _, want := range []string{`<svg id="pareto"`, `class="frontier"`, `data-name="` + esc + `"`, `id="recommended">` + esc} {
		if !strings.Contains(h, want) {
			t.Fatalf("HTML report lacks %q", want)
		}
	}
	if strings.Contains(strings.ToLower(h+txt.String()), "seed 0") {
		t.Fatal("a report names a field report instead of the problem")
	}
	// One circle per candidate, the Pareto ones marked.
	if n, p := strings.Count(h, "<circle"), strings.Count(h, `class="point pareto`); n != len(rep.Results) || p == 0 {
		t.Fatalf("%d points (%d on the frontier) for %d candidates", n, p, len(rep.Results))
	}
}

// Live sources: values written by a kura Cache (envelopes, decoded back to
// values) and plain JSON written by another program, sampled by prefix,
// on a real Redis, Cluster and memcached pool.
func TestSampleStore(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	redis := servertest.Redis(t, servers.RedisConfig{})
	cluster := servertest.RedisCluster(t)
	pool := servertest.MemcachedPool(t, 2, servers.MemcachedConfig{})
	urls := map[string]string{
		"redis":         redis.URL(),
		"redis-cluster": cluster.URL(),
		"memcached":     "memcached://" + pool[0].Addr + "," + pool[1].Addr,
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := storeurl.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			c, err := kura.New[corpus.Article](st, kura.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range corpus.Articles(31, 30) {
				if err := c.Set(ctx, fmt.Sprintf("article:%d", i), a, time.Hour); err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(map[string]any{"user": i, "name": fmt.Sprintf("user %d", i)})
				if err := st.Set(ctx, fmt.Sprintf("user:%d", i), b, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			vs, ss, err := codecfit.SampleStore(ctx, st, codecfit.SampleOptions{Prefix: "article:", N: 20})
			if err != nil {
				t.Fatal(err)
			}
			if ss.Listed != 30 || len(vs) != 20 || ss.Kura != 20 || ss.JSON != 0 {
				t.Fatalf("articles: %+v, %d values", ss, len(vs))
			}
			if _, ok := vs[0].V.(map[string]any)["title"]; !ok || vs[0].JSONBytes < 1000 {
				t.Fatalf("a sampled article decoded to %T (%d JSON bytes)", vs[0].V, vs[0].JSONBytes)
			}
			vs, ss, err = codecfit.SampleStore(ctx, st, codecfit.SampleOptions{Prefix: "user:", N: 100})
			if err != nil || ss.Listed != 30 || ss.JSON != 30 || len(vs) != 30 {
				t.Fatalf("users: %+v, %v", ss, err)
			}
			rep, err := codecfit.Analyze(vs, fast)
			if err != nil || rep.Recommended == "" {
				t.Fatalf("analyze: %v", err)
			}
		})
	}
	mem, err := storeurl.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := codecfit.SampleStore(context.Background(), mem, codecfit.SampleOptions{}); err != codecfit.ErrCannotList {
		t.Fatalf("in-process store: %v", err)
	}
}

// TestHTMLNeutralizesHostileStrings: every string of a codecs report
// (candidate names, the reason, the machine, the configuration snippet
// that names a --dict-out file) reaches the page with its controls and
// bidi overrides made visible, not obeyed.
func TestHTMLNeutralizesHostileStrings(t *testing.T) {
	rep, err := codecfit.Analyze(values(t, articles(16)), fast)
	if err != nil {
		t.Fatal(err)
	}
	vistest.Fill(rep)
	var b bytes.Buffer
	if err := codecfit.WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	vistest.CheckPage(t, "codecs report", b.String())
	b.Reset()
	if err := codecfit.WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	vistest.CheckText(t, "codecs text", b.String())
}

// TestCandidateNamesSpeakTheSizeGrammar: a dictionary candidate's name
// gives the size it was trained for (Options.DictSizes, --dict-sizes) in
// the one grammar of every kura command (KiB = 1,024 B, KB = 1,000 B):
// the name reads back, through the parser of --dict-sizes, as that size
// (a "16K" candidate was 16,384 B once while --dict-sizes 16K meant
// 16,000).
func TestCandidateNamesSpeakTheSizeGrammar(t *testing.T) {
	opts := fast
	opts.DictSizes = []int{4 << 10, 6000}
	rep, err := codecfit.Analyze(values(t, articles(16)), opts)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]string{}
	for _, x := range rep.Results {
		_, size, ok := strings.Cut(x.Name, "+dict-")
		if !ok {
			continue
		}
		n, err := units.ParseBytes(size)
		if err != nil {
			t.Fatalf("candidate %s: its size %q does not parse: %v", x.Name, size, err)
		}
		seen[int(n)] = size
	}
	if seen[4<<10] != "4KiB" || seen[6000] != "6KB" || len(seen) != 2 {
		t.Errorf("dictionary sizes named %v; want 4096 as 4KiB and 6000 as 6KB", seen)
	}
}
