package debezium

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/pgsource"
)

// KafkaSource is Debezium-on-Kafka as a [cdc.Source]: the same mapping and delivery as the
// PostgreSQL source (cdc.Run) read Debezium's change events from a consumer group. Each poll
// of the group is one transaction for cdc (its changes are invalidated together), and the
// poll's offsets are committed to Kafka only after cdc confirmed its position, that is after
// every invalidation of it landed on every target (at-least-once).
//
// The old index value comes from Debezium's before image: give the tables that map to index
// keys PostgreSQL's REPLICA IDENTITY FULL (or MySQL's binlog_row_image=FULL). With
// Config.CheckBeforeImage set (PostgresBeforeImage) the source checks it when it starts and
// refuses to stream otherwise, naming the ALTER TABLE that fixes it. Without that check, a null
// or missing column in a before image is taken as unknown (Debezium writes null for a column
// the database did not send), and only the record key's columns are known: an UPDATE or DELETE
// whose rules read another column invalidates its table whole (safe, and costly: set
// CheckBeforeImage, `database.url` in `kura cdc`'s config).
//
// Caught up, for this source, is the consumer group's lag at 0 (every record of the group's
// partitions committed, so applied) with nothing received left to apply: Backlog reports the
// group's lag in Backlog.LagRecords, which cdc's status line and kura_cdc_lag_records show.
// Caught up to a moment (every event on Kafka before it applied, as `kura cdc
// --until-caught-up` waits for) is a Mark taken then and Reached by the group's commits.
type KafkaSource struct {
	cfg Config

	mu        sync.Mutex
	seq       int64 // positions handed out
	confirmed int64 // highest position confirmed
	notify    chan struct{}
	last      string      // the last confirmed position's text
	adminCl   *kgo.Client // for Backlog's lag and Mark, created at first use (admin)
}

// NewSource checks cfg (as NewConsumer does; cfg.Applier must be nil: the source is the
// Applier) and returns the source. It connects when cdc.Run streams it.
func NewSource(cfg Config) (*KafkaSource, error) {
	if cfg.Applier != nil {
		return nil, errors.New("debezium: Config.Applier must be nil for a Source: cdc.Run applies the events")
	}
	probe := cfg
	probe.Applier = ApplierFunc(func(context.Context, []Event) error { return nil })
	c, err := NewConsumer(probe)
	if err != nil {
		return nil, err
	}
	c.Close()
	return &KafkaSource{cfg: cfg, notify: make(chan struct{})}, nil
}

// position is a poll's place: its sequence number and its last offset per partition.
type position struct {
	seq     int64
	text    string
	offsets map[string]int64 // "topic/partition" -> the poll's last offset there
}

func (p *position) String() string { return p.text }

// Stream implements cdc.Source: it joins the group and hands each poll to h.
func (s *KafkaSource) Stream(ctx context.Context, h cdc.Handler) error {
	cfg := s.cfg
	cfg.Applier = &sourceApplier{s: s, h: h}
	if cfg.CheckBeforeImage != nil {
		if err := cfg.CheckBeforeImage(ctx); err != nil {
			return fmt.Errorf("debezium: checking the before image: %w", err)
		}
	}
	c, err := NewConsumer(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", cdc.ErrFatal, err)
	}
	defer c.Close()
	err = c.Run(ctx)
	if errors.Is(err, ErrBadRecord) {
		return fmt.Errorf("%w: %w", cdc.ErrFatal, err)
	}
	return err
}

// Confirm implements cdc.Source: it releases the poll waiting for pos (and every earlier one),
// whose offsets the consumer then commits.
func (s *KafkaSource) Confirm(pos cdc.Position) {
	p, ok := pos.(*position)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.seq <= s.confirmed {
		return
	}
	s.confirmed, s.last = p.seq, p.text
	close(s.notify)
	s.notify = make(chan struct{})
}

// Backlog implements cdc.Source: the consumer group's lag (records of its partitions after its
// committed offsets, over every member, so the whole cache fleet's) as LagRecords and in Head.
// Kafka keeps its log by retention, not per consumer, so RetainedBytes is 0.
func (s *KafkaSource) Backlog(ctx context.Context) (cdc.Backlog, error) {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	adm, err := s.admin()
	if err != nil {
		return cdc.Backlog{Confirmed: last, LagRecords: -1, Head: "no Kafka client for the lag: " + err.Error()}, nil
	}
	n, err := groupLag(ctx, adm, s.cfg)
	if err != nil {
		// Not an error for cdc: the lag is unknown, so the status must not say caught up.
		return cdc.Backlog{Confirmed: last, LagRecords: -1, Head: "the group's lag could not be read: " + err.Error()}, nil
	}
	return cdc.Backlog{Confirmed: last, LagRecords: n, Head: fmt.Sprintf("%d records behind", n)}, nil
}

