package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
	"github.com/kuracache/kura/store/storetest"
	"github.com/kuracache/kura/store/storeurl"
)

const (
	dataPW     = "data-s3cret"
	sentinelPW = "sentinel-s3cret"
)

func sentinelOpts(set *servers.SentinelSet) redisstore.Options {
	return redisstore.Options{
		Addrs:    set.SentinelAddrs(),
		Password: set.Password,
		Sentinel: redisstore.Sentinel{MasterSet: set.MasterSet, Password: set.SentinelPassword},
	}
}

func openSentinel(t *testing.T, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	opts.FailFast = true
	s, err := redisstore.New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New(sentinel) = %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSentinel: a Store in Sentinel mode passes the store conformance
// suite against the primary the sentinels name, with the data password
// and the sentinels' own password kept apart; a wrong sentinel password
// is refused without being shown.
func TestSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, SentinelPassword: sentinelPW})
	storetest.Run(t, func(t *testing.T) store.Store {
		return openSentinel(t, sentinelOpts(set))
	})
	t.Run("node", func(t *testing.T) {
		s := openSentinel(t, sentinelOpts(set))
		if got := s.NodeOf("k"); got != redisstore.SentinelNode(set.MasterSet) {
			t.Fatalf("NodeOf = %q, want the master set", got)
		}
		if err := s.ProbeNode(context.Background(), s.NodeOf("k")); err != nil {
			t.Fatalf("ProbeNode(master set) = %v", err)
		}
	})
	for _, tc := range []struct{ name, data, sentinel string }{
		{"sentinel password", dataPW, "wrong-sentinel-pw"},
		{"data password", "wrong-data-pw", sentinelPW},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := sentinelOpts(set)
			o.Password, o.Sentinel.Password = tc.data, tc.sentinel
			o.FailFast = true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := redisstore.New(ctx, o)
			if err == nil {
				s.Close()
				t.Fatal("New with a wrong password succeeded")
			}
			for _, secret := range []string{tc.data, tc.sentinel, dataPW, sentinelPW} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows a password: %v", err)
				}
			}
		})
	}
	t.Run("no master set", func(t *testing.T) {
		_, err := redisstore.New(context.Background(), redisstore.Options{Sentinel: redisstore.Sentinel{Password: "x"}})
		if err == nil {
			t.Fatal("sentinel credentials without a master set accepted")
		}
	})
}

