package debezium

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrBadRecord reports a record that Decode refused and that Config.OnBadRecord did not let
// through: the consumer stops before it, and commits nothing at or after it.
var ErrBadRecord = errors.New("debezium: undecodable record")

// ErrApplierPanicked reports that the Applier panicked: the consumer stops and commits nothing of
// the batch it was given.
var ErrApplierPanicked = errors.New("debezium: applier panicked")

// Event is one decoded record with its place in Kafka.
type Event struct {
	Message
	Topic     string
	Partition int32
	Offset    int64
	// Timestamp is the Kafka record's timestamp (when the engine produced it).
	Timestamp time.Time
}

// Applier makes a batch's invalidations land. The PostgreSQL change stream's row-to-key
// mapping and targets plug in here, so both sources share them.
type Applier interface {
	// Apply invalidates, on every target, what the batch's change events changed, and returns
	// nil only once all of it has landed: the consumer commits the batch's offsets after that,
	// and never before. The batch holds every record of one poll in Kafka's order per partition
	// (tombstones, transaction and heartbeat records included, for an Applier that wants them).
	//
	// An error makes the consumer call Apply again with the same batch, after a backoff, until it
	// succeeds or the consumer's context ends; invalidation is idempotent, so an Applier may see a
	// batch, or part of one, more than once (at-least-once), also after a crash or a rebalance.
	Apply(ctx context.Context, batch []Event) error
}

// ApplierFunc adapts a function to Applier.
type ApplierFunc func(ctx context.Context, batch []Event) error

// Apply calls f.
func (f ApplierFunc) Apply(ctx context.Context, batch []Event) error { return f(ctx, batch) }

// Config configures a Consumer.
type Config struct {
	// Brokers are the seed brokers' host:port.
	Brokers []string
	// Group is the consumer group: every consumer of a group shares the topics' partitions; each
	// cache fleet (or region) that needs every invalidation is a group of its own.
	Group string
	// Topics are the topics to consume; with TopicRegex they are regular expressions
	// ("^kura\\.public\\..*").
	Topics     []string
	TopicRegex bool
	// Applier receives the batches. Required.
	Applier Applier
	// SessionTimeout is how long the group waits for a consumer that stopped heartbeating before
	// its partitions move to the others (Kafka's session.timeout.ms; 0 means 10 s; the broker
	// must allow it through group.min.session.timeout.ms).
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the consumer heartbeats (0 means SessionTimeout/3).
	HeartbeatInterval time.Duration
	// RebalanceTimeout bounds how long a rebalance waits for a member to finish the batch it is
	// applying (0 means 60 s). An Apply that takes longer loses its partitions; its offsets are
	// then not committed and the next owner applies the batch again.
	RebalanceTimeout time.Duration
	// MaxBatch caps the records of one batch (0 means 10,000).
	MaxBatch int
	// RetryBackoff is the first pause after a failed Apply; it doubles up to MaxRetryBackoff
	// (0 means 50 ms and 5 s).
	RetryBackoff, MaxRetryBackoff time.Duration
	// OnBadRecord decides about a record Decode refused. nil stops the consumer with an error
	// wrapping ErrBadRecord (nothing at or after the record is committed); a function that
	// returns nil lets the consumer skip the record (after, say, writing it to a dead-letter
	// topic), one that returns an error stops it with that error.
	OnBadRecord func(rec *kgo.Record, err error) error
	// OnApplyError is told of each failed Apply before the retry (for logs and metrics). It must
	// not block.
	OnApplyError func(err error, attempt int)
	// ClientOptions are extra franz-go options (TLS, SASL, client id), applied last.
	ClientOptions []kgo.Opt
	// CheckBeforeImage is for a Source (NewSource): when set, Stream runs it before joining the
	// group, each time it starts. It returns nil only if the database Debezium reads logs the
	// old values of every column the mapping reads (the before image the old/new index-value
	// rule needs); an error matching cdc.ErrFatal stops cdc.Run, any other is retried.
	// PostgresBeforeImage builds the check for PostgreSQL. nil checks nothing: then the tables
	// that map to index keys must be REPLICA IDENTITY FULL (PostgreSQL) or the server
	// binlog_row_image=FULL (MySQL) by the operator's care.
	CheckBeforeImage func(ctx context.Context) error

	// commitBeforeApply is a fault for the tests: commit a batch's offsets before Apply, then
	// wait faultPause before applying it.
	commitBeforeApply bool
	faultPause        time.Duration
	// onCommitted, for the tests, is told of each batch of records whose offsets were
	// committed, once the commit returned.
	onCommitted func(recs []*kgo.Record)
}