// groupLag sums the group's lag over its partitions. A group the broker does not know yet (it
// never joined nor committed) lags by every record of its topics.
func groupLag(ctx context.Context, adm *kadm.Client, cfg Config) (int64, error) {
	lags, err := adm.Lag(ctx, cfg.Group)
	if err == nil {
		err = lags.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) && !cfg.TopicRegex {
		start, err := adm.ListStartOffsets(ctx, cfg.Topics...)
		if err != nil {
			return 0, err
		}
		end, err := adm.ListEndOffsets(ctx, cfg.Topics...)
		if err != nil {
			return 0, err
		}
		var n int64
		var perr error
		end.Each(func(o kadm.ListedOffset) {
			s, ok := start.Lookup(o.Topic, o.Partition)
			switch {
			case o.Err != nil:
				perr = o.Err
			case !ok || s.Err != nil:
				perr = fmt.Errorf("no start offset for %s/%d", o.Topic, o.Partition)
			default:
				n += o.Offset - s.Offset
			}
		})
		return n, perr
	}
	if err != nil {
		return 0, err
	}
	var n int64
	for _, ps := range lags[cfg.Group].Lag {
		for _, p := range ps {
			if p.Err != nil {
				return 0, fmt.Errorf("%s/%d: %w", p.Topic, p.Partition, p.Err)
			}
			n += p.Lag
		}
	}
	return n, nil
}

// wait blocks until seq is confirmed or ctx ends.
func (s *KafkaSource) wait(ctx context.Context, seq int64) error {
	for {
		s.mu.Lock()
		done, ch := s.confirmed >= seq, s.notify
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type sourceApplier struct {
	s *KafkaSource
	h cdc.Handler
}

// Apply hands the batch to cdc as one transaction and returns once cdc confirmed it.
func (a *sourceApplier) Apply(ctx context.Context, batch []Event) error {
	var (
		changed bool
		at      int64
		c       cdc.Change
		last    = map[string]int64{}
		checked = a.s.cfg.CheckBeforeImage != nil // Stream ran it: the identity carries every column read
	)
	for i := range batch {
		e := &batch[i]
		last[fmt.Sprintf("%s/%d", e.Topic, e.Partition)] = e.Offset
		if e.Kind != KindChange {
			continue
		}
		ch := e.Change
		table := ch.Source.QualifiedTable()
		at = max(at, ch.Source.TsMs)
		switch ch.Op {
		case OpTruncate:
			changed = true
			if err := a.h.Truncate([]string{table}); err != nil {
				return err
			}
			continue
		case OpCreate, OpRead:
			c = cdc.Change{Table: table, Op: cdc.Insert}
		case OpUpdate:
			c = cdc.Change{Table: table, Op: cdc.Update}
		case OpDelete:
			c = cdc.Change{Table: table, Op: cdc.Delete}
		default:
			continue // a logical decoding message: no row
		}
		c.Old, c.New = rowOf(ch.Before, !checked), rowOf(ch.After, false)
		if !checked && c.Op != cdc.Insert {
			// Without a checked replica identity, a null or a missing
			// column in the before image may be one the database did not
			// send: only the record key's columns (the row's identity:
			// Debezium turns a key change into a DELETE and a CREATE)
			// are known; a rule reading another one invalidates the table.
			c.Old = withKey(c.Old, e.Key)
			c.OldPartial = true
		}
		changed = true
		if err := a.h.Change(&c); err != nil {
			return err
		}
	}
	a.s.mu.Lock()
	a.s.seq++
	pos := &position{seq: a.s.seq, text: posText(last), offsets: last}
	a.s.mu.Unlock()
	var err error
	if changed {
		t := time.Now()
		if at > 0 {
			t = time.UnixMilli(at)
		}
		err = a.h.Commit(pos, t)
	} else {
		err = a.h.Idle(pos)
	}
	if err != nil {
		return err
	}
	return a.s.wait(ctx, pos.seq)
}

// rowOf converts a Debezium row image; with nullUnknown (a before image
// whose replica identity was not checked) a null is unknown: Debezium
// writes null for a column the database did not send.
func rowOf(r Row, nullUnknown bool) cdc.Row {
	if r == nil {
		return nil
	}
	out := make(cdc.Row, len(r))
	for name := range r {
		col := r.Column(name)
		v := cdc.Value{Text: col.Text, Null: col.Null, Unknown: col.Unknown}
		if nullUnknown && v.Null {
			v = cdc.Value{Unknown: true}
		}
		out[name] = v
	}
	return out
}

// withKey fills the old image's unknown or missing columns from the record
// key's, which name the row before and after the event.
func withKey(old cdc.Row, key Row) cdc.Row {
	for name := range key {
		col := key.Column(name)
		if col.Unknown || col.Null {
			continue
		}
		if v, ok := old[name]; ok && !v.Unknown {
			continue
		}
		if old == nil {
			old = make(cdc.Row, len(key))
		}
		old[name] = cdc.Value{Text: col.Text}
	}
	return old
}

func posText(last map[string]int64) string {
	parts := make([]string, 0, len(last))
	for tp, off := range last {
		parts = append(parts, fmt.Sprintf("%s@%d", tp, off))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Close implements io.Closer: it closes the client Backlog and Mark keep (the group is left when
// Stream returns).
func (s *KafkaSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.adminCl != nil {
		s.adminCl.Close()
		s.adminCl = nil
	}
	return nil
}

// PostgresBeforeImage is a Config.CheckBeforeImage for Debezium's PostgreSQL connector: it
// connects as opts say (ConnString, Password, Mapping) and checks that every mapped table's
// replica identity carries the columns the mapping reads (pgsource.CheckReplicaIdentity).
func PostgresBeforeImage(opts pgsource.Options) func(context.Context) error {
	return func(ctx context.Context) error { return pgsource.CheckReplicaIdentity(ctx, opts) }
}