// TestSentinelFailoverStore: after the primary is SIGKILLed the Store
// follows the sentinels to the promoted replica with no reconfiguration,
// and with tracking on it reports a flush (the old primary's
// invalidation reports are gone with it).
func TestSentinelFailoverStore(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, SentinelPassword: sentinelPW, DownAfter: 500 * time.Millisecond})
	o := sentinelOpts(set)
	o.Tracking = redisstore.Tracking{Enabled: true}
	s := openSentinel(t, o)
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTracked(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	_, flushes := s.TrackingReports()
	// Replication is asynchronous: under load the replica could be
	// promoted before "k" reached it, and the Get below would find
	// nothing for ever. WAIT until one replica has acknowledged it.
	if n, err := set.Primary.Do(ctx, "WAIT", "1", "10000"); err != nil || n != "1" {
		t.Fatalf("WAIT 1 before the failover = %q, %v", n, err)
	}
	if err := set.KillPrimary(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := s.Get(ctx, "k")
		if err == nil {
			if string(v) != "v" {
				t.Fatalf("after failover Get = %q", v)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover within 30s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Set(ctx, "k2", []byte("v2"), 0); err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	if role, _ := set.Replica.Do(ctx, "ROLE"); !strings.HasPrefix(role, "master") {
		t.Fatalf("the replica was not promoted: %q", role)
	}
	if _, f := s.TrackingReports(); f <= flushes {
		t.Fatalf("no L1 flush reported on failover (flushes %d -> %d)", flushes, f)
	}
}

// TestInvalidateAcrossFailover kills the primary right after Invalidate
// returns while the replication link is stalled, so the DEL has reached
// the primary but not the replica. Without a wait the promoted replica
// serves the old value again (the window is real, and this test is able
// to see it); with InvalidateWait (Sentinel mode's default) Invalidate
// returns only once the replica has the DEL, and the old value never
// comes back.
//
// The link is stalled at a proxy, not by SIGSTOPping the replica: bytes
// the primary wrote before it died would sit in the stopped replica's
// socket buffer and be applied when it resumes, so a SIGSTOP never loses
// the DEL.
func TestInvalidateAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	for _, tc := range []struct {
		name  string
		wait  redisstore.InvalidateWait
		stale bool
	}{
		{"no wait: the window", redisstore.InvalidateWait{Replicas: -1}, true},
		{"wait for a replica", redisstore.InvalidateWait{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var proxy *faults.Proxy
			set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, DownAfter: 500 * time.Millisecond,
				// The replica follows the proxy: the sentinels must not
				// re-point it at the primary during the test.
				FailoverTimeout: time.Minute,
				ReplicaLink: func(primary string) (string, error) {
					proxy = servertest.Proxy(t, primary, faults.ProxyOptions{})
					return proxy.Addr(), nil
				}})
			o := sentinelOpts(set)
			o.InvalidateWait = tc.wait
			s := openSentinel(t, o)
			ctx := context.Background()
			if err := s.Set(ctx, "user:1", []byte("old"), 0); err != nil {
				t.Fatal(err)
			}
			waitReplicated(t, set, "user:1")
			if err := set.WaitFreshInfo(ctx); err != nil {
				t.Fatal(err)
			}
			proxy.Stall()
			released := make(chan struct{})
			if !tc.stale {
				// The wait holds Invalidate until the link flows again.
				go func() {
					time.Sleep(200 * time.Millisecond)
					proxy.Unstall()
					close(released)
				}()
			}
			start := time.Now()
			if err := s.Invalidate(ctx, []string{"user:1"}, 0); err != nil {
				t.Fatalf("Invalidate = %v", err)
			}
			took := time.Since(start)
			set.Primary.Kill()
			if tc.stale {
				// The stalled bytes die with the link; the replica never
				// sees the DEL.
				proxy.ResetConns()
				proxy.Unstall()
			} else {
				<-released
				if took < 150*time.Millisecond {
					t.Fatalf("Invalidate returned after %v, before the replica could have the DEL", took)
				}
			}
			var v []byte
			var err error
			deadline := time.Now().Add(30 * time.Second)
			for {
				v, err = s.Get(ctx, "user:1")
				if err == nil || errors.Is(err, store.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no failover within 30s: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			switch {
			case tc.stale && err != nil:
				t.Fatalf("without a wait the DEL survived (Get = %v): the test did not open the window", err)
			case !tc.stale && err == nil:
				t.Fatalf("the invalidated value came back after the failover: %q", v)
			}
		})
	}
}

// waitReplicated waits until the replica holds key.
func waitReplicated(t *testing.T, set *servers.SentinelSet, key string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if v, err := set.Replica.Do(context.Background(), "EXISTS", key); err == nil && v == "1" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never reached the replica", key)
}

// TestSentinelURL opens a Sentinel-managed primary from its
// redis+sentinel:// URL, passwords for both tiers included.
func TestSentinelURL(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, SentinelPassword: sentinelPW})
	url := "redis+sentinel://:" + dataPW + "@" + strings.Join(set.SentinelAddrs(), ",") + "/" + set.MasterSet + "?sentinel_password=" + sentinelPW
	s, err := storeurl.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := set.Primary.Do(ctx, "GET", "k"); err != nil || v != "v" {
		t.Fatalf("the value is not on the primary: %q, %v", v, err)
	}
	_, err = storeurl.Open(context.Background(), strings.Replace(url, sentinelPW, "wrong-pw", 1))
	if err == nil || strings.Contains(err.Error(), "wrong-pw") || strings.Contains(err.Error(), dataPW) {
		t.Fatalf("Open with a wrong sentinel password = %v", err)
	}
}

