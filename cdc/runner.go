package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Options configure Run. Source, Mapping and at least one Target are
// required; the zero value of every other field is a sane default.
type Options struct {
	Source  Source
	Mapping *Mapping
	Targets []Target

	// MaxTxnKeys bounds the keys one transaction may invalidate per
	// table. Past it, the transaction's invalidation of that table
	// becomes table-wide (every key under its rules' prefixes), so a
	// transaction touching millions of rows costs bounded memory. If
	// zero, 10,000.
	MaxTxnKeys int
	// MaxBatchKeys bounds how many keys several transactions coalesce
	// into when the stream is behind: one round trip per server carries
	// up to this many. If zero, 5,000.
	MaxBatchKeys int
	// MaxRetainedBytes is the ceiling on the log the upstream retains
	// for this consumer (PostgreSQL: WAL held by the slot). Past it, Run
	// fails with ErrRetainedCeiling instead of filling the database's
	// disk. If zero, no ceiling.
	MaxRetainedBytes int64
	// MaxPendingKeys bounds the keys received and not yet applied, all
	// transactions together: past it, the stream waits for delivery. It
	// bounds memory while letting many small transactions coalesce into
	// one batch when a target is slower than the stream. If zero,
	// 100,000.
	MaxPendingKeys int
	// BacklogEvery is how often the upstream's backlog is read for the
	// metrics and the ceiling. If zero, 1 s.
	BacklogEvery time.Duration

	// Metrics, when set, is updated as cdc runs (see NewMetrics).
	Metrics *Metrics
	// OnApplied, when set, is called after each batch's invalidations
	// landed on every target and before its position is confirmed. It
	// must not block for long.
	OnApplied func(Applied)
	// Logger receives failures and state changes (never a cached value
	// nor a password). If nil, slog.Default().
	Logger *slog.Logger

	faults faults
}

// faults are the failures tests inject to prove their checkers catch a
// broken delivery (set through export_test.go).
type faults struct {
	// dropEvery, when positive, skips the invalidations of every n-th
	// batch while still confirming and reporting it.
	dropEvery int
	// reportEarly reports and confirms a batch before its invalidations
	// are sent, then waits this long before sending them.
	reportEarly time.Duration
}

// Applied reports one batch of transactions whose invalidations landed on
// every target.
type Applied struct {
	// Pos is the last position of the batch (nil for a batch that only
	// invalidated after a Reset).
	Pos Position
	// Txns is how many transactions the batch carried (coalesced when
	// the stream was behind).
	Txns int
	// Keys is how many keys it invalidated; Tables lists the tables
	// invalidated whole (TRUNCATE, over MaxTxnKeys, Reset).
	Keys   int
	Tables []string
	// Commit is the commit time of the batch's last transaction, First
	// when the first of them was received, At when the last target
	// acknowledged.
	Commit, First, At time.Time
}

// txn is a transaction being read, or a batch of them being applied.
type txn struct {
	weight   int64           // held of the runner's budget
	waiters  []chan struct{} // closed once the batch is applied and reported
	keys     map[string]struct{}
	perTable map[string]int
	whole    map[string]struct{}
	pos      Position
	txns     int
	rows     int
	commit   time.Time
	first    time.Time
}

func newTxn() *txn {
	return &txn{keys: make(map[string]struct{}, 8), perTable: make(map[string]int, 1), whole: map[string]struct{}{}}
}

// merge folds a later batch into t.
func (t *txn) merge(o *txn) {
	for k := range o.keys {
		t.keys[k] = struct{}{}
	}
	for w := range o.whole {
		t.whole[w] = struct{}{}
	}
	if o.pos != nil {
		t.pos = o.pos
	}
	t.txns += o.txns
	t.rows += o.rows
	t.waiters = append(t.waiters, o.waiters...)
	if !o.commit.IsZero() {
		t.commit = o.commit
	}
	if t.first.IsZero() {
		t.first = o.first
	}
}

// Run streams opts.Source and invalidates opts.Targets until ctx ends (it
// then returns nil) or a failure it cannot retry: a fatal source error
// (ErrFatal), the retained-log ceiling (ErrRetainedCeiling). A stream
// that fails is reconnected; a target that fails is retried, holding the
// confirmed position back, and never skipped.
func Run(ctx context.Context, opts Options) error {
	if opts.Source == nil || opts.Mapping == nil || len(opts.Targets) == 0 {
		return errors.New("cdc: Options need a Source, a Mapping and at least one Target")
	}
	names := map[string]bool{}
	for i, t := range opts.Targets {
		if t.Store == nil {
			return fmt.Errorf("cdc: target %d (%q) has no Store", i, t.Name)
		}
		if t.Name == "" {
			opts.Targets[i].Name = fmt.Sprintf("target%d", i+1)
		}
		if names[opts.Targets[i].Name] {
			return fmt.Errorf("cdc: two targets are named %q", t.Name)
		}
		names[opts.Targets[i].Name] = true
	}
	if opts.MaxTxnKeys <= 0 {
		opts.MaxTxnKeys = 10_000
	}
	if opts.MaxBatchKeys <= 0 {
		opts.MaxBatchKeys = 5_000
	}
	if opts.MaxPendingKeys <= 0 {
		opts.MaxPendingKeys = 100_000
	}
	if opts.BacklogEvery <= 0 {
		opts.BacklogEvery = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	opts.Metrics.setTargets(opts.Targets)
	r := &runner{opts: opts, m: opts.Metrics, ch: make(chan *txn, 1<<16), budget: semaphore.NewWeighted(int64(opts.MaxPendingKeys))}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); r.stream(ctx, cancel) }()
	go func() { defer wg.Done(); r.deliver(ctx, cancel) }()
	go func() { defer wg.Done(); r.watch(ctx, cancel) }()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

