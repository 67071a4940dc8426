package memcache

import (
	"context"
	"fmt"
	"testing"

	"github.com/kuracache/kura/store/memcache/meta"
)

// NodeKeys gives one key per server, each placed on its own server by the
// ring, the same list every time (readers and writers must agree).
func TestNodeKeys(t *testing.T) {
	for _, n := range []int{1, 2, 5, 16} {
		var addrs []string
		for i := range n {
			addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", 1+i)) // never dialled for NodeKeys
		}
		ring, err := NewRing(addrs, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := &Store{ring: ring, clients: make([]*meta.Client, n)}
		keys, err := s.NodeKeys(context.Background(), "kura:dict:0abc1234")
		if err != nil || len(keys) != n {
			t.Fatalf("%d servers: %d keys, %v", n, len(keys), err)
		}
		seen := map[int]bool{}
		for _, k := range keys {
			seen[ring.Index(k)] = true
		}
		if len(seen) != n {
			t.Fatalf("%d servers: keys land on %d of them", n, len(seen))
		}
		again, _ := s.NodeKeys(context.Background(), "kura:dict:0abc1234")
		if fmt.Sprint(again) != fmt.Sprint(keys) {
			t.Fatalf("NodeKeys changed between calls: %v, %v", keys, again)
		}
	}
}