// TestSentinelManualFailover: a failover the sentinels run on purpose
// (SENTINEL FAILOVER, as a managed service does for maintenance) leaves
// the old primary alive as a replica. The Store moves to the new
// primary, and a key read through tracking before the switch is not kept:
// the L1 is told (a flush, or a report of the key) once another client
// changes the key on the new primary.
func TestSentinelManualFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, SentinelPassword: sentinelPW})
	o := sentinelOpts(set)
	o.Tracking = redisstore.Tracking{Enabled: true}
	s := openSentinel(t, o)
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTracked(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	keys0, flushes0 := s.TrackingReports()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A sentinel that has just learnt of the replica answers NOGOODSLAVE
	// until it has talked to it.
	for {
		_, err := servers.RedisDo(ctx, set.Sentinels[0].Addr, sentinelPW, "SENTINEL", "FAILOVER", set.MasterSet)
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := set.WaitMaster(wctx, set.Primary.Addr); err != nil {
		t.Fatal(err)
	}
	// The Store follows: its writes reach the new primary.
	for {
		err := s.Set(ctx, "probe", []byte("x"), 0)
		if v, _ := set.Replica.Do(ctx, "GET", "probe"); err == nil && v == "x" {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("the Store did not follow the failover: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := set.Replica.Do(ctx, "SET", "k", "v2"); err != nil {
		t.Fatal(err)
	}
	for {
		keys, flushes := s.TrackingReports()
		if keys > keys0 || flushes > flushes0 {
			t.Logf("after a manual failover: %d key reports, %d flushes", keys-keys0, flushes-flushes0)
			break
		}
		if wctx.Err() != nil {
			t.Fatal("a key read before the failover was changed on the new primary and the L1 was never told")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicaReads: with ReadFromReplicas, reads go to the replica
// (counted there and in ConnStats.ReplicaReads), and what the docs
// promise about staleness holds while the replication link is stalled:
// this process's own invalidation is read at once (the primary serves the
// key for the window), the window over, a lagging replica serves the old
// value (the documented cost); another process's Invalidate that waited
// for the replica is never read stale.
func TestReplicaReads(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	var proxy *faults.Proxy
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, FailoverTimeout: time.Minute,
		ReplicaLink: func(primary string) (string, error) {
			proxy = servertest.Proxy(t, primary, faults.ProxyOptions{})
			return proxy.Addr(), nil
		}})
	o := sentinelOpts(set)
	o.ReadFromReplicas = redisstore.ReplicaReads{Enabled: true, PrimaryWindow: 300 * time.Millisecond}
	o.InvalidateWait = redisstore.InvalidateWait{Replicas: -1}
	reader := openSentinel(t, o)
	writer := openSentinel(t, sentinelOpts(set)) // waits for the replica
	ctx := context.Background()
	for _, k := range []string{"own", "other"} {
		if err := writer.Set(ctx, k, []byte("old"), 0); err != nil {
			t.Fatal(err)
		}
		waitReplicated(t, set, k)
	}
	gets := func() int64 {
		info, err := set.Replica.Do(ctx, "INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		return servers.CommandCalls(servers.ParseInfo(info), "get")
	}
	before := gets()
	for range 10 {
		if v, err := reader.Get(ctx, "own"); err != nil || string(v) != "old" {
			t.Fatalf("Get = %q, %v", v, err)
		}
	}
	if n := gets() - before; n < 10 {
		t.Fatalf("the replica served %d of 10 GETs", n)
	}
	if st := reader.ConnStats(); st.ReplicaReads < 10 || st.Primary != set.Primary.Addr {
		t.Fatalf("ConnStats = %+v", st)
	}

	proxy.Stall()
	if err := reader.Invalidate(ctx, []string{"own"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Get(ctx, "own"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("this process's own invalidation not read at once: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	if v, err := reader.Get(ctx, "own"); err != nil || string(v) != "old" {
		t.Logf("after the window, with the link stalled: %q, %v", v, err)
		t.Fatal("the window is over and the replica lags: the documented stale read did not happen, so this test does not exercise replica reads")
	}

	done := make(chan error, 1)
	go func() { done <- writer.Invalidate(ctx, []string{"other"}, 0) }()
	select {
	case err := <-done:
		t.Fatalf("Invalidate returned (%v) while the replica could not have the DEL", err)
	case <-time.After(200 * time.Millisecond):
	}
	proxy.Unstall()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Get(ctx, "other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another process's waited Invalidate read stale from the replica: %v", err)
	}
}

// TestSentinelTLS: sentinels and data servers that speak TLS (replication
// and the sentinels' own links too), opened from a rediss+sentinel://
// URL with the sentinels' password apart: the Store asks the sentinels
// over TLS, is named the primary's TLS port and writes there, verifying
// both certificates against the test's CA; a client that does not trust
// the CA is refused by the sentinels' certificate, and a client that
// speaks plain TCP to the sentinels' TLS ports gets no primary.
func TestSentinelTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	files, pool := servertest.SelfSigned(t)
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, SentinelPassword: sentinelPW, TLS: files})
	url := "rediss+sentinel://:" + dataPW + "@" + strings.Join(set.TLSSentinelAddrs, ",") + "/" + set.MasterSet + "?sentinel_password=" + sentinelPW
	target, err := storeurl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := target.RedisOptions()
	o.TLS.RootCAs, o.Sentinel.TLS.RootCAs = pool, pool
	s := openSentinel(t, o)
	if err := s.Set(ctx, "k", []byte("over TLS"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := set.Primary.Do(ctx, "GET", "k"); err != nil || v != "over TLS" {
		t.Fatalf("the value is not on the primary: %q, %v", v, err)
	}
	if st := s.ConnStats(); st.Primary != set.PrimaryTLS {
		t.Fatalf("the Store follows %q, want the primary's TLS port %s", st.Primary, set.PrimaryTLS)
	}
	for _, tc := range []struct {
		name string
		o    func() redisstore.Options
	}{
		{"untrusted CA", target.RedisOptions},
		{"plain TCP to the TLS sentinels", func() redisstore.Options {
			o := sentinelOpts(set)
			o.Addrs = set.TLSSentinelAddrs
			return o
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o()
			o.FailFast, o.DialTimeout = true, 2*time.Second
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			s, err := redisstore.New(cctx, o)
			if err == nil {
				s.Close()
				t.Fatal("connected")
			}
			if strings.Contains(err.Error(), dataPW) || strings.Contains(err.Error(), sentinelPW) {
				t.Fatalf("the error shows a password: %v", err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestSentinelAuthNamesTheRightPassword: the sentinels and the data
// servers take different credentials (Options.Sentinel and sentinel_user=
// / sentinel_password= for the sentinels; Options.Username/Password and
// the URL's user info for the data servers), and rueidis returns a refusal
// without saying which side sent it. Each refusal must name the setting
// that fixes it, not the other side's, match ErrAuth (and ErrSentinelAuth
// only for the sentinels), and show no password, for New and for a URL
// (storeurl.Open, the words every kura command prints).
func TestSentinelAuthNamesTheRightPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, SentinelPassword: sentinelPW})
	sa := strings.Join(set.SentinelAddrs(), ",")
	ctx := context.Background()
	const wrong = "wr0ng-pw"
	opts := func(data, sentinel string) redisstore.Options {
		return redisstore.Options{Addrs: set.SentinelAddrs(), Password: data,
			Sentinel: redisstore.Sentinel{MasterSet: set.MasterSet, Password: sentinel}}
	}
	url := func(data, sentinel string) string {
		u := "redis+sentinel://"
		if data != "" {
			u += ":" + data + "@"
		}
		u += sa + "/" + set.MasterSet
		if sentinel != "" {
			u += "?sentinel_password=" + sentinel
		}
		return u
	}
	for _, c := range []struct {
		name           string
		data, sentinel string
		bySentinel     bool
		want, wantURL  string // the fix named by New's error and by storeurl's
	}{
		{"no sentinel password", dataPW, "", true, "Options.Sentinel.Password", "sentinel_password="},
		{"wrong sentinel password", dataPW, wrong, true, "Options.Sentinel", "sentinel_password="},
		{"passwords swapped", sentinelPW, dataPW, true, "Options.Sentinel", "sentinel_password="},
		{"no data password", "", sentinelPW, false, "Options.Password", "redis+sentinel://:PASSWORD@"},
		{"wrong data password", wrong, sentinelPW, false, "Options.Username/Options.Password", "redis+sentinel://user:password@"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := opts(c.data, c.sentinel)
			o.FailFast = true
			_, errNew := redisstore.New(ctx, o)
			_, errURL := storeurl.Open(ctx, url(c.data, c.sentinel))
			for _, e := range []struct {
				err  error
				want string
			}{{errNew, c.want}, {errURL, c.wantURL}} {
				if e.err == nil {
					t.Fatal("connected with a missing or wrong password")
				}
				msg := e.err.Error()
				t.Log(msg)
				if !errors.Is(e.err, redisstore.ErrAuth) || errors.Is(e.err, redisstore.ErrSentinelAuth) != c.bySentinel {
					t.Errorf("errors.Is(ErrAuth) = %v, errors.Is(ErrSentinelAuth) = %v, want true, %v",
						errors.Is(e.err, redisstore.ErrAuth), errors.Is(e.err, redisstore.ErrSentinelAuth), c.bySentinel)
				}
				if !strings.Contains(msg, e.want) {
					t.Errorf("the error does not name %q", e.want)
				}
				// The other side's fix must not be offered as this one's.
				for _, bad := range []string{"redis://:password@host:port", "redis://:PASSWORD@", "add sentinel_password=", "add it to the URL as sentinel_password"} {
					if c.bySentinel == strings.HasPrefix(bad, "add") {
						continue
					}
					if strings.Contains(msg, bad) {
						t.Errorf("the error offers the wrong fix %q", bad)
					}
				}
				for _, pw := range []string{dataPW, sentinelPW, wrong} {
					if strings.Contains(msg, pw) {
						t.Errorf("the error shows a password")
					}
				}
			}
			// The side that refused is the one named.
			var ne *store.NodeError
			if errors.As(errNew, &ne) {
				want := set.Primary.Addr
				if c.bySentinel {
					want = set.SentinelAddrs()[0]
				}
				if ne.Addr != want {
					t.Errorf("the error names %s, want %s", ne.Addr, want)
				}
			} else {
				t.Errorf("the error names no server")
			}
		})
	}
}
