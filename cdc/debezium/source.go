package debezium

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kuracache/kura/cdc"
)

// KafkaSource is Debezium-on-Kafka as a [cdc.Source]: the same mapping and delivery as the
// PostgreSQL source (cdc.Run) read Debezium's change events from a consumer group. Each poll
// of the group is one transaction for cdc (its changes are invalidated together), and the
// poll's offsets are committed to Kafka only after cdc confirmed its position, that is after
// every invalidation of it landed on every target (at-least-once).
//
// The old index value comes from Debezium's before image: give the tables that map to index
// keys PostgreSQL's REPLICA IDENTITY FULL (or MySQL's binlog_row_image=FULL); the source cannot
// check it. A null in a before image is taken as unknown (Debezium writes null for a column it
// was not sent), so a DELETE without the old index value invalidates its table whole.
type KafkaSource struct {
	cfg Config

	mu        sync.Mutex
	seq       int64 // positions handed out
	confirmed int64 // highest position confirmed
	notify    chan struct{}
	last      string // the last confirmed position's text
	consumer  *Consumer
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
	c, err := NewConsumer(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", cdc.ErrFatal, err)
	}
	defer c.Close()
	s.mu.Lock()
	s.consumer = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.consumer = nil
		s.mu.Unlock()
	}()
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

// Backlog implements cdc.Source. Kafka keeps its log by retention, not per consumer, so
// RetainedBytes is 0; Head is the records the last fetch said were behind, summed over
// partitions.
func (s *KafkaSource) Backlog(context.Context) (cdc.Backlog, error) {
	s.mu.Lock()
	c, last := s.consumer, s.last
	s.mu.Unlock()
	b := cdc.Backlog{Confirmed: last}
	if c != nil {
		var lag int64
		for _, n := range c.Stats().Lag {
			lag += n
		}
		b.Head = fmt.Sprintf("%d records behind", lag)
	}
	return b, nil
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
		c.Old, c.New = rowOf(ch.Before, true), rowOf(ch.After, false)
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

// rowOf converts a Debezium row image; in a before image a null is unknown.
func rowOf(r Row, before bool) cdc.Row {
	if r == nil {
		return nil
	}
	out := make(cdc.Row, len(r))
	for name := range r {
		col := r.Column(name)
		v := cdc.Value{Text: col.Text, Null: col.Null, Unknown: col.Unknown}
		if before && v.Null {
			v = cdc.Value{Unknown: true}
		}
		out[name] = v
	}
	return out
}

func posText(last map[string]int64) string {
	parts := make([]string, 0, len(last))
	for tp, off := range last {
		parts = append(parts, fmt.Sprintf("%s@%d", tp, off))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Close implements io.Closer; the group is left when Stream returns, so there is nothing to
// release.
func (s *KafkaSource) Close() error { return nil }
