package kura_test

import (
	"context"
	"net"
	"testing"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/redisstore"
)

// TestStatsShowsANotYetConnectedStore: a Cache over a store whose server
// refuses (the store starts anyway) says so in Stats, directly and
// through the health wrapper.
func TestStatsShowsANotYetConnectedStore(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: the server refuses
	st, err := redisstore.New(context.Background(), redisstore.Options{Addrs: []string{addr}})
	if err != nil {
		t.Fatalf("a store whose server refuses should still start: %v", err)
	}
	defer st.Close()
	h, err := health.New(st, health.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for name, s := range map[string]store.Store{"redisstore": st, "health": h} {
		c, err := kura.New[string](s, kura.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := c.Stats().Conn
		if got == nil {
			t.Fatalf("%s: Stats().Conn is nil for a store that reports its connections", name)
		}
		if got.Connected {
			t.Errorf("%s: Stats().Conn.Connected is true with nothing listening at %s", name, addr)
		}
	}
}
