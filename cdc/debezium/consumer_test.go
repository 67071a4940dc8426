package debezium

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kuracache/kura/internal/harness/kafka"
)

// One broker for the package's tests: a JVM start costs 5-20 s on a loaded 2-core machine.
var (
	brokerOnce sync.Once
	shared     *kafka.Broker
	brokerErr  error

	// one client for the offset checks (a client per check costs a metadata round each)
	adminOnce sync.Once
	admin     *kgo.Client
	adminErr  error
)

func TestMain(m *testing.M) {
	if conf := os.Getenv(childEnv); conf != "" {
		os.Exit(child(conf)) // a `kura cdc` process the kill test kills (kill_test.go)
	}
	code := m.Run()
	if admin != nil {
		admin.Close()
	}
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

func broker(t *testing.T) *kafka.Broker {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Kafka broker (a JVM); -short skips it")
	}
	brokerOnce.Do(func() {
		shared, brokerErr = kafka.StartBroker(context.Background(), kafka.BrokerConfig{})
		if brokerErr == nil {
			t.Logf("kafka broker started in %v (mvn fresh=%v, took %v)", shared.StartTook, shared.Build.Fresh, shared.Build.Took)
		}
	})
	if brokerErr != nil {
		if errors.Is(brokerErr, kafka.ErrNotInstalled) && !kafka.Required() {
			t.Skip(brokerErr)
		}
		t.Fatal(brokerErr)
	}
	return shared
}

// produceFixtures writes the records of a fixture file to topic, in order, and returns how many.
func produceFixtures(t *testing.T, b *kafka.Broker, topic, file string) int {
	t.Helper()
	var recs []*kgo.Record
	for _, fx := range loadFixtures(t, file) {
		k, v := fx.Bytes()
		recs = append(recs, &kgo.Record{Key: k, Value: v})
	}
	produce(t, b, topic, recs...)
	return len(recs)
}

