package move

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// Phase is where a Store is in a move.
type Phase int32

// The phases of a move, in the order a fleet passes through them.
const (
	// PhaseDual reads the old owner and writes both.
	PhaseDual Phase = 1
	// PhaseWarm reads the new owner, then the old one, copying what it
	// finds; it writes both.
	PhaseWarm Phase = 2
	// PhaseNew reads and writes the new owner; invalidations and deletes
	// still reach the old one.
	PhaseNew Phase = 3
)

func (p Phase) String() string {
	switch p {
	case PhaseDual:
		return "dual"
	case PhaseWarm:
		return "warm"
	case PhaseNew:
		return "new"
	}
	return fmt.Sprintf("Phase(%d)", int32(p))
}

// ErrOptions reports options New cannot use.
var ErrOptions = errors.New("kura: bad move options")

// ErrPhase reports a phase change backwards or to an unknown phase.
var ErrPhase = errors.New("kura: bad move phase")

// DefaultCopyTTL is the TTL of a copied value whose envelope does not
// say how long it has left (see Options.CopyTTL).
const DefaultCopyTTL = 10 * time.Minute

// DefaultGuardTTL is Options.GuardTTL when left at zero.
const DefaultGuardTTL = 5 * time.Second

// Options configure a Store. Old and New are required.
type Options struct {
	// Old is the store over the ring the keys live on now; New the store
	// over the ring they move to. The Store owns both: Close closes them.
	Old, New store.Store
	// Phase is the phase the Store starts in; zero means PhaseDual.
	Phase Phase
	// WarmAt, when set, is when PhaseWarm begins, and NewAt when PhaseNew
	// begins (NewAt must not be before WarmAt). Zero: only a call
	// (SetPhase, End) moves the Store on. Every process of a fleet given
	// the same times switches at the same moment of its own clock; the
	// procedure in docs/resize.md says how far apart they may be.
	WarmAt, NewAt time.Time
	// CopyTTL is the TTL of a value copied from the old owner to the new
	// one. Zero means what is left of the TTL its writer gave it, read
	// from the value's kura envelope (its write time and TTL fields); a
	// value whose envelope does not tell gets DefaultCopyTTL. A value
	// whose TTL has run out is not copied.
	CopyTTL time.Duration
	// GuardTTL is how long the guard a plain (lease-less) read places on
	// the new owner before it copies a value lives if the process dies
	// mid-copy. Zero means DefaultGuardTTL.
	GuardTTL time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Store is a store.Store in the middle of a move from Options.Old to
// Options.New.
type Store struct {
	old, new store.Store
	// oldL and newL are the sides' lease capabilities (nil without).
	oldL, newL store.Leaser
	// oldLoc and newLoc tell a key's owner on each side (nil: unknown,
	// every key counts as moved).
	oldLoc, newLoc store.NodeLocator
	phase          atomic.Int32
	warmAt, newAt  time.Time
	copyTTL        time.Duration
	guardTTL       time.Duration
	now            func() time.Time
	st             counters
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.Batcher        = (*Store)(nil)
	_ store.Leaser         = (*Store)(nil)
	_ store.LeaseCapable   = (*Store)(nil)
	_ store.Pinger         = (*Store)(nil)
	_ store.MaxValueSizer  = (*Store)(nil)
	_ store.MetaReader     = (*Store)(nil)
	_ store.ConnReporter   = (*Store)(nil)
	_ store.HealthReporter = (*Store)(nil)
)

// New returns a Store moving from opts.Old to opts.New.
func New(opts Options) (*Store, error) {
	switch {
	case opts.Old == nil:
		return nil, fmt.Errorf("%w: Old is nil", ErrOptions)
	case opts.New == nil:
		return nil, fmt.Errorf("%w: New is nil", ErrOptions)
	case opts.Old == opts.New:
		return nil, fmt.Errorf("%w: Old and New are the same store", ErrOptions)
	case opts.Phase != 0 && (opts.Phase < PhaseDual || opts.Phase > PhaseNew):
		return nil, fmt.Errorf("%w: Phase %d (want %d to %d)", ErrOptions, opts.Phase, PhaseDual, PhaseNew)
	case !opts.WarmAt.IsZero() && !opts.NewAt.IsZero() && opts.NewAt.Before(opts.WarmAt):
		return nil, fmt.Errorf("%w: NewAt %v is before WarmAt %v", ErrOptions, opts.NewAt, opts.WarmAt)
	case opts.CopyTTL < 0:
		return nil, fmt.Errorf("%w: CopyTTL %v is negative", ErrOptions, opts.CopyTTL)
	case opts.GuardTTL < 0:
		return nil, fmt.Errorf("%w: GuardTTL %v is negative", ErrOptions, opts.GuardTTL)
	}
	s := &Store{old: opts.Old, new: opts.New, warmAt: opts.WarmAt, newAt: opts.NewAt,
		copyTTL: opts.CopyTTL, guardTTL: opts.GuardTTL, now: opts.Now}
	if s.guardTTL == 0 {
		s.guardTTL = DefaultGuardTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	p := opts.Phase
	if p == 0 {
		p = PhaseDual
	}
	s.phase.Store(int32(p))
	s.oldL, _ = store.FindLeaser(s.old)
	s.newL, _ = store.FindLeaser(s.new)
	ol, ok1 := store.Find[store.NodeLocator](s.old)
	nl, ok2 := store.Find[store.NodeLocator](s.new)
	if ok1 && ok2 {
		s.oldLoc, s.newLoc = ol, nl
	}
	return s, nil
}

// Phase returns the phase the Store is in now: the later of the last one
// set and the one the schedule (WarmAt, NewAt) has reached.
func (s *Store) Phase() Phase {
	p := Phase(s.phase.Load())
	if p == PhaseNew || (s.warmAt.IsZero() && s.newAt.IsZero()) {
		return p
	}
	now := s.now()
	if !s.newAt.IsZero() && !now.Before(s.newAt) {
		return PhaseNew
	}
	if p < PhaseWarm && !s.warmAt.IsZero() && !now.Before(s.warmAt) {
		return PhaseWarm
	}
	return p
}

// SetPhase moves the Store on to p now. A move never goes back: a phase
// before the current one is refused with ErrPhase.
func (s *Store) SetPhase(p Phase) error {
	if p < PhaseDual || p > PhaseNew {
		return fmt.Errorf("%w: %d", ErrPhase, p)
	}
	for {
		cur := s.Phase()
		if p < cur {
			return fmt.Errorf("%w: the move is in phase %v, %v is behind it", ErrPhase, cur, p)
		}
		// The stored phase may lag the schedule; storing p (>= the
		// scheduled one) is what the caller asked.
		old := s.phase.Load()
		if s.phase.CompareAndSwap(old, int32(p)) {
			return nil
		}
	}
}

// End ends the move: the Store reads and writes only the new ring from
// now on (PhaseNew).
func (s *Store) End() { _ = s.SetPhase(PhaseNew) }

// Old and New return the two sides.
func (s *Store) Old() store.Store { return s.old }

// New returns the store over the ring the keys move to.
func (s *Store) New() store.Store { return s.new }

// moved reports whether key's owner differs between the rings.
func (s *Store) moved(key string) bool {
	if s.oldLoc == nil {
		return true
	}
	a, b := s.oldLoc.NodeOf(key), s.newLoc.NodeOf(key)
	return a == "" || b == "" || a != b
}

// split returns the indexes of the keys that move and of those that stay.
func (s *Store) split(n int, key func(int) string) (moved, stay []int) {
	for i := 0; i < n; i++ {
		if s.moved(key(i)) {
			moved = append(moved, i)
		} else {
			stay = append(stay, i)
		}
	}
	return moved, stay
}

func pick[T any](xs []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = xs[i]
	}
	return out
}

// both runs a and b at once when both have work (a nil func has none),
// and joins their errors into one *store.BatchError for op when either
// is one.
func both(op string, a, b func() error) error {
	var ea, eb error
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return b()
	case b == nil:
		return a()
	}
	var wg sync.WaitGroup
	wg.Go(func() { ea = a() })
	eb = b()
	wg.Wait()
	return joinErr(op, ea, eb)
}

