package ring_test

import (
	"fmt"

	"github.com/kuracache/kura/ring"
)

// A Go service joining a Rails fleet on dalli places keys as dalli does,
// with dalli's names for the servers.
func ExampleNew() {
	nodes := []ring.Node{
		{ID: ring.DalliID("10.0.0.1", 11211)},
		{ID: ring.DalliID("10.0.0.2", 11211), Weight: 2},
		{ID: ring.DalliID("10.0.0.3", 11211)},
	}
	r, err := ring.New(ring.ModeDalli, nodes, ring.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Nodes()[r.Owner("user:42")].ID)
	// Output: 10.0.0.2:11211
}