type runner struct {
	opts Options
	m    *Metrics
	ch   chan *txn
	// budget holds a weight per pending transaction (its keys, at least
	// 1), released once it is applied: MaxPendingKeys in all.
	budget *semaphore.Weighted
}

// weight is what a transaction holds of the pending-keys budget.
func (r *runner) weight(t *txn) int64 {
	return min(int64(max(1, len(t.keys))), int64(r.opts.MaxPendingKeys))
}

// stream runs the source, reconnecting after a failure.
func (r *runner) stream(ctx context.Context, stop context.CancelCauseFunc) {
	for n := 0; ctx.Err() == nil; n++ {
		b := &builder{r: r, ctx: ctx}
		start := time.Now()
		err := r.opts.Source.Stream(ctx, b)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrFatal) {
			stop(err)
			return
		}
		r.m.streamErrors.Add(1)
		r.m.setSourceErr(err)
		if time.Since(start) > 10*time.Second {
			n = 0
		}
		r.opts.Logger.Warn("cdc: stream failed; reconnecting from the last confirmed position", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff(n + 3)):
		}
	}
}

// deliver applies batches in order, coalescing what is queued, and
// confirms each batch's position once every target has it.
func (r *runner) deliver(ctx context.Context, stop context.CancelCauseFunc) {
	var seq int
	for {
		var b *txn
		select {
		case <-ctx.Done():
			return
		case b = <-r.ch:
		}
		held := b.weight
	coalesce:
		for len(b.keys) < r.opts.MaxBatchKeys {
			select {
			case o := <-r.ch:
				b.merge(o)
				held += o.weight
			default:
				break coalesce
			}
		}
		seq++
		tables := sortedKeys(b.whole)
		var prefixes []string
		for _, t := range tables {
			prefixes = append(prefixes, r.opts.Mapping.Prefixes(t)...)
		}
		keys := make([]string, 0, len(b.keys))
		for k := range b.keys {
			keys = append(keys, k)
		}
		report := func() {
			a := Applied{Pos: b.pos, Txns: b.txns, Keys: len(keys), Tables: tables, Commit: b.commit, First: b.first, At: time.Now()}
			r.m.applied(a)
			if r.opts.OnApplied != nil {
				r.opts.OnApplied(a)
			}
			if b.pos != nil {
				r.opts.Source.Confirm(b.pos)
				r.m.setConfirmed(b.pos)
			}
		}
		if r.opts.faults.reportEarly > 0 {
			report()
			time.Sleep(r.opts.faults.reportEarly)
		}
		if !(r.opts.faults.dropEvery > 0 && seq%r.opts.faults.dropEvery == 0) && (len(keys) > 0 || len(prefixes) > 0) {
			if err := r.applyAll(ctx, keys, prefixes); err != nil {
				return // ctx ended
			}
		}
		if r.opts.faults.reportEarly == 0 {
			report()
		}
		r.budget.Release(held)
		for _, w := range b.waiters {
			close(w)
		}
	}
}

// applyAll invalidates keys and prefixes on every target concurrently,
// retrying each target until it succeeds or ctx ends.
func (r *runner) applyAll(ctx context.Context, keys, prefixes []string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(r.opts.Targets))
	for i := range r.opts.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.apply(ctx, i, keys, prefixes)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *runner) apply(ctx context.Context, i int, keys, prefixes []string) error {
	t := &r.opts.Targets[i]
	tm := r.m.target(i)
	var since time.Time
	defer tm.busy(time.Time{})
	for n := 0; ; n++ {
		tm.busy(time.Now())
		err := t.invalidate(ctx, keys)
		if err == nil && len(prefixes) > 0 {
			var walked int
			walked, err = t.invalidatePrefixes(ctx, prefixes)
			tm.walked.Add(int64(walked))
		}
		if err == nil {
			tm.invalidations.Add(int64(len(keys)))
			tm.batches.Add(1)
			if !since.IsZero() {
				r.opts.Logger.Info("cdc: target recovered", "target", t.Name, "after", time.Since(since).Round(time.Millisecond))
			}
			tm.setErr(nil, time.Time{})
			return nil
		}
		if ctx.Err() != nil {
			return errStopped
		}
		tm.errors.Add(1)
		if since.IsZero() {
			since = time.Now()
			r.opts.Logger.Warn("cdc: target failing; holding the confirmed position back and retrying", "target", t.Name, "err", err)
		}
		tm.setErr(err, since)
		select {
		case <-ctx.Done():
			return errStopped
		case <-time.After(backoff(n)):
		}
	}
}

