package cdc_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/store/memstore"
)

// The rules take their keys from the views the application reads through:
// a record cache, an Index and a UniqueIndex over it. An UPDATE that moves
// a row to another category and another sku invalidates the record and
// the entries of the old and the new values.
func ExampleNewMapping() {
	s, _ := memstore.New(memstore.Options{})
	cache, _ := kura.New[string](s, kura.Options{})
	items, _ := kura.NewKeyed[int64, string](cache, kura.KeyedOptions[int64]{Prefix: "item:"})
	byCategory, _ := kura.NewIndex(items, kura.IndexOptions[string, int64, string]{
		Prefix:      "items:cat:",
		LoadIDs:     func(context.Context, string) ([]int64, error) { return nil, nil },
		LoadRecords: func(context.Context, []int64) (map[int64]string, error) { return nil, nil },
	})
	bySKU, _ := kura.NewUniqueIndex(items, kura.UniqueIndexOptions[string, int64, string]{
		Prefix:     "items:sku:",
		LoadID:     func(context.Context, string) (int64, error) { return 0, kura.ErrNotFound },
		LoadRecord: func(context.Context, int64) (string, error) { return "", kura.ErrNotFound },
	})

	rec, _ := cdc.Record("items", "id", items)
	cat, _ := cdc.IndexOf("items", "category", byCategory)
	sku, _ := cdc.UniqueIndexOf("items", "sku", bySKU)
	m, err := cdc.NewMapping(rec, cat, sku)
	if err != nil {
		fmt.Println(err)
		return
	}
	keys, _ := m.Keys(nil, &cdc.Change{Table: "public.items", Op: cdc.Update,
		Old: cdc.Row{"id": {Text: "7"}, "category": {Text: "tools"}, "sku": {Text: "T-1"}},
		New: cdc.Row{"id": {Text: "7"}, "category": {Text: "garden"}, "sku": {Text: "G-1"}}})
	slices.Sort(keys)
	fmt.Println(slices.Compact(keys))
	// Output: [item:7 items:cat:garden items:cat:tools items:sku:G-1 items:sku:T-1]
}
