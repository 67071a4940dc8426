package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/store/memstore"
)

func views(t *testing.T, key func(int64) string) (*kura.Keyed[int64, string], *kura.Index[string, int64, string]) {
	t.Helper()
	rec, idx, _ := viewsWithUnique(t, key, nil)
	return rec, idx
}

// viewsWithUnique builds a records view (key function key), an Index on
// category and a UniqueIndex on sku (key function ukey); nil keeps kura's
// default key function.
func viewsWithUnique(t *testing.T, key func(int64) string, ukey func(string) string) (*kura.Keyed[int64, string], *kura.Index[string, int64, string], *kura.UniqueIndex[string, int64, string]) {
	t.Helper()
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kura.New[string](s, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := kura.NewKeyed[int64, string](c, kura.KeyedOptions[int64]{Prefix: "item:", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := kura.NewIndex(rec, kura.IndexOptions[string, int64, string]{
		Prefix:      "items:cat:",
		LoadIDs:     func(context.Context, string) ([]int64, error) { return nil, nil },
		LoadRecords: func(context.Context, []int64) (map[int64]string, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	uidx, err := kura.NewUniqueIndex(rec, kura.UniqueIndexOptions[string, int64, string]{
		Prefix:     "items:sku:",
		Key:        ukey,
		LoadID:     func(context.Context, string) (int64, error) { return 0, kura.ErrNotFound },
		LoadRecord: func(context.Context, int64) (string, error) { return "", kura.ErrNotFound },
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec, idx, uidx
}

func keysOf(t *testing.T, m *cdc.Mapping, c *cdc.Change) []string {
	t.Helper()
	k, err := m.Keys(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(k)
	return slices.Compact(k)
}

func txt(s string) cdc.Value { return cdc.Value{Text: s} }

// TestMappingFollowsTheViewsKeyFunction: the rules take their keys from
// the views (Keyed, Index, UniqueIndex), so changing a view's key
// function changes cdc's keys.
func TestMappingFollowsTheViewsKeyFunction(t *testing.T) {
	for _, tc := range []struct {
		key  func(int64) string
		ukey func(string) string
		want []string
	}{
		{nil, nil, []string{"item:7", "items:cat:a", "items:cat:b", "items:sku:x-1", "items:sku:x-2"}},
		{func(id int64) string { return fmt.Sprintf("v2:%08d", id) }, func(s string) string { return "v2:" + strings.ToUpper(s) },
			[]string{"item:v2:00000007", "items:cat:a", "items:cat:b", "items:sku:v2:X-1", "items:sku:v2:X-2"}},
	} {
		rec, idx, uidx := viewsWithUnique(t, tc.key, tc.ukey)
		r1, err := cdc.Record("items", "id", rec)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := cdc.IndexOf("items", "category", idx)
		if err != nil {
			t.Fatal(err)
		}
		r3, err := cdc.UniqueIndexOf("items", "sku", uidx)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cdc.NewMapping(r1, r2, r3)
		if err != nil {
			t.Fatal(err)
		}
		// An UPDATE that moves row 7 from category a to b and from sku
		// x-1 to x-2.
		got := keysOf(t, m, &cdc.Change{Table: "public.items", Op: cdc.Update,
			Old: cdc.Row{"id": txt("7"), "category": txt("a"), "sku": txt("x-1")},
			New: cdc.Row{"id": txt("7"), "category": txt("b"), "sku": txt("x-2")}})
		if !slices.Equal(got, tc.want) {
			t.Errorf("keys %v, want %v", got, tc.want)
		}
		for _, want := range []string{rec.Key(7), uidx.IDs().Key("x-1"), uidx.IDs().Key("x-2")} {
			if !slices.Contains(got, want) {
				t.Errorf("the view reads %q, cdc invalidates %v", want, got)
			}
		}
		p := m.Prefixes("items")
		if len(p) != 3 || p[1] != "items:cat:" || !strings.HasPrefix(p[2], "items:sku:") {
			t.Fatalf("prefixes %v", p)
		}
		for _, id := range []int64{0, 7, 1_000_000_000, -5} {
			if !strings.HasPrefix(rec.Key(id), p[0]) {
				t.Errorf("a TRUNCATE walks %q and would miss %q", p[0], rec.Key(id))
			}
		}
		for _, sku := range []string{"", "x-1", "Zz 9"} {
			if !strings.HasPrefix(uidx.IDs().Key(sku), p[2]) {
				t.Errorf("a TRUNCATE walks %q and would miss %q", p[2], uidx.IDs().Key(sku))
			}
		}
	}
}

func TestKeysOfEveryImage(t *testing.T) {
	rec, idx := views(t, nil)
	r1, _ := cdc.Record("items", "id", rec)
	r2, _ := cdc.IndexOf("items", "category", idx)
	m, _ := cdc.NewMapping(r1, r2)
	// No old image (identity unchanged): the new row's keys.
	got := keysOf(t, m, &cdc.Change{Table: "public.items", Op: cdc.Update, New: cdc.Row{"id": txt("1"), "category": txt("a")}})
	if !slices.Equal(got, []string{"item:1", "items:cat:a"}) {
		t.Errorf("update without old image: %v", got)
	}
	// A NULL index value has no list.
	got = keysOf(t, m, &cdc.Change{Table: "public.items", Op: cdc.Insert, New: cdc.Row{"id": txt("1"), "category": {Null: true}}})
	if !slices.Equal(got, []string{"item:1"}) {
		t.Errorf("insert with NULL category: %v", got)
	}
	// An unchanged TOAST key column is taken from the old image.
	got = keysOf(t, m, &cdc.Change{Table: "public.items", Op: cdc.Update,
		Old: cdc.Row{"id": txt("1"), "category": txt("a")}, New: cdc.Row{"id": txt("1"), "category": {Unknown: true}}})
	if !slices.Equal(got, []string{"item:1", "items:cat:a"}) {
		t.Errorf("toast: %v", got)
	}
	// Missing from both: the caller must invalidate the table whole.
	if _, err := m.Keys(nil, &cdc.Change{Table: "public.items", Op: cdc.Update, New: cdc.Row{"id": txt("1"), "category": {Unknown: true}}}); err == nil {
		t.Error("a key column missing from both images gave keys")
	}
	// A partial old image (Debezium's, unchecked): a column the rules read
	// that the old image lacks may have changed, so it is never taken from
	// the new image; the table is invalidated whole. The record's own key
	// column, present, still gives keys.
	for name, old := range map[string]cdc.Row{"no old image": nil, "category not sent": {"id": txt("1"), "category": {Unknown: true}}, "category missing": {"id": txt("1")}} {
		c := &cdc.Change{Table: "public.items", Op: cdc.Update, Old: old, New: cdc.Row{"id": txt("1"), "category": txt("coffee")}, OldPartial: true}
		if k, err := m.Keys(nil, c); err == nil {
			t.Errorf("partial old image, %s: keys %v, want the table invalidated whole (the old list items:cat:<old> is unknown)", name, k)
		}
	}
	got = keysOf(t, m, &cdc.Change{Table: "public.items", Op: cdc.Update, OldPartial: true,
		Old: cdc.Row{"id": txt("1"), "category": txt("tea")}, New: cdc.Row{"id": txt("1"), "category": txt("coffee")}})
	slices.Sort(got)
	if got = slices.Compact(got); !slices.Equal(got, []string{"item:1", "items:cat:coffee", "items:cat:tea"}) {
		t.Errorf("partial old image that carries the column: %v", got)
	}
	// An id that does not parse as the view's id type is an error, not a wrong key.
	if _, err := m.Keys(nil, &cdc.Change{Table: "public.items", Op: cdc.Delete, Old: cdc.Row{"id": txt("x1"), "category": txt("a")}}); err == nil {
		t.Error("a non-integer id made a key")
	}
	// Unmapped tables give nothing.
	if k, err := m.Keys(nil, &cdc.Change{Table: "public.other", Op: cdc.Insert, New: cdc.Row{"id": txt("1")}}); err != nil || len(k) != 0 {
		t.Errorf("unmapped table: %v %v", k, err)
	}
}

func TestTemplate(t *testing.T) {
	r, err := cdc.Template("orders", "order:{shop}:{id}")
	if err != nil {
		t.Fatal(err)
	}
	if r.Prefix != "order:" || !slices.Equal(r.Columns, []string{"shop", "id"}) {
		t.Fatalf("%+v", r)
	}
	k, ok, err := r.Key([]string{"s1", "9"})
	if k != "order:s1:9" || !ok || err != nil {
		t.Fatalf("%q %v %v", k, ok, err)
	}
	for _, bad := range []string{"", "{id}", "order:{", "order:}", "order:{}", "order:{a b}", "plain"} {
		if _, err := cdc.Template("orders", bad); err == nil {
			t.Errorf("template %q accepted", bad)
		}
	}
}

func TestNewMappingRefusesIncompleteRules(t *testing.T) {
	if _, err := cdc.NewMapping(); err == nil {
		t.Error("empty mapping accepted")
	}
	if _, err := cdc.NewMapping(cdc.Rule{Table: "t", Columns: []string{"id"}, Key: func([]string) (string, bool, error) { return "", false, nil }}); err == nil || !strings.Contains(err.Error(), "Prefix") {
		t.Errorf("rule without prefix: %v", err)
	}
	type odd struct{ A, B int }
	s, _ := memstore.New(memstore.Options{})
	c, _ := kura.New[string](s, kura.Options{})
	v, _ := kura.NewKeyed[odd, string](c, kura.KeyedOptions[odd]{Prefix: "odd:"})
	if _, err := cdc.Record("t", "id", v); err == nil {
		t.Error("Record of a struct id type without a parser accepted")
	}
	_ = errors.New
}

func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"item:{id}", "a:{x}:{y}:z", "{", "}{", "x{{}}", "é:{ñ}"} {
		f.Add(s, "v1", "v2")
	}
	f.Fuzz(func(t *testing.T, tmpl, a, b string) {
		r, err := cdc.Template("t", tmpl)
		if err != nil {
			return
		}
		vals := []string{a, b}
		for len(vals) < len(r.Columns) {
			vals = append(vals, a)
		}
		k, _, err := r.Key(vals[:len(r.Columns)])
		if err != nil || !strings.HasPrefix(k, r.Prefix) {
			t.Fatalf("template %q: key %q lacks prefix %q (%v)", tmpl, k, r.Prefix, err)
		}
	})
}
