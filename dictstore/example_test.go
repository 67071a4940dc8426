package dictstore_test

import (
	"context"
	"fmt"
	"reflect"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/store/memstore"
)

// A writer with the compact envelope stores Products as arrays of their
// field values; publishing the type's schema once at start-up lets kura
// inspect, kura ui and Node caches with namedFields show them with their
// field names.
func ExampleRegistry_PublishSchema() {
	type Product struct {
		ID    int64  `msgpack:"id"`
		Name  string `msgpack:"name"`
		Stock int    `msgpack:"stock"`
	}
	ctx := context.Background()
	st, err := memstore.New(memstore.Options{}) // a redisstore or memcache store in production
	if err != nil {
		panic(err)
	}
	reg, err := dictstore.New(dictstore.Options{Store: st})
	if err != nil {
		panic(err)
	}
	fp, err := reg.PublishSchema(ctx, reflect.TypeFor[Product]())
	if err != nil {
		panic(err)
	}
	products, err := kura.New[Product](st, kura.Options{Envelope: kura.EnvelopeCompactPositional})
	if err != nil {
		panic(err)
	}
	_ = products // Set and Fetch as usual: every entry carries fingerprint fp

	// A reader without the Go type:
	s, err := reg.Schema(ctx, fp)
	if err != nil {
		panic(err)
	}
	named, err := s.Named([]any{int64(42), "apple", int64(3)})
	fmt.Println(named, err, reg.SchemaKey(fp) != "")
	// Output: map[id:42 name:apple stock:3] <nil> true
}