// joinErr joins two errors of parts of one batch: a *store.BatchError
// when both are (or one is and the other nil), errors.Join otherwise.
func joinErr(op string, errs ...error) error {
	be := &store.BatchError{Op: op}
	var other []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		var b *store.BatchError
		if errors.As(err, &b) {
			be.Errors = append(be.Errors, b.Errors...)
			continue
		}
		other = append(other, err)
	}
	if len(other) > 0 {
		return errors.Join(append(other, be.Err())...)
	}
	return be.Err()
}

// reader is the store the reads of a phase go to first.
func (s *Store) reader(p Phase) store.Store {
	if p == PhaseDual {
		return s.old
	}
	return s.new
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	p := s.Phase()
	if !s.moved(key) {
		return s.new.Get(ctx, key)
	}
	if p != PhaseWarm {
		return s.reader(p).Get(ctx, key)
	}
	v, err := s.new.Get(ctx, key)
	if err == nil && !codec.IsPlaceholder(v) || err != nil && !errors.Is(err, store.ErrNotFound) {
		return v, err
	}
	vals, err := s.warmPlain(ctx, []string{key})
	if err != nil {
		return nil, err
	}
	if vals[0] == nil {
		return nil, store.ErrNotFound
	}
	return vals[0], nil
}

// GetMany implements store.BatchGetter: one batch to the phase's reader;
// in PhaseWarm the moved keys it missed are read from the old owner in
// one more batch and copied.
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	p := s.Phase()
	if p == PhaseDual {
		return s.readSplit(ctx, keys)
	}
	vals, err := store.GetMany(ctx, s.new, keys)
	if p != PhaseWarm || len(vals) != len(keys) {
		return vals, err
	}
	failed := map[string]error{}
	if be := (*store.BatchError)(nil); errors.As(err, &be) {
		failed = be.Failed()
	} else if err != nil {
		return vals, err
	}
	var miss []int
	for i, k := range keys {
		// A placeholder (a guard or lease of a warm-up in flight) is a
		// miss here too: the old owner may have the value.
		if _, bad := failed[k]; (vals[i] == nil || codec.IsPlaceholder(vals[i])) && !bad && s.moved(k) {
			vals[i] = nil
			miss = append(miss, i)
		}
	}
	if len(miss) == 0 {
		return vals, err
	}
	got, werr := s.warmPlain(ctx, pick(keys, miss))
	for j, i := range miss {
		if j < len(got) {
			vals[i] = got[j]
		}
	}
	if werr != nil {
		var be *store.BatchError
		if !errors.As(werr, &be) {
			// The warm-up failed as a whole: the keys stay misses, as
			// they were on the new owner.
			s.st.fallbacks.Add(uint64(len(miss)))
			return vals, err
		}
		return vals, joinErr("get", err, werr)
	}
	return vals, err
}