// Stats are a Consumer's counters. The zero value is an idle consumer.
type Stats struct {
	// Records and Batches applied (and committed).
	Records, Batches int64
	// Changes counts change events among Records; BadRecords the records skipped through
	// OnBadRecord.
	Changes, BadRecords int64
	// ApplyErrors counts failed Apply calls.
	ApplyErrors int64
	// FetchErrors counts fetch errors the client reported (it retries them).
	FetchErrors int64
	// CommitErrors counts failed offset commits (the batch was applied; it is applied again by
	// whoever reads it next).
	CommitErrors int64
	// Lag is, per "topic/partition", how many records the last fetch said were behind the
	// consumer's position (the high watermark minus the next offset).
	Lag map[string]int64
	// LastCommitTime is when the consumer last committed; LastSourceTsMs is the database commit
	// time (the source block's ts_ms) of the newest change it applied.
	LastCommitTime time.Time
	LastSourceTsMs int64
}

// Consumer reads Debezium's topics in a consumer group and commits offsets only after its
// Applier said the events' invalidations landed (at-least-once). Partitions are spread over the
// group's consumers by Kafka; a dead consumer's partitions move to the others after
// Config.SessionTimeout; per key (Debezium keys events by primary key) the order is Kafka's.
type Consumer struct {
	cfg Config
	cl  *kgo.Client

	mu    sync.Mutex
	stats Stats
}

// NewConsumer checks the config and creates the Kafka client (it connects lazily).
func NewConsumer(cfg Config) (*Consumer, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("debezium: Config.Brokers is empty")
	case cfg.Group == "":
		return nil, errors.New("debezium: Config.Group is empty: the consumer commits its offsets in a group")
	case len(cfg.Topics) == 0:
		return nil, errors.New("debezium: Config.Topics is empty")
	case cfg.Applier == nil:
		return nil, errors.New("debezium: Config.Applier is nil")
	case cfg.SessionTimeout < 0 || cfg.HeartbeatInterval < 0 || cfg.RebalanceTimeout < 0 || cfg.MaxBatch < 0:
		return nil, errors.New("debezium: a negative timeout or batch size in Config")
	}
	if err := CheckBrokers(cfg.Brokers); err != nil {
		return nil, err
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = cfg.SessionTimeout / 3
	}
	if cfg.HeartbeatInterval >= cfg.SessionTimeout {
		return nil, fmt.Errorf("debezium: HeartbeatInterval %v is not below SessionTimeout %v", cfg.HeartbeatInterval, cfg.SessionTimeout)
	}
	if cfg.RebalanceTimeout == 0 {
		cfg.RebalanceTimeout = 60 * time.Second
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 10_000
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 50 * time.Millisecond
	}
	if cfg.MaxRetryBackoff <= 0 {
		cfg.MaxRetryBackoff = 5 * time.Second
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.DisableAutoCommit(),
		// no revocation while a batch is being applied and committed: a rebalance waits for
		// AllowRebalance, so a partition never moves between Apply and its commit
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.HeartbeatInterval),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if cfg.TopicRegex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	opts = append(opts, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("debezium: kafka client: %w", err)
	}
	return &Consumer{cfg: cfg, cl: cl, stats: Stats{Lag: map[string]int64{}}}, nil
}

// CheckBrokers checks that each broker is a host or host:port, the form
// Kafka's seed brokers take. A broker written as a URL or with user
// information ("user:password@host:9092", "SASL_SSL://...") is refused
// without being shown: the Kafka client would take it whole for a host
// name, and its lookup errors would quote it in the status line. Kafka's
// credentials go in Config.ClientOptions (SASL), never in an address.
func CheckBrokers(brokers []string) error {
	for i, b := range brokers {
		if err := checkBroker(b); err != nil {
			return fmt.Errorf("debezium: broker %d of %d %s (not shown: it may hold a password); write host:port, such as 127.0.0.1:9092", i+1, len(brokers), err)
		}
	}
	return nil
}

func checkBroker(b string) error {
	if b == "" {
		return errors.New("is empty")
	}
	if strings.ContainsAny(b, "@/?#") || strings.IndexFunc(b, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return errors.New("is not host:port (it holds a URL's or user information's characters, or a space)")
	}
	if !strings.Contains(b, ":") {
		return nil // a host alone: the client adds the default port
	}
	host, port, err := net.SplitHostPort(b)
	if err != nil || host == "" {
		return errors.New("is not host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("has a port that is not a number from 1 to 65535")
	}
	return nil
}

// Stats returns a copy of the consumer's counters.
func (c *Consumer) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Lag = make(map[string]int64, len(c.stats.Lag))
	for k, v := range c.stats.Lag {
		s.Lag[k] = v
	}
	return s
}

// Close leaves the group (its partitions move to the other consumers at once) and closes the
// client. Offsets of a batch not yet applied are not committed. Call it after Run returned.
func (c *Consumer) Close() { c.cl.Close() }

