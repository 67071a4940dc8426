package scan_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/redis/rueidis"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/scan"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache/meta"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
	"github.com/kuracache/kura/store/storeurl"
)

// want is what a test wrote, per pattern.
type want struct {
	keys, bytes int64
}

const bigKey = "report:big"

// fill writes a generated mix of patterns, sizes and formats (JSON
// documents, text, random bytes, kura envelopes, go-redis/cache values,
// gzip) plus one 1.3 MB JSON value, and returns what it wrote per
// pattern.
func fill(t testing.TB, st store.Store, scale int) map[string]*want {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	cd, _ := codec.New(codec.Options{})
	words := strings.Fields("cache redis memcached value prefix sushi network bandwidth latency pipeline cluster slot envelope codec")
	sentence := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	w := map[string]*want{}
	var items []store.Item
	put := func(pattern, key string, v []byte, ttl time.Duration) {
		items = append(items, store.Item{Key: key, Value: v, TTL: ttl})
		if w[pattern] == nil {
			w[pattern] = &want{}
		}
		w[pattern].keys++
		w[pattern].bytes += int64(len(v))
		if len(items) == 500 {
			if err := store.SetMany(ctx, st, items); err != nil {
				t.Fatal(err)
			}
			items = items[:0]
		}
	}
	type profile struct {
		ID    int      `json:"id" msgpack:"id"`
		Name  string   `json:"name" msgpack:"name"`
		Email string   `json:"email" msgpack:"email"`
		Tags  []string `json:"tags" msgpack:"tags"`
		Bio   string   `json:"bio" msgpack:"bio"`
	}
	mk := func(i int) profile {
		return profile{ID: i, Name: "user " + strconv.Itoa(i), Email: fmt.Sprintf("u%d@example.com", i),
			Tags: strings.Fields(sentence(30)), Bio: sentence(100 + rng.IntN(1500))}
	}
	for i := range 20 * scale {
		b, _ := json.Marshal(mk(i))
		put("user:*:profile", fmt.Sprintf("user:%d:profile", i), b, time.Hour)
	}
	for i := range 6 * scale {
		put("page:*", fmt.Sprintf("page:%d", i), []byte("<html><body><p>"+sentence(1000+rng.IntN(7000))+"</p></body></html>"), 0)
	}
	for i := range 6 * scale {
		b := make([]byte, 100+rng.IntN(3000))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		put("blob:*", fmt.Sprintf("blob:%d", i), b, 30*time.Minute)
	}
	for i := range 6 * scale {
		b, _, err := cd.Encode(nil, mk(i))
		if err != nil {
			t.Fatal(err)
		}
		put("kura:article:*", fmt.Sprintf("kura:article:%d", i), b, 2*time.Hour)
	}
	for i := range 4 * scale {
		mp, _ := msgpack.Marshal(mk(i))
		put("gr:*", fmt.Sprintf("gr:%d", i), append(s2.EncodeSnappy(nil, mp), 1), time.Hour)
	}
	for i := range 2 * scale {
		js, _ := json.Marshal(mk(i))
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(js)
		zw.Close()
		put("gz:*", fmt.Sprintf("gz:%d", i), gz.Bytes(), 0)
	}
	// The seed's value: 1.3 MB of JSON (rows appended one by one).
	b := []byte{'['}
	for i := 0; len(b) < 1_300_000; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		row, _ := json.Marshal(map[string]any{"id": i, "label": sentence(60)})
		b = append(b, row...)
	}
	b = append(b, ']')
	put(bigKey, bigKey, b, 0)
	if len(items) > 0 {
		if err := store.SetMany(ctx, st, items); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

type target struct {
	name string
	url  string
	// redis is true for Redis and Cluster (MEMORY USAGE, hashes).
	redis bool
}

func targets(t *testing.T) []target {
	r := servertest.Redis(t, servers.RedisConfig{})
	cl := servertest.RedisCluster(t)
	mc := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{MaxItemSize: 4 << 20, MemoryMB: 256})
	return []target{
		{"redis", r.URL(), true},
		{"cluster", "redis://" + strings.Join(cl.Addrs(), ","), true},
		{"memcached", "memcached://" + mc[0].Addr + "," + mc[1].Addr + "," + mc[2].Addr, false},
		{"redis-ring", "redis+ring://" + servertest.Redis(t, servers.RedisConfig{}).Addr + "," +
			servertest.Redis(t, servers.RedisConfig{}).Addr + "," + servertest.Redis(t, servers.RedisConfig{}).Addr, false},
	}
}