// readSplit reads the moved keys of keys from the old owner and the
// others from their one server, in one batch each, at once.
func (s *Store) readSplit(ctx context.Context, keys []string) ([][]byte, error) {
	moved, stay := s.split(len(keys), func(i int) string { return keys[i] })
	if len(stay) == 0 {
		return store.GetMany(ctx, s.old, keys)
	}
	if len(moved) == 0 {
		return store.GetMany(ctx, s.new, keys)
	}
	vals := make([][]byte, len(keys))
	part := func(st store.Store, idx []int) func() error {
		return func() error {
			got, err := store.GetMany(ctx, st, pick(keys, idx))
			for j, i := range idx {
				if j < len(got) {
					vals[i] = got[j]
				}
			}
			return err
		}
	}
	return vals, both("get", part(s.old, moved), part(s.new, stay))
}

// Set implements store.Store: in PhaseDual and PhaseWarm the old owner,
// then the new one; in PhaseNew the old owner loses the key (a process
// still warming up must not copy what it holds) and the new one takes it.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if !s.moved(key) {
		return s.new.Set(ctx, key, value, ttl)
	}
	s.st.dualWrites.Add(1)
	var err error
	if s.Phase() == PhaseNew {
		err = s.old.Delete(ctx, key)
	} else {
		err = s.old.Set(ctx, key, value, ttl)
	}
	// The new owner is written even when the old one failed: the old
	// one is what fewer and fewer readers see.
	return errors.Join(err, s.new.Set(ctx, key, value, ttl))
}

// Delete implements store.Store: the old owner, then the new one.
func (s *Store) Delete(ctx context.Context, key string) error {
	if !s.moved(key) {
		return s.new.Delete(ctx, key)
	}
	s.st.dualWrites.Add(1)
	return errors.Join(s.old.Delete(ctx, key), s.new.Delete(ctx, key))
}

// SetMany implements store.BatchSetter, as Set does, one batch per side.
func (s *Store) SetMany(ctx context.Context, items []store.Item) error {
	moved, _ := s.split(len(items), func(i int) string { return items[i].Key })
	s.st.dualWrites.Add(uint64(len(moved)))
	var errOld error
	if len(moved) > 0 {
		if s.Phase() == PhaseNew {
			keys := make([]string, len(moved))
			for j, i := range moved {
				keys[j] = items[i].Key
			}
			errOld = store.DeleteMany(ctx, s.old, keys)
		} else {
			errOld = store.SetMany(ctx, s.old, pick(items, moved))
		}
	}
	return joinErr("set", errOld, store.SetMany(ctx, s.new, items))
}

// DeleteMany implements store.BatchDeleter: the old owner, then the new.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	moved, _ := s.split(len(keys), func(i int) string { return keys[i] })
	s.st.dualWrites.Add(uint64(len(moved)))
	var errOld error
	if len(moved) > 0 {
		errOld = store.DeleteMany(ctx, s.old, pick(keys, moved))
	}
	return joinErr("delete", errOld, store.DeleteMany(ctx, s.new, keys))
}

