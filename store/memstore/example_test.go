package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kuracache/kura/store/memstore"
)

func Example() {
	s, err := memstore.New(memstore.Options{MaxBytes: 16 << 20})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ctx := context.Background()
	_ = s.Set(ctx, "user:42", []byte(`{"name":"Aiko"}`), time.Minute)
	v, err := s.Get(ctx, "user:42")
	fmt.Println(string(v), err)
	// Output: {"name":"Aiko"} <nil>
}
