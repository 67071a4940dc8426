package flight

import (
	"context"
	"errors"
	"testing"
)

func TestJoin(t *testing.T) {
	var g Group[int]
	if _, ok, _ := g.Join(context.Background(), "k", nil); ok {
		t.Fatal("Join with nothing in flight must return at once with ok false")
	}
	release := make(chan struct{})
	started := make(chan struct{})
	led := make(chan int)
	go func() {
		v, _, _ := g.Do(context.Background(), "k", 0, func(context.Context) (int, error) {
			close(started)
			<-release
			return 7, nil
		}, nil)
		led <- v
	}()
	<-started
	// In flight: a caller whose ctx is over gets its error, and knows a
	// load was there to join.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok, err := g.Join(done, "k", nil); !ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("Join with an ended ctx = %v, %v; want true and its error", ok, err)
	}
	joined := make(chan [2]any)
	go func() {
		v, ok, err := g.Join(context.Background(), "k", nil)
		if err != nil {
			t.Error(err)
		}
		joined <- [2]any{v, ok}
	}()
	close(release)
	if v := <-led; v != 7 {
		t.Fatalf("the leader got %d", v)
	}
	// Either the joiner found the flight (and got its value) or came after
	// it ended (and was told so); never a wrong value.
	if r := <-joined; r[1].(bool) && r[0].(int) != 7 {
		t.Fatalf("Join got %v from a flight that returned 7", r[0])
	}
}

// TestWaitWithEndedContext: a caller whose ctx ended before it waits gets
// ctx's error every time, also when the load is done as well. Before, a
// select between the two ready cases returned the value about half the
// time (CI saw TestCallerCancelEndsStalledStoreCall/memcached get the
// loader's value after its cancellation).
func TestWaitWithEndedContext(t *testing.T) {
	var g Group[int]
	c, led := g.Claim("k", false)
	if !led {
		t.Fatal("the first Claim must lead")
	}
	g.Run(context.Background(), 0, []*Call[int]{c}, func(context.Context) ([]int, []error) {
		return []int{7}, []error{nil}
	})
	if v, err := c.Wait(context.Background(), true); v != 7 || err != nil {
		t.Fatalf("Wait = %d, %v; want 7", v, err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for range 1000 {
		if v, err := c.Wait(ended, true); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait with an ended ctx on a done load = %d, %v; want context.Canceled", v, err)
		}
	}
}
