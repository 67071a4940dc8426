package flight

import (
	"context"
	"testing"
)

func TestJoin(t *testing.T) {
	var g Group[int]
	if _, ok, _ := g.Join(context.Background(), "k"); ok {
		t.Fatal("Join with nothing in flight must return at once with ok false")
	}
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_, _, _ = g.Do(context.Background(), "k", 0, func(context.Context) (int, error) {
			close(started)
			<-release
			return 7, nil
		}, nil)
	}()
	<-started
	done := make(chan int)
	go func() {
		v, ok, err := g.Join(context.Background(), "k")
		if !ok || err != nil {
			t.Errorf("Join = %v, %v, %v", v, ok, err)
		}
		done <- v
	}()
	close(release)
	if v := <-done; v != 7 {
		t.Fatalf("Join got %d, want the flight's 7", v)
	}
}