func open(t testing.TB, url string) store.Store {
	t.Helper()
	st, err := storeurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestScanCountsWhatWasWritten: on Redis, a 3-master Cluster and 3
// memcached, the scan's key counts and value bytes per pattern are
// exactly what the test wrote, the 1.3 MB value is the biggest key and is
// called out with its read cost, and nothing is counted twice.
func TestScanCountsWhatWasWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t, tg.url)
			w := fill(t, st, 30)
			if tg.redis {
				rs, _ := store.Find[*redisstore.Store](st)
				c := rs.Client()
				for i := range 10 {
					k := fmt.Sprintf("cfg:h%d", i)
					if err := c.Do(ctx, c.B().Hset().Key(k).FieldValue().FieldValue("a", "1").FieldValue("b", "2").Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
			}
			var progress []scan.Progress
			rep, err := scan.Run(ctx, st, scan.Options{Target: tg.url, Rate: -1, Count: 200, Bandwidth: 100e6,
				Progress: func(p scan.Progress) { progress = append(progress, p) }})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Complete || len(rep.Errors) > 0 {
				t.Fatalf("incomplete: %v", rep.Errors)
			}
			var keys, bytes int64
			for _, x := range w {
				keys += x.keys
				bytes += x.bytes
			}
			got := map[string]scan.Pattern{}
			for _, p := range rep.Patterns {
				got[p.Pattern] = p
			}
			for name, x := range w {
				p, ok := got[name]
				if !ok {
					t.Errorf("pattern %s missing; have %v", name, keysOf(got))
					continue
				}
				if p.Keys != x.keys || p.ValueBytes != x.bytes {
					t.Errorf("%s: %d keys, %d bytes; wrote %d keys, %d bytes", name, p.Keys, p.ValueBytes, x.keys, x.bytes)
				}
			}
			wantKeys := keys
			if tg.redis {
				wantKeys += 10
				if got["cfg:*"].Keys != 10 || got["cfg:*"].Types["hash"] != 10 {
					t.Errorf("hashes: %+v", got["cfg:*"])
				}
			} else if rep.ValueBytes != bytes {
				t.Errorf("value bytes %d, wrote %d", rep.ValueBytes, bytes)
			}
			if rep.Keys != wantKeys {
				t.Errorf("%d keys, wrote %d", rep.Keys, wantKeys)
			}
			var perServer int64
			for _, s := range rep.Servers {
				perServer += s.Keys
			}
			if perServer != rep.Keys || len(rep.Servers) != 3 && tg.name != "redis" {
				t.Errorf("servers %+v: %d keys, report %d", rep.Servers, perServer, rep.Keys)
			}
			if len(rep.Biggest) == 0 || rep.Biggest[0].Key != bigKey {
				t.Fatalf("biggest: %+v", rep.Biggest)
			}
			if tg.redis && rep.Biggest[0].MemoryBytes < rep.Biggest[0].ValueBytes {
				t.Errorf("MEMORY USAGE %d below the value's %d bytes", rep.Biggest[0].MemoryBytes, rep.Biggest[0].ValueBytes)
			}
			big := rep.BigValues
			if big.Count != 1 || len(big.Keys) != 1 || big.Keys[0].Key != bigKey {
				t.Fatalf("big values: %+v", big)
			}
			wantRead := float64(w[bigKey].bytes) * 8 / 100e6
			if math.Abs(big.Keys[0].ReadSeconds-wantRead) > 1e-9 {
				t.Errorf("read cost %v s, want %v", big.Keys[0].ReadSeconds, wantRead)
			}
			if u := got["user:*:profile"]; u.TTL.NoTTL != 0 || u.TTL.MaxSeconds > 3600 || u.TTL.MinSeconds < 3000 {
				t.Errorf("user TTLs: %+v", u.TTL)
			}
			if p := got["page:*"]; p.TTL.NoTTL != p.Keys {
				t.Errorf("page TTLs: %+v", p.TTL)
			}
			var hist int64
			for _, b := range rep.Histogram {
				hist += b.Keys
			}
			if hist != rep.Keys {
				t.Errorf("histogram holds %d keys, report %d", hist, rep.Keys)
			}
			if s := got["kura:article:*"].Savings; s == nil || s.KuraValues != s.Sampled || s.Estimates[0].SavedBytes != 0 {
				t.Errorf("kura values must count as they are: %+v", s)
			}
			if s := got["gr:*"].Savings; s == nil || s.CompressedValues != s.Sampled {
				t.Errorf("go-redis/cache values must count as compressed: %+v", s)
			}
			if s := got["gz:*"].Savings; s == nil || s.CompressedValues != s.Sampled {
				t.Errorf("gzip values must count as compressed: %+v", s)
			}
			if s := got["user:*:profile"].Savings; s == nil || s.Estimates[0].SavedFraction < 0.2 {
				t.Errorf("JSON documents should compress: %+v", s)
			}
			if len(progress) == 0 || progress[len(progress)-1].Phase != "done" || progress[len(progress)-1].Keys != rep.Keys {
				t.Errorf("progress: %+v", progress)
			}
		})
	}
}

