package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/corpus"
	"github.com/kuracache/kura/internal/servers"
	"github.com/kuracache/kura/store/memcache"
)

// WriteBackResult is seed 001 replayed: writing a user's missed records
// back to a memcached pool key by key, and as one SetMany.
type WriteBackResult struct {
	// Skipped explains why the scenario did not run (no memcached).
	Skipped string
	Servers int
	Records int
	// PerKey is the time of one Set per record, in turn; SetMany the time
	// of one SetMany of all records (one quiet pipeline per server, all
	// servers at once).
	PerKey, SetMany time.Duration
	// ReadBack is one FetchMany of all records after the write-back.
	ReadBack time.Duration
	// Verified reports that FetchMany returned every record without
	// calling the loader.
	Verified bool
}

// RunWriteBack replays seed 001 on private memcached servers it starts and
// stops. Without memcached installed it returns a result whose Skipped
// says so.
func RunWriteBack(ctx context.Context, nServers, records int, progress io.Writer) (*WriteBackResult, error) {
	if progress == nil {
		progress = io.Discard
	}
	res := &WriteBackResult{Servers: nServers, Records: records}
	var addrs []string
	for i := 0; i < nServers; i++ {
		m, err := servers.StartMemcached(ctx, servers.MemcachedConfig{})
		if errors.Is(err, servers.ErrNotInstalled) {
			res.Skipped = "memcached is not installed (apt-get install memcached)"
			return res, nil
		}
		if err != nil {
			return nil, err
		}
		defer m.Stop()
		addrs = append(addrs, m.Addr)
	}
	st, err := memcache.New(ctx, memcache.Options{Servers: addrs})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c, err := kura.New[corpus.Item](st, kura.Options{Name: "inventory"})
	if err != nil {
		return nil, err
	}
	items := corpus.Inventory(1, 42, records)
	byKey := make(map[string]corpus.Item, len(items))
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = "UserItem/" + strconv.FormatInt(it.ItemID, 10)
		byKey[keys[i]] = it
	}

	fmt.Fprintf(progress, "memcached write-back: writing %d inventory records to %d memcached servers, one Set per key ...\n", records, nServers)
	start := time.Now()
	for _, k := range keys {
		if err := c.Set(ctx, k, byKey[k], time.Hour); err != nil {
			return nil, err
		}
	}
	res.PerKey = time.Since(start)
	if err := c.DeleteMany(ctx, keys); err != nil {
		return nil, err
	}

	fmt.Fprintf(progress, "memcached write-back: the same records as one SetMany ...\n")
	start = time.Now()
	if err := c.SetMany(ctx, byKey, time.Hour); err != nil {
		return nil, err
	}
	res.SetMany = time.Since(start)

	start = time.Now()
	got, err := c.FetchMany(ctx, keys, time.Hour, func(context.Context, []string) (map[string]corpus.Item, error) {
		return nil, errors.New("loader called: the write-back lost records")
	})
	res.ReadBack = time.Since(start)
	if err != nil {
		return nil, err
	}
	res.Verified = len(got) == len(keys)
	return res, nil
}

// Print writes the seed 001 table.
func (r *WriteBackResult) Print(w io.Writer) {
	if r.Skipped != "" {
		fmt.Fprintf(w, "\nMemcached write-back skipped: %s\n", r.Skipped)
		return
	}
	fmt.Fprintf(w, "\nWriting misses back to memcached: per-key Set vs one SetMany, %d records (~300 B) to %d private memcached servers on loopback\n\n", r.Records, r.Servers)
	fmt.Fprintf(w, "  one Set per key   %10s\n", r.PerKey.Round(time.Microsecond))
	fmt.Fprintf(w, "  one SetMany       %10s   %.1fx faster\n", r.SetMany.Round(time.Microsecond), float64(r.PerKey)/float64(max(r.SetMany, 1)))
	check := "every record read back"
	if !r.Verified {
		check = "SOME RECORDS MISSING"
	}
	fmt.Fprintf(w, "  FetchMany of all  %10s   (%s, loader not called)\n", r.ReadBack.Round(time.Microsecond), check)
	fmt.Fprintln(w, "\nIn production, a game backend saw 15.8 s vs 0.14 s (115x) across a datacenter network; a loopback round trip is ~25 µs,")
	fmt.Fprintln(w, "so the ratio here is smaller. BENCHMARKS.md has the same scenario behind an emulated 0.5 ms round trip.")
}