// watch reads the upstream's backlog for the metrics and the ceiling.
func (r *runner) watch(ctx context.Context, stop context.CancelCauseFunc) {
	t := time.NewTicker(r.opts.BacklogEvery)
	defer t.Stop()
	for {
		bl, err := r.opts.Source.Backlog(ctx)
		if err == nil {
			r.m.setBacklog(bl)
			if c := r.opts.MaxRetainedBytes; c > 0 && bl.RetainedBytes > c {
				stop(fmt.Errorf("%w: the upstream retains %d bytes for this consumer, above max_retained %d; %s", ErrRetainedCeiling, bl.RetainedBytes, c, r.m.Status()))
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// builder turns a source's stream into transactions for delivery. It
// runs on the source's goroutine.
type builder struct {
	r    *runner
	ctx  context.Context
	cur  *txn
	keys []string
}

func (b *builder) txn() *txn {
	if b.cur == nil {
		b.cur = newTxn()
		b.cur.first = time.Now()
	}
	return b.cur
}

// Change implements Handler.
func (b *builder) Change(c *Change) error {
	m := b.r.opts.Mapping
	if !m.Mapped(c.Table) {
		return nil
	}
	t := b.txn()
	t.rows++
	if _, whole := t.whole[c.Table]; whole {
		return nil
	}
	var err error
	b.keys, err = m.Keys(b.keys[:0], c)
	if errors.Is(err, errWholeTable) {
		b.r.opts.Logger.Warn("cdc: a change left a key column out (unchanged TOAST value); invalidating the table whole", "table", c.Table)
		b.wholeTable(t, c.Table)
		return nil
	}
	if err != nil {
		// A value that does not parse as the view's id cannot be a key
		// the application reads; the table is invalidated whole so
		// nothing is missed, and the error counted.
		b.r.m.mappingErrors.Add(1)
		b.r.opts.Logger.Warn("cdc: a row did not map to a key; invalidating the table whole", "table", c.Table, "err", err)
		b.wholeTable(t, c.Table)
		return nil
	}
	for _, k := range b.keys {
		if _, ok := t.keys[k]; !ok {
			t.keys[k] = struct{}{}
			t.perTable[c.Table]++
		}
	}
	if t.perTable[c.Table] > b.r.opts.MaxTxnKeys {
		b.r.m.capped.Add(1)
		b.wholeTable(t, c.Table)
	}
	return nil
}

// wholeTable turns the transaction's invalidation of table into a
// table-wide one, dropping the keys it gathered for it.
func (b *builder) wholeTable(t *txn, table string) {
	t.whole[table] = struct{}{}
	if t.perTable[table] == 0 {
		return
	}
	prefixes := b.r.opts.Mapping.Prefixes(table)
	for k := range t.keys {
		for _, p := range prefixes {
			if len(k) >= len(p) && k[:len(p)] == p {
				delete(t.keys, k)
				break
			}
		}
	}
	delete(t.perTable, table)
}

// Truncate implements Handler.
func (b *builder) Truncate(tables []string) error {
	for _, tb := range tables {
		if b.r.opts.Mapping.Mapped(tb) {
			b.wholeTable(b.txn(), QualifiedName(tb))
		}
	}
	return nil
}

// Commit implements Handler.
func (b *builder) Commit(pos Position, at time.Time) error {
	t := b.txn()
	b.cur = nil
	t.pos, t.commit, t.txns = pos, at, 1
	b.r.m.received(at)
	return b.push(t)
}

// Idle implements Handler.
func (b *builder) Idle(pos Position) error {
	if b.cur != nil {
		return nil // inside a transaction: its commit confirms
	}
	t := newTxn()
	t.pos, t.first = pos, time.Now()
	return b.push(t)
}

// Reset implements Handler.
func (b *builder) Reset(reason string) error {
	b.r.opts.Logger.Warn("cdc: history lost; invalidating every mapped table whole before streaming", "reason", reason)
	b.r.m.resets.Add(1)
	t := newTxn()
	t.first = time.Now()
	for _, tb := range b.r.opts.Mapping.Tables() {
		t.whole[tb] = struct{}{}
	}
	b.cur = nil
	done := make(chan struct{})
	t.waiters = []chan struct{}{done}
	if err := b.push(t); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}

func (b *builder) push(t *txn) error {
	t.weight = b.r.weight(t)
	if err := b.r.budget.Acquire(b.ctx, t.weight); err != nil {
		return err
	}
	select {
	case b.r.ch <- t:
		return nil
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}