func keysOf(m map[string]scan.Pattern) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSavingsEstimateWithinTenPercent: the sampled estimate per pattern is
// within 10% of what encoding every value of the pattern gives.
func TestSavingsEstimateWithinTenPercent(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	st := open(t, r.URL())
	fill(t, st, 60)
	ctx := context.Background()
	sampled, err := scan.Run(ctx, st, scan.Options{Rate: -1})
	if err != nil {
		t.Fatal(err)
	}
	exact, err := scan.Run(ctx, st, scan.Options{Rate: -1, Samples: -1})
	if err != nil {
		t.Fatal(err)
	}
	ex := map[string]scan.Pattern{}
	for _, p := range exact.Patterns {
		ex[p.Pattern] = p
	}
	checked := 0
	for _, p := range sampled.Patterns {
		e := ex[p.Pattern]
		if p.Savings == nil || e.Savings == nil {
			continue
		}
		if p.Keys > int64(scan.DefaultSamples) && p.Savings.Sampled != scan.DefaultSamples {
			t.Errorf("%s: %d sampled, want %d", p.Pattern, p.Savings.Sampled, scan.DefaultSamples)
		}
		if e.Savings.Sampled != int(e.Keys) {
			t.Errorf("%s: exact run read %d of %d values", p.Pattern, e.Savings.Sampled, e.Keys)
		}
		for i, est := range p.Savings.Estimates {
			x := e.Savings.Estimates[i]
			if rel := math.Abs(float64(est.StoredBytes-x.StoredBytes)) / float64(x.StoredBytes); rel > 0.10 {
				t.Errorf("%s %s: estimate %d bytes stored, every value encoded %d (%.1f%% off)", p.Pattern, est.Codec, est.StoredBytes, x.StoredBytes, 100*rel)
			}
			checked++
		}
	}
	if checked < 8 {
		t.Fatalf("only %d estimates compared", checked)
	}
}

