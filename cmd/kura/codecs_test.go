package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kuracache "github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/codecfit"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/harness/browsertest"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/proctest"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/storeurl"
)

func TestMain(m *testing.M) {
	cleanup := tempResultsDir()
	code := proctest.Main(m, proctest.Workers{"dict-reader": dictReader})
	cleanup()
	os.Exit(code)
}

type dictReaderArgs struct {
	URL  string
	Keys []string
}

type dictReaderReport struct {
	Titles  []string
	Errors  []string
	Lookups uint64
}

// dictReader is a reader process that has never seen a dictionary.
func dictReader(ctx context.Context, c *proctest.Child) error {
	var a dictReaderArgs
	if err := c.Args(&a); err != nil {
		return err
	}
	st, err := storeurl.Open(ctx, a.URL)
	if err != nil {
		return err
	}
	defer st.Close()
	reg, err := dictstore.New(dictstore.Options{Store: st})
	if err != nil {
		return err
	}
	cd, err := codec.New(codec.Options{DictionarySource: reg})
	if err != nil {
		return err
	}
	cache, err := kuracache.New[corpus.Article](st, kuracache.Options{Codec: cd})
	if err != nil {
		return err
	}
	if err := c.Ready(ctx); err != nil {
		return err
	}
	var rep dictReaderReport
	for _, k := range a.Keys {
		v, err := cache.Get(ctx, k)
		e := ""
		if err != nil {
			e = err.Error()
		}
		rep.Titles, rep.Errors = append(rep.Titles, v.Title), append(rep.Errors, e)
	}
	rep.Lookups = reg.Stats().Lookups
	return c.Report(rep)
}

func writeJSONL(t *testing.T, arts []corpus.Article) string {
	t.Helper()
	var b strings.Builder
	for _, a := range arts {
		j, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "values.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCodecsFiles(t *testing.T) {
	p := writeJSONL(t, corpus.Articles(41, 24))
	html := filepath.Join(t.TempDir(), "report.html")
	dict := filepath.Join(t.TempDir(), "articles.dict")
	out, errOut, err := kura(t, "codecs", p, "--json", "--html", html, "--dict-out", dict, "--min-time", "1ms", "--dict-sizes", "4K")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var rep struct {
		Schema, Recommended, Reason string
		Values                      int
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Schema != "kura.codecs/v1" || rep.Values != 24 {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(errOut, "measuring s2") {
		t.Fatalf("no progress on stderr: %q", errOut)
	}
	h, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(h), `<svg id="pareto"`) {
		t.Fatalf("HTML report: %v", err)
	}
	// The report as a person sees it: in headless Chromium the chart has
	// a point per candidate, the recommended one marked, and the
	// frontier drawn.
	dom := browsertest.New(t).DOM(t, browsertest.FileURL(html))
	if n := strings.Count(dom, "<circle"); n < 5 {
		t.Errorf("rendered chart has %d points", n)
	}
	if !strings.Contains(dom, `class="point pareto chosen"`) && !strings.Contains(dom, `class="point chosen"`) {
		t.Error("rendered chart does not mark the recommended candidate")
	}
	if !strings.Contains(dom, `class="frontier"`) || !strings.Contains(dom, `id="recommended">`+rep.Recommended) {
		t.Errorf("rendered report lacks the frontier or the recommendation %q", rep.Recommended)
	}
	// --dict-out writes the recommended candidate's dictionary, and
	// nothing when it has none. Which candidate wins is decided by CPU
	// timings of 24 values (--min-time 1ms): on a busy machine plain s2
	// can win, so the test holds the rule, not the winner.
	d, err := os.ReadFile(dict)
	if strings.Contains(rep.Recommended, "dict") {
		if err != nil || len(d) == 0 {
			t.Fatalf("dictionary file for %q: %d bytes, %v", rep.Recommended, len(d), err)
		}
	} else if !os.IsNotExist(err) {
		t.Fatalf("%q has no dictionary, but --dict-out wrote %d bytes (%v)", rep.Recommended, len(d), err)
	}
	// The same values from stdin, and from a directory.
	root := newRootCmd()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var so strings.Builder
	root.SetIn(f)
	root.SetOut(&so)
	root.SetErr(&strings.Builder{})
	root.SetArgs([]string{"codecs", "-", "-q", "--min-time", "1ms", "--dict-sizes", "4K"})
	if err := root.Execute(); err != nil || !strings.Contains(so.String(), "recommended: ") {
		t.Fatalf("stdin: %v\n%s", err, so.String())
	}
	if out, _, err := kura(t, "codecs", filepath.Dir(p), "-q", "--min-time", "1ms", "--dict-sizes", "4K"); err != nil || !strings.Contains(out, "24 values") {
		t.Fatalf("directory: %v\n%s", err, out)
	}
}

func TestCodecsBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"codecs"}, "no values"},
		{[]string{"codecs", "/nonexistent/file.jsonl"}, "no such file"},
		{[]string{"codecs", "x.jsonl", "--dict-sizes", "lots"}, "--dict-sizes"},
		{[]string{"codecs", "x.jsonl", "--dict-sizes", "1"}, "from 8B to 16MiB"}, // the trainers refuse a dictionary under 8 bytes
		{[]string{"codecs", "x.jsonl", "--publish"}, "--publish needs"},
		{[]string{"codecs", "--url", "redis://:secret@127.0.0.1:1"}, "127.0.0.1:1"},
	} {
		_, errOut, err := kura(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%v: %v, want %q", c.args, err, c.want)
		}
		if strings.Contains(err.Error()+errOut, "secret") {
			t.Fatalf("%v: password in the output", c.args)
		}
	}
}

