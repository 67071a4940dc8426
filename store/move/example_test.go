package move_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/move"
)

// A move in its warm-up phase serves a key the new store misses from the
// old one. (In-process stores for the example: with real Redis or
// memcached rings the value is also copied to its new owner, under a
// lease; see docs/resize.md.)
func Example() {
	ctx := context.Background()
	old, _ := memstore.New(memstore.Options{})
	cur, _ := memstore.New(memstore.Options{})
	_ = old.Set(ctx, "article:1", []byte("cached before the move"), time.Hour)

	s, err := move.New(move.Options{Old: old, New: cur, Phase: move.PhaseWarm})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	v, _ := s.Get(ctx, "article:1")
	fmt.Printf("%s (phase %v, %d warm-up hit)\n", v, s.Phase(), s.Stats().WarmHits)
	s.End()
	_, err = s.Get(ctx, "article:1")
	fmt.Println("after End:", err)
	// Output:
	// cached before the move (phase warm, 1 warm-up hit)
	// after End: kura: not found
}