// TestScanRateLimit: the commands the server counted (INFO commandstats)
// are what the scan says it sent, and never more than the rate allows
// over the scan's own duration (plus one batch).
func TestScanRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	st := open(t, r.URL())
	fill(t, st, 10)
	rs, _ := store.Find[*redisstore.Store](st)
	c := rs.Client()
	ctx := context.Background()
	if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	const rate, count = 4000, 100
	start := time.Now()
	rep, err := scan.Run(ctx, st, scan.Options{Rate: rate, Count: count, Samples: 20})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.Split(rest, ",")[0], 10, 64)
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	var scanCmds int64
	for _, name := range []string{"scan", "type", "pttl", "memory|usage", "strlen", "get"} {
		scanCmds += calls[name]
	}
	if sent := rep.Servers[0].Commands; scanCmds != sent {
		t.Errorf("server counted %d scan commands (%v), scan says it sent %d", scanCmds, calls, sent)
	}
	if calls["scan"] < rep.Keys/count/2 {
		t.Errorf("%d SCAN calls for %d keys with COUNT %d", calls["scan"], rep.Keys, count)
	}
	allowed := rate*elapsed.Seconds() + 3*count + 1
	if float64(scanCmds) > allowed {
		t.Errorf("%d commands in %v: above the %d/s limit (allowed %.0f)", scanCmds, elapsed, rate, allowed)
	}
	t.Logf("%d keys, %d commands in %v (limit %d/s)", rep.Keys, scanCmds, elapsed, rate)
}