// produce writes recs to topic (created with one partition if absent), in order.
func produce(t *testing.T, b *kafka.Broker, topic string, recs ...*kgo.Record) {
	t.Helper()
	ensureTopic(t, b, topic)
	cl, err := b.Client(kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// ensureTopic creates a 1-partition topic unless it exists (franz-go does not ask the broker to
// auto-create a topic it produces to).
func ensureTopic(t *testing.T, b *kafka.Broker, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.CreateTopic(ctx, topic, 1); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
}

// committed returns the group's committed offset per partition of topic.
func committed(t *testing.T, b *kafka.Broker, group, topic string) map[int32]int64 {
	t.Helper()
	adminOnce.Do(func() { admin, adminErr = b.Client() })
	if adminErr != nil {
		t.Fatal(adminErr)
	}
	cl := admin
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var offs kadm.OffsetResponses
	for {
		// right after the broker started, the group coordinator may not be up yet
		if offs, err = kadm.NewClient(cl).FetchOffsets(ctx, group); err == nil {
			break
		}
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

func total(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func newConsumer(t *testing.T, b *kafka.Broker, group, topic string, a Applier, mod func(*Config)) *Consumer {
	t.Helper()
	cfg := Config{Brokers: []string{b.Addr}, Group: group, Topics: []string{topic}, Applier: a,
		SessionTimeout: 1500 * time.Millisecond, HeartbeatInterval: 300 * time.Millisecond,
		RebalanceTimeout: 10 * time.Second, RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond every 50 ms until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCommitOnlyAfterApply: while the Applier fails, nothing is committed and the same batch
// comes again; once it succeeds the offsets are committed. The events arrive in Kafka's order.
func TestCommitOnlyAfterApply(t *testing.T) {
	b := broker(t)
	topic, group := "commit-after-apply", "g-commit"
	n := produceFixtures(t, b, topic, "postgres15-json.jsonl")
	var calls atomic.Int32
	var mu sync.Mutex
	var applied []Event
	fails := int32(3)
	a := ApplierFunc(func(ctx context.Context, batch []Event) error {
		k := calls.Add(1)
		if k <= fails {
			if got := committed(t, b, group, topic); total(got) != 0 {
				t.Errorf("attempt %d: offsets %v committed before an Apply succeeded", k, got)
			}
			return fmt.Errorf("target down (attempt %d)", k)
		}
		mu.Lock()
		applied = append(applied, batch...)
		mu.Unlock()
		return nil
	})
	var applyErrs atomic.Int32
	c := newConsumer(t, b, group, topic, a, func(cfg *Config) {
		cfg.OnApplyError = func(error, int) { applyErrs.Add(1) }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, 60*time.Second, "all offsets committed", func() bool { return total(committed(t, b, group, topic)) == int64(n) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	c.Close()
	if applyErrs.Load() != fails {
		t.Errorf("OnApplyError called %d times, want %d", applyErrs.Load(), fails)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != n {
		t.Fatalf("applied %d events, want %d", len(applied), n)
	}
	for i := 1; i < len(applied); i++ {
		if applied[i].Partition == applied[i-1].Partition && applied[i].Offset != applied[i-1].Offset+1 {
			t.Fatalf("event %d: offset %d after %d", i, applied[i].Offset, applied[i-1].Offset)
		}
	}
	st := c.Stats()
	if st.Records != int64(n) || st.ApplyErrors != int64(fails) || st.Changes == 0 || st.LastSourceTsMs == 0 {
		t.Errorf("stats %+v", st)
	}
}

// crashScenario: consumer A takes a batch and dies inside Apply (its context ends, its client
// closes without a commit); consumer B of the same group must then get every record again. With
// the commitBeforeApply fault A's commit precedes its Apply, and B never sees the batch: the
// invalidations A never made are lost. It returns how many produced records no Apply ever
// completed.
func crashScenario(t *testing.T, fault bool) int {
	b := broker(t)
	topic := fmt.Sprintf("crash-%v", fault)
	group := "g-" + topic
	n := produceFixtures(t, b, topic, "postgres15-json.jsonl")
	var mu sync.Mutex
	done := map[int64]bool{} // offsets whose Apply completed
	entered := make(chan struct{}, 1)
	dying := ApplierFunc(func(ctx context.Context, batch []Event) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done() // the process dies mid-Apply
		return ctx.Err()
	})
	a := newConsumer(t, b, group, topic, dying, func(cfg *Config) { cfg.commitBeforeApply = fault })
	actx, acancel := context.WithCancel(context.Background())
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(actx) }()
	select {
	case <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("consumer A got no batch")
	}
	if fault {
		waitFor(t, 10*time.Second, "A's early commit", func() bool { return total(committed(t, b, group, topic)) > 0 })
	}
	acancel()
	<-aDone
	a.Close()

	live := ApplierFunc(func(ctx context.Context, batch []Event) error {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range batch {
			done[e.Offset] = true
		}
		return nil
	})
	bc := newConsumer(t, b, group, topic, live, nil)
	bctx, bcancel := context.WithCancel(context.Background())
	bDone := make(chan error, 1)
	go func() { bDone <- bc.Run(bctx) }()
	waitFor(t, 60*time.Second, "B committed to the end", func() bool { return total(committed(t, b, group, topic)) == int64(n) })
	bcancel()
	<-bDone
	bc.Close()
	mu.Lock()
	defer mu.Unlock()
	missing := 0
	for off := int64(0); off < int64(n); off++ {
		if !done[off] {
			missing++
		}
	}
	return missing
}

func TestCrashInApplyRedelivers(t *testing.T) {
	if missing := crashScenario(t, false); missing != 0 {
		t.Fatalf("%d records were never applied after a consumer died mid-Apply", missing)
	}
}

// TestCheckerCatchesCommitBeforeApply is the injected fault: an offset committed before its
// invalidation landed loses invalidations, and the crash check sees it.
func TestCheckerCatchesCommitBeforeApply(t *testing.T) {
	if missing := crashScenario(t, true); missing == 0 {
		t.Fatal("with offsets committed before Apply, the crash check found nothing missing")
	}
}

// TestRebalance: two consumers share a 4-partition topic; when one leaves, the other takes its
// partitions and applies everything produced after.
func TestRebalance(t *testing.T) {
	b := broker(t)
	topic, group := "rebalance", "g-rebalance"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.CreateTopic(ctx, topic, 4); err != nil {
		t.Fatal(err)
	}
	type owner struct {
		mu    sync.Mutex
		parts map[int32]bool
		keys  map[string]bool
	}
	mk := func() (*owner, Applier) {
		o := &owner{parts: map[int32]bool{}, keys: map[string]bool{}}
		return o, ApplierFunc(func(ctx context.Context, batch []Event) error {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, e := range batch {
				o.parts[e.Partition] = true
				id, _ := e.Key.Text("id")
				o.keys[id] = true
			}
			return nil
		})
	}
	oa, aa := mk()
	ob, ab := mk()
	ca := newConsumer(t, b, group, topic, aa, nil)
	cb := newConsumer(t, b, group, topic, ab, nil)
	actx, acancel := context.WithCancel(ctx)
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- ca.Run(actx) }()
	go func() { bDone <- cb.Run(bctx) }()
	rec := func(id int) *kgo.Record {
		return &kgo.Record{Key: []byte(fmt.Sprintf(`{"id":%d}`, id)),
			Value: []byte(fmt.Sprintf(`{"op":"u","before":{"id":%d},"after":{"id":%d},"source":{"connector":"postgresql","table":"t","ts_ms":1}}`, id, id))}
	}
	next := 0
	batch := func(k int) {
		var rs []*kgo.Record
		for i := 0; i < k; i++ {
			rs = append(rs, rec(next))
			next++
		}
		produce(t, b, topic, rs...)
	}
	parts := func(o *owner) int { o.mu.Lock(); defer o.mu.Unlock(); return len(o.parts) }
	waitFor(t, 60*time.Second, "both consumers own partitions", func() bool {
		batch(20)
		return parts(oa) > 0 && parts(ob) > 0
	})
	if pa, pb := parts(oa), parts(ob); pa+pb != 4 {
		t.Logf("partitions seen: A %d, B %d", pa, pb)
	}
	acancel()
	<-aDone
	ca.Close() // A leaves; its partitions move to B
	start := next
	batch(40)
	waitFor(t, 60*time.Second, "B applied everything produced after A left", func() bool {
		ob.mu.Lock()
		defer ob.mu.Unlock()
		for id := start; id < next; id++ {
			if !ob.keys[fmt.Sprint(id)] {
				return false
			}
		}
		return true
	})
	if parts(ob) != 4 {
		t.Errorf("B owns %d partitions after A left, want 4", parts(ob))
	}
	bcancel()
	<-bDone
	cb.Close()
}

// TestBadRecord: an undecodable record stops the consumer with an error naming its place, and
// nothing at or after it is committed; with OnBadRecord returning nil it is skipped.
func TestBadRecord(t *testing.T) {
	b := broker(t)
	topic := "bad-record"
	produce(t, b, topic,
		&kgo.Record{Key: []byte(`{"id":1}`), Value: []byte(`{"op":"c","after":{"id":1},"source":{"table":"t"}}`)},
		&kgo.Record{Key: []byte(`{"id":2}`), Value: []byte(`{"op":"c","after":{"id":`)},
		&kgo.Record{Key: []byte(`{"id":3}`), Value: []byte(`{"op":"c","after":{"id":3},"source":{"table":"t"}}`)})
	ok := ApplierFunc(func(context.Context, []Event) error { return nil })
	c := newConsumer(t, b, "g-bad-stop", topic, ok, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.Run(ctx)
	c.Close()
	if !errors.Is(err, ErrBadRecord) || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "bad-record/0 at offset 1") {
		t.Fatalf("Run: %v", err)
	}
	if got := committed(t, b, "g-bad-stop", topic); got[0] > 1 {
		t.Fatalf("committed %v past the bad record", got)
	}

	var skipped atomic.Int32
	c = newConsumer(t, b, "g-bad-skip", topic, ok, func(cfg *Config) {
		cfg.OnBadRecord = func(r *kgo.Record, err error) error { skipped.Add(1); return nil }
	})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	waitFor(t, 60*time.Second, "skip-group committed to the end", func() bool { return committed(t, b, "g-bad-skip", topic)[0] == 3 })
	rcancel()
	<-done
	c.Close()
	if skipped.Load() != 1 || c.Stats().BadRecords != 1 {
		t.Fatalf("skipped %d, stats %+v", skipped.Load(), c.Stats())
	}
}

// TestApplierPanic: a panicking Applier stops the consumer with ErrApplierPanicked, and the batch
// is not committed.
func TestApplierPanic(t *testing.T) {
	b := broker(t)
	topic, group := "applier-panic", "g-panic"
	produceFixtures(t, b, topic, "postgres15-json.jsonl")
	c := newConsumer(t, b, group, topic, ApplierFunc(func(context.Context, []Event) error { panic("boom") }), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.Run(ctx)
	c.Close()
	if !errors.Is(err, ErrApplierPanicked) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Run: %v", err)
	}
	if got := committed(t, b, group, topic); total(got) != 0 {
		t.Fatalf("committed %v after a panic", got)
	}
}

func TestConfigErrors(t *testing.T) {
	a := ApplierFunc(func(context.Context, []Event) error { return nil })
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Group: "g", Topics: []string{"t"}, Applier: a}, "Brokers"},
		{Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Applier: a}, "Group"},
		{Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Applier: a}, "Topics"},
		{Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}}, "Applier"},
		{Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, Applier: a, SessionTimeout: time.Second, HeartbeatInterval: time.Second}, "HeartbeatInterval"},
		{Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, Applier: a, MaxBatch: -1}, "negative"},
	} {
		if _, err := NewConsumer(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want it to name %s", c.cfg, err, c.want)
		}
	}
}
