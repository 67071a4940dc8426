package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"

	hashslot "github.com/kuracache/kura/internal/slot"
)

// NodeKeys returns variants of key that together land on every server
// holding data: key itself on a standalone server; on a cluster, one key
// per master, "{key#n}" with the smallest n whose hash slot that master
// owns. Data that must be readable while any one master is down (a
// compression dictionary) is written under all of them. The slot map is
// read from the cluster (CLUSTER SLOTS) when none is loaded yet; keys
// are listed in the order of the masters' addresses.
func (s *Store) NodeKeys(ctx context.Context, key string) ([]string, error) {
	cn, err := s.ready(ctx)
	if err != nil {
		return nil, err
	}
	if !cn.cluster {
		return []string{key}, nil
	}
	m := s.slots.Load()
	if m == nil {
		s.refreshSlots(ctx, cn)
		if m = s.slots.Load(); m == nil {
			return nil, s.wrapErr("", errors.New("redisstore: NodeKeys: no slot map from the cluster (CLUSTER SLOTS failed)"))
		}
	}
	masters := map[string]bool{}
	for _, a := range m.addr {
		if a != "" {
			masters[a] = false
		}
	}
	addrs := make([]string, 0, len(masters))
	for a := range masters {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	keys := make(map[string]string, len(addrs))
	// Each try lands on a master with probability about 1/masters, so a
	// few hundred tries cover any real cluster.
	for n := 0; len(keys) < len(addrs) && n < 64*len(addrs)+1024; n++ {
		k := "{" + key + "#" + strconv.Itoa(n) + "}"
		if a := m.addr[hashslot.Of(k)]; a != "" {
			if _, ok := keys[a]; !ok {
				keys[a] = k
			}
		}
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if k, ok := keys[a]; ok {
			out = append(out, k)
		}
	}
	return out, nil
}