// TestScanManyKeys: 100,000 keys (1,000,000 under KURA_SOAK=1) with the
// 1.3 MB value among them: the count is exact, the big value is found,
// progress is reported, and the heap stays bounded.
func TestScanManyKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	n := 100_000
	if os.Getenv("KURA_SOAK") == "1" {
		n = 1_000_000
	}
	r := servertest.Redis(t, servers.RedisConfig{Args: []string{"--enable-debug-command", "yes"}})
	st := open(t, r.URL())
	rs, _ := store.Find[*redisstore.Store](st)
	c := rs.Client()
	ctx := context.Background()
	// DEBUG POPULATE writes n keys key:0..key:n-1 with values of 64 bytes.
	if err := c.Do(ctx, c.B().Arbitrary("DEBUG", "POPULATE").Args(strconv.Itoa(n), "key", "64").Build()).Error(); err != nil {
		populate(t, c, n)
	}
	big := make([]byte, 1_300_000)
	for i := range big {
		big[i] = "0123456789abcdef"[i%16]
	}
	if err := st.Set(ctx, bigKey, big, 0); err != nil {
		t.Fatal(err)
	}
	var peak uint64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	progressCalls := 0
	rep, err := scan.Run(ctx, st, scan.Options{Rate: -1, Count: 1000, ProgressEvery: 50 * time.Millisecond,
		Progress: func(scan.Progress) {
			progressCalls++
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Keys != int64(n+1) {
		t.Errorf("%d keys, wrote %d", rep.Keys, n+1)
	}
	if rep.Biggest[0].Key != bigKey || rep.BigValues.Count != 1 || rep.BigValues.Keys[0].ValueBytes != int64(len(big)) {
		t.Errorf("big value not found: %+v %+v", rep.Biggest[0], rep.BigValues)
	}
	if progressCalls < 2 {
		t.Errorf("%d progress reports", progressCalls)
	}
	// Keys are not kept: 1,000,000 key names alone would be ~20 MB.
	if peak > base+64<<20 {
		t.Errorf("heap grew by %d MB during the scan", (peak-base)>>20)
	}
	t.Logf("%d keys in %.1fs, heap peak +%d MB", rep.Keys, rep.ElapsedSeconds, (peak-min(peak, base))>>20)
}

func populate(t *testing.T, c rueidis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	val := strings.Repeat("v", 64)
	for i := 0; i < n; i += 1000 {
		cmds := make(rueidis.Commands, 0, 1000)
		for j := i; j < min(n, i+1000); j++ {
			cmds = append(cmds, c.B().Set().Key("key:"+strconv.Itoa(j)).Value(val).Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestScanBadInput: an empty server, a store that cannot be scanned,
// bad options, a server that goes away.
func TestScanBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	r := servertest.Redis(t, servers.RedisConfig{})
	st := open(t, r.URL())
	rep, err := scan.Run(ctx, st, scan.Options{})
	if err != nil || rep.Keys != 0 || !rep.Complete || len(rep.Patterns) != 0 {
		t.Fatalf("empty server: %+v, %v", rep, err)
	}
	var out strings.Builder
	if err := scan.WriteText(&out, rep); err != nil || !strings.Contains(out.String(), "No keys.") {
		t.Errorf("empty report text: %q, %v", out.String(), err)
	}
	mem, _ := memstore.New(memstore.Options{})
	if _, err := scan.Run(ctx, mem, scan.Options{}); !errors.Is(err, scan.ErrUnsupportedStore) {
		t.Errorf("memstore: %v", err)
	}
	for _, o := range []scan.Options{{Count: -1}, {Big: -1}, {Bandwidth: -1}, {Top: -1}} {
		if _, err := scan.Run(ctx, st, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	// A server stopped after the store connected: an error, no panic.
	fill(t, st, 1)
	r.Stop()
	rep, err = scan.Run(ctx, st, scan.Options{})
	if err == nil && (rep.Complete || len(rep.Errors) == 0) {
		t.Errorf("a dead server scanned fine: %+v", rep)
	}
	mc := servertest.Memcached(t, servers.MemcachedConfig{})
	mst := open(t, "memcached://"+mc.Addr)
	mc.Stop()
	rep, err = scan.Run(ctx, mst, scan.Options{})
	if err == nil && (rep.Complete || len(rep.Errors) == 0) {
		t.Errorf("a dead memcached scanned fine: %+v", rep)
	}
}

// TestScanRateLimitMemcached: memcached's own count of gets (every mg,
// sampled values included) is what the scan says it sent, within the
// rate over the scan's duration (plus one batch).
func TestScanRateLimitMemcached(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	mc := servertest.Memcached(t, servers.MemcachedConfig{MaxItemSize: 4 << 20})
	st := open(t, "memcached://"+mc.Addr)
	fill(t, st, 10)
	cl := meta.NewClient(mc.Addr, meta.Options{})
	defer cl.Close()
	ctx := context.Background()
	gets := func() int64 {
		s, err := cl.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(s["cmd_get"], 10, 64)
		return n
	}
	before := gets()
	const rate, count = 3000, 50
	start := time.Now()
	rep, err := scan.Run(ctx, st, scan.Options{Rate: rate, Count: count, Samples: 20})
	elapsed := time.Since(start)
	if err != nil || !rep.Complete {
		t.Fatalf("%v %v", err, rep.Errors)
	}
	got := gets() - before
	// The scan counts the metadump as one command; memcached counts only gets.
	if sent := rep.Servers[0].Commands - 1; got != sent {
		t.Errorf("memcached counted %d gets, the scan says it sent %d", got, sent)
	}
	if allowed := rate*elapsed.Seconds() + 2*count + 1; float64(got) > allowed {
		t.Errorf("%d gets in %v: above the %d/s limit (allowed %.0f)", got, elapsed, rate, allowed)
	}
	if rep.Keys != 441 {
		t.Errorf("%d keys, wrote 441", rep.Keys)
	}
}

// TestScanMemcachedCrawlerBusy: two scans of one memcached at once (its
// LRU crawler serves one dump at a time, and answers BUSY to the other):
// both count every key, exactly. 30,000 keys: a dump held up by the
// scan's own mg calls used to miss a few of them (items the LRU
// maintainer moved during the crawl); the dump is now spooled to disk at
// the server's pace.
func TestScanMemcachedCrawlerBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	mc := servertest.Memcached(t, servers.MemcachedConfig{})
	st := open(t, "memcached://"+mc.Addr)
	ctx := context.Background()
	// Enough keys that the dump outgrows the socket buffers.
	const n = 30_000
	items := make([]store.Item, 0, 1000)
	for i := range n {
		items = append(items, store.Item{Key: "k:" + strconv.Itoa(i), Value: []byte("v")})
		if len(items) == cap(items) {
			if err := store.SetMany(ctx, st, items); err != nil {
				t.Fatal(err)
			}
			items = items[:0]
		}
	}
	type result struct {
		rep *scan.Report
		err error
	}
	out := make(chan result, 2)
	for range 2 {
		go func() {
			rep, err := scan.Run(ctx, st, scan.Options{Rate: 20000, Count: 100, Samples: 5})
			out <- result{rep, err}
		}()
	}
	for range 2 {
		r := <-out
		if r.err != nil || !r.rep.Complete || r.rep.Keys != n {
			t.Errorf("%v, %+v", r.err, r.rep)
		}
	}
}