// Close closes both sides.
func (s *Store) Close() error { return errors.Join(s.old.Close(), s.new.Close()) }

// Ping pings both sides at once.
func (s *Store) Ping(ctx context.Context) error {
	ping := func(st store.Store) func() error {
		return func() error {
			if p, ok := store.Find[store.Pinger](st); ok {
				return p.Ping(ctx)
			}
			return nil
		}
	}
	var ea, eb error
	var wg sync.WaitGroup
	wg.Go(func() { ea = ping(s.old)() })
	eb = ping(s.new)()
	wg.Wait()
	return errors.Join(ea, eb)
}

// MaxValueSize is the smaller limit of the two sides (0: neither has one).
func (s *Store) MaxValueSize() int {
	m := 0
	for _, st := range []store.Store{s.old, s.new} {
		if ms, ok := store.Find[store.MaxValueSizer](st); ok {
			if v := ms.MaxValueSize(); v > 0 && (m == 0 || v < m) {
				m = v
			}
		}
	}
	return m
}

// KeyMeta implements store.MetaReader on the owner the phase reads
// (in PhaseWarm the new one, then the old one).
func (s *Store) KeyMeta(ctx context.Context, key string) (store.KeyMeta, error) {
	p := s.Phase()
	try := []store.Store{s.reader(p)}
	if p == PhaseWarm && s.moved(key) {
		try = append(try, s.old)
	}
	err := error(store.ErrNotFound)
	for _, st := range try {
		mr, ok := store.Find[store.MetaReader](st)
		if !ok {
			return store.KeyMeta{}, fmt.Errorf("move: %T cannot describe keys", st)
		}
		var m store.KeyMeta
		if m, err = mr.KeyMeta(ctx, key); !errors.Is(err, store.ErrNotFound) {
			return m, err
		}
	}
	return store.KeyMeta{}, err
}

// ConnStats merges both sides' connections (a server on both rings is
// listed twice: it has a connection pool per side).
func (s *Store) ConnStats() store.ConnStats {
	var out store.ConnStats
	out.Connected = true
	for _, st := range []store.Store{s.old, s.new} {
		cr, ok := store.Find[store.ConnReporter](st)
		if !ok {
			continue
		}
		c := cr.ConnStats()
		out.Connected = out.Connected && c.Connected
		out.ConnectAttempts += c.ConnectAttempts
		out.ConnectFailures += c.ConnectFailures
		out.Nodes = append(out.Nodes, c.Nodes...)
		out.TrackingFlushes += c.TrackingFlushes
		out.NotReplicated += c.NotReplicated
		out.ReplicaReads += c.ReplicaReads
	}
	return out
}

// NodeHealth merges both sides' node health (wrap each side with
// store/health, not the Store: its nodes are two rings').
func (s *Store) NodeHealth() []store.NodeHealth {
	var out []store.NodeHealth
	for _, st := range []store.Store{s.old, s.new} {
		if hr, ok := store.Find[store.HealthReporter](st); ok {
			out = append(out, hr.NodeHealth()...)
		}
	}
	return out
}

// ttlOf is the TTL a copy of v gets, and false when v must not be copied
// (no value, or its TTL has run out).
func (s *Store) ttlOf(v []byte) (time.Duration, bool) {
	if len(v) == 0 || codec.IsPlaceholder(v) {
		return 0, false
	}
	if s.copyTTL > 0 {
		return s.copyTTL, true
	}
	h, err := codec.ParseHeader(v)
	if err != nil || h.Fields.Written.IsZero() || h.Fields.TTL <= 0 {
		return DefaultCopyTTL, true
	}
	left := h.Fields.Written.Add(h.Fields.TTL).Sub(s.now())
	if left <= 0 {
		return 0, false
	}
	// memcached counts whole seconds: a copy never outlives its original
	// by more than the rounding.
	return left, true
}

// oldTag marks the leases taken on the old owner, so that their fill or
// release goes back there whatever the phase is by then. It leads the
// lease's Token, which the Cache passes back untouched.
var oldTag = []byte("\x00kura-move-old\x00")

func tagOld(l store.Lease) store.Lease {
	l.Token = append(append(make([]byte, 0, len(oldTag)+len(l.Token)), oldTag...), l.Token...)
	return l
}

// untag returns l without the old-side tag and whether it had one.
func untag(l store.Lease) (store.Lease, bool) {
	rest, ok := bytes.CutPrefix(l.Token, oldTag)
	if !ok {
		return l, false
	}
	if len(rest) == 0 {
		rest = nil
	}
	l.Token = rest
	return l, true
}
