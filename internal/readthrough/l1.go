package readthrough

import "github.com/kuracache/kura/internal/l1"

// beginL1 places the L1's placeholder for a read of key that may fill it.
func (p l1Step[V]) beginL1(key string) (l1.Token, bool) {
	if p.l1 == nil || (p.tracker != nil && !p.tracker.Tracks(key)) {
		return l1.Token{}, false
	}
	return p.l1.Begin(key), true
}

// finishL1 fills the L1 with a hit, unless the key was invalidated while
// the read was in flight.
func (p l1Step[V]) finishL1(s *slot[V], tok l1.Token, track bool) {
	if track {
		p.l1.Finish(s.key, tok, s.e.v, s.e.negative, s.e.rawLen, s.class == hit)
	}
}

// beginL1s places the L1's placeholders for a lease read of keys bounded
// by MaxStaleness; finishL1s fills the L1 with what the read found for
// the slots of sel: a fresh value, not a stale one (served under
// stale-while-revalidate).
func (p l1Step[V]) beginL1s(keys []string) []l1.Token {
	toks := make([]l1.Token, len(keys))
	for j, k := range keys {
		toks[j] = p.l1.Begin(k)
	}
	return toks
}

func (p l1Step[V]) finishL1s(sel picks[V], toks []l1.Token) {
	for j := range toks {
		s := sel.at(j)
		p.l1.Finish(s.key, toks[j], s.e.v, s.e.negative, s.e.rawLen, s.class == hit && !s.stale)
	}
}

// l1Split serves from the L1 the keys it holds (a negative entry is left
// out of out, as a miss of the source) and appends to slots a slot for
// each other key, in order: the first step of GetMany and FetchMany.
func (p l1Step[V]) l1Split(keys []string, out map[string]V, slots []slot[V]) []slot[V] {
	if p.l1 == nil {
		for _, k := range keys {
			slots = append(slots, slot[V]{key: k})
		}
		return slots
	}
	for _, k := range keys {
		if v, neg, ok := p.l1.Get(k); ok {
			if !neg {
				out[k] = v
			}
			continue
		}
		slots = append(slots, slot[V]{key: k})
	}
	return slots
}

// DropL1 removes keys from the L1 and stops the reads in flight from
// filling them: this process never reads its old value after a write.
func (p *Pipeline[V]) DropL1(keys ...string) {
	if p.l1 == nil {
		return
	}
	for _, k := range keys {
		p.l1.Drop(k)
	}
}

type l1Token struct {
	t  l1.Token
	ok bool
}

// l1Step is the L1's placeholders and fills around a store read: methods over the pipeline's state.
type l1Step[V any] struct{ *Pipeline[V] }

// beginMany places the L1's placeholders for a batch read of slots (the
// keys the L1 did not serve) and returns the keys to read and the tokens
// of their fills; without an L1, keys as they are and no tokens.
func (p l1Step[V]) beginMany(keys []string, slots []slot[V]) ([]string, []l1Token) {
	if p.l1 == nil {
		return keys, nil
	}
	keys = keys[:0:0]
	toks := make([]l1Token, len(slots))
	for i := range slots {
		keys = append(keys, slots[i].key)
		toks[i].t, toks[i].ok = p.beginL1(slots[i].key)
	}
	return keys, toks
}