// Run consumes until ctx ends (it then returns ctx's error) or a record cannot be decoded or the
// Applier panics. Each poll's records are decoded, applied, and only then committed.
func (c *Consumer) Run(ctx context.Context) error {
	for {
		fs := c.cl.PollRecords(ctx, c.cfg.MaxBatch)
		if err := ctx.Err(); err != nil {
			c.cl.AllowRebalance()
			return err
		}
		if fs.IsClientClosed() {
			return errors.New("debezium: kafka client closed")
		}
		// Fetch errors are retried by the client (a broker restarting, a leader moving): they
		// are counted, not fatal.
		fs.EachError(func(string, int32, error) {
			c.mu.Lock()
			c.stats.FetchErrors++
			c.mu.Unlock()
		})
		c.noteLag(fs)
		batch, recs, err := c.decode(fs)
		if err != nil {
			c.cl.AllowRebalance()
			return err
		}
		if len(recs) == 0 {
			c.cl.AllowRebalance()
			continue
		}
		if err := c.applyAndCommit(ctx, batch, recs); err != nil {
			c.cl.AllowRebalance()
			return err
		}
		c.cl.AllowRebalance()
	}
}

// decode turns the fetches into events; recs are the records whose offsets the batch commits
// (skipped bad records included).
func (c *Consumer) decode(fs kgo.Fetches) ([]Event, []*kgo.Record, error) {
	var batch []Event
	var recs []*kgo.Record
	var stop error
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		for _, r := range p.Records {
			if stop != nil {
				return
			}
			m, err := Decode(r.Key, r.Value)
			if err != nil {
				if c.cfg.OnBadRecord == nil {
					stop = fmt.Errorf("%w: %s/%d at offset %d: %w", ErrBadRecord, r.Topic, r.Partition, r.Offset, err)
					return
				}
				if herr := c.cfg.OnBadRecord(r, err); herr != nil {
					stop = herr
					return
				}
				c.mu.Lock()
				c.stats.BadRecords++
				c.mu.Unlock()
				recs = append(recs, r)
				continue
			}
			batch = append(batch, Event{Message: m, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp})
			recs = append(recs, r)
		}
	})
	if stop != nil {
		// Records before the bad one in its partition were not applied either: nothing of this
		// poll is committed, and the next Run starts again at the last commit.
		return nil, nil, stop
	}
	return batch, recs, nil
}

func (c *Consumer) applyAndCommit(ctx context.Context, batch []Event, recs []*kgo.Record) error {
	if c.cfg.commitBeforeApply {
		if err := c.cl.CommitRecords(ctx, recs...); err != nil {
			c.countCommitError()
		} else if c.cfg.onCommitted != nil {
			c.cfg.onCommitted(recs)
		}
		time.Sleep(c.cfg.faultPause)
	}
	backoff := c.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := c.apply(ctx, batch)
		if err == nil {
			break
		}
		if errors.Is(err, ErrApplierPanicked) {
			return err
		}
		c.mu.Lock()
		c.stats.ApplyErrors++
		c.mu.Unlock()
		if c.cfg.OnApplyError != nil {
			c.cfg.OnApplyError(err, attempt)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, c.cfg.MaxRetryBackoff)
	}
	var lastTs int64
	changes := int64(0)
	for _, e := range batch {
		if e.Kind == KindChange {
			changes++
			lastTs = max(lastTs, e.Change.Source.TsMs)
		}
	}
	commitErr := c.cl.CommitRecords(ctx, recs...)
	c.mu.Lock()
	c.stats.Records += int64(len(recs))
	c.stats.Batches++
	c.stats.Changes += changes
	c.stats.LastSourceTsMs = max(c.stats.LastSourceTsMs, lastTs)
	if commitErr != nil {
		// Applied but not committed: whoever reads these records next applies them again
		// (at-least-once). Not fatal: a rebalance or a broker restart makes commits fail.
		c.stats.CommitErrors++
	} else {
		c.stats.LastCommitTime = time.Now()
	}
	c.mu.Unlock()
	if commitErr == nil && c.cfg.onCommitted != nil {
		c.cfg.onCommitted(recs)
	}
	return nil
}

// apply calls the Applier, turning a panic into an error.
func (c *Consumer) apply(ctx context.Context, batch []Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrApplierPanicked, p, debug.Stack())
		}
	}()
	return c.cfg.Applier.Apply(ctx, batch)
}

func (c *Consumer) countCommitError() {
	c.mu.Lock()
	c.stats.CommitErrors++
	c.mu.Unlock()
}

func (c *Consumer) noteLag(fs kgo.Fetches) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.HighWatermark < 0 {
			return
		}
		next := int64(-1)
		if n := len(p.Records); n > 0 {
			next = p.Records[n-1].Offset + 1
		}
		if next < 0 {
			return
		}
		c.stats.Lag[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = max(0, p.HighWatermark-next)
	})
}
