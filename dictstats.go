package kura

import (
	"sync"
	"sync/atomic"
)

// dictCounters counts bytes written per dictionary id. A Cache writes
// with one or two ids at a time (two during a rotation), so the map stays
// tiny and its reads are lock-free after the first write of an id.
type dictCounters struct{ m sync.Map } // uint32 -> *atomic.Uint64

func (d *dictCounters) add(id uint32, n int) {
	v, ok := d.m.Load(id)
	if !ok {
		v, _ = d.m.LoadOrStore(id, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(uint64(n))
}

func (d *dictCounters) snapshot() map[uint32]uint64 {
	out := map[uint32]uint64{}
	d.m.Range(func(k, v any) bool {
		out[k.(uint32)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}