// The whole path on real servers: kura codecs samples live values by
// prefix, trains and publishes a dictionary; a writer uses it; a reader
// process that never saw it decodes; the writer rotates to a second
// dictionary from a second run and a new reader decodes both generations.
func TestCodecsPublishWriteReadRotate(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	redis := servertest.Redis(t, servers.RedisConfig{})
	cluster := servertest.RedisCluster(t)
	pool := servertest.MemcachedPool(t, 2, servers.MemcachedConfig{})
	for name, url := range map[string]string{
		"redis": redis.URL(), "redis-cluster": cluster.URL(),
		"memcached": "memcached://" + pool[0].Addr + "," + pool[1].Addr,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := storeurl.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// Values another program wrote as JSON, two generations.
			for g, seed := range []int64{51, 52} {
				for i, a := range corpus.Articles(seed, 24) {
					b, _ := json.Marshal(a)
					if err := st.Set(ctx, fmt.Sprintf("src%d:%d", g, i), b, time.Hour); err != nil {
						t.Fatal(err)
					}
				}
			}
			run := func(prefix string) (string, []byte) {
				t.Helper()
				dict := filepath.Join(t.TempDir(), "d")
				out, errOut, err := kura(t, "codecs", "--url", url, "--prefix", prefix, "--samples", "24",
					"--publish", "--dict-out", dict, "--json", "--min-time", "1ms", "--dict-sizes", "4K")
				if err != nil {
					t.Fatalf("%v\n%s", err, errOut)
				}
				var rep struct{ Recommended string }
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(errOut, "published dictionary") {
					t.Fatalf("recommended %q, nothing published:\n%s", rep.Recommended, errOut)
				}
				d, err := os.ReadFile(dict)
				if err != nil {
					t.Fatal(err)
				}
				return rep.Recommended, d
			}
			name1, d1 := run("src0:")
			wc, err := codecfit.NewCodec(name1, d1, nil)
			if err != nil {
				t.Fatal(err)
			}
			writer, err := kuracache.New[corpus.Article](st, kuracache.Options{Codec: wc})
			if err != nil {
				t.Fatal(err)
			}
			arts := corpus.Articles(53, 8)
			var keys []string
			for i, a := range arts {
				if i == 4 {
					// Rotation: a second run on the other generation.
					name2, d2 := run("src1:")
					if !strings.HasPrefix(name2, strings.SplitN(name1, "+", 2)[0]) {
						t.Logf("second run recommends %s (first %s); the writer keeps its compressor", name2, name1)
					}
					if _, err := wc.SetDictionary(d2); err != nil {
						t.Fatal(err)
					}
					read(t, url, keys, arts, 1)
				}
				k := fmt.Sprintf("out:%d", i)
				if err := writer.Set(ctx, k, a, time.Hour); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k)
			}
			read(t, url, keys, arts, 2)
			if n := len(writer.Stats().BytesWrittenByDictionary); n != 2 {
				t.Fatalf("writer wrote with %d dictionary ids, want 2", n)
			}
		})
	}
}

// read runs a fresh reader process over keys and checks it decoded every
// value, looking up each dictionary once.
func read(t *testing.T, url string, keys []string, arts []corpus.Article, lookups uint64) {
	t.Helper()
	g := proctest.Start(t, "dict-reader", 1, dictReaderArgs{URL: url, Keys: slices.Clone(keys)}, proctest.Options{})
	if err := g.Go(); err != nil {
		t.Fatal(err)
	}
	reps, err := proctest.Decode[dictReaderReport](g.WaitOK(t))
	if err != nil || len(reps) != 1 {
		t.Fatalf("reader: %v", err)
	}
	for i, k := range keys {
		if reps[0].Errors[i] != "" || reps[0].Titles[i] != arts[i].Title {
			t.Fatalf("reader: %s: %q", k, reps[0].Errors[i])
		}
	}
	if reps[0].Lookups != lookups {
		t.Fatalf("reader looked up %d dictionaries, want %d", reps[0].Lookups, lookups)
	}
}
