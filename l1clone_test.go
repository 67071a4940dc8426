package kura_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store/memstore"
)

type sharedTags struct{ Tags []string }

type clonedTags struct{ Tags []string }

func (v clonedTags) Clone() clonedTags { v.Tags = slices.Clone(v.Tags); return v }

// TestL1HitClones: a value type that implements kura.Cloner gets a copy
// on every L1 hit (a caller that changes it changes no other caller's
// value); any other type's hits share the value the L1 holds.
func TestL1HitClones(t *testing.T) {
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	l1 := kura.Options{L1: kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: time.Minute}}

	cc, err := kura.New[clonedTags](m, l1)
	if err != nil {
		t.Fatal(err)
	}
	load := func(context.Context, string) (clonedTags, error) { return clonedTags{Tags: []string{"a", "b"}}, nil }
	// The load, then the store read that fills the L1: neither is an L1
	// hit, and the filling read's caller holds the value the L1 keeps.
	// The filling read's caller changes its value too: the L1 holds a
	// copy of its own.
	for range 2 {
		v, err := cc.Fetch(ctx, "cloned", time.Minute, load)
		if err != nil {
			t.Fatal(err)
		}
		v.Tags[1] = "changed by the filling caller"
	}
	a, err := cc.Fetch(ctx, "cloned", time.Minute, load)
	if err != nil {
		t.Fatal(err)
	}
	a.Tags[0] = "changed by a caller"
	b, err := cc.Fetch(ctx, "cloned", time.Minute, load)
	if err != nil || b.Tags[0] != "a" || b.Tags[1] != "b" {
		t.Fatalf("a Cloner's L1 hit after another caller changed its copy: %v, %v; want a fresh copy", b.Tags, err)
	}
	if cc.Stats().L1.Hits < 2 {
		t.Fatalf("L1 hits %d, want the two reads served by the L1", cc.Stats().L1.Hits)
	}

	sc, err := kura.New[sharedTags](m, l1)
	if err != nil {
		t.Fatal(err)
	}
	loadS := func(context.Context, string) (sharedTags, error) { return sharedTags{Tags: []string{"a", "b"}}, nil }
	for range 2 {
		if _, err := sc.Fetch(ctx, "shared", time.Minute, loadS); err != nil {
			t.Fatal(err)
		}
	}
	x, _ := sc.Fetch(ctx, "shared", time.Minute, loadS)
	y, _ := sc.Fetch(ctx, "shared", time.Minute, loadS)
	if &x.Tags[0] != &y.Tags[0] {
		t.Fatal("two L1 hits of a type without Clone hold different slices; want the one value shared")
	}
}

type clonedPtr struct{ Tags []string }

func (p *clonedPtr) Clone() *clonedPtr { c := *p; c.Tags = slices.Clone(p.Tags); return &c }

// TestL1ClonerNilPointer: a key cached as a nil pointer of a Cloner type
// (the loader returned nil and no error) reads as nil, through the L1
// too. Clone, with its pointer receiver, dereferenced the nil: every read
// after the first panicked, in the fill of the L1.
func TestL1ClonerNilPointer(t *testing.T) {
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	c, err := kura.New[*clonedPtr](m, kura.Options{L1: kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	load := func(context.Context, string) (*clonedPtr, error) { return nil, nil }
	for i := range 3 {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("read %d of a key cached as a nil pointer panicked: %v", i, p)
				}
			}()
			if v, err := c.Fetch(ctx, "nil", time.Minute, load); v != nil || err != nil {
				t.Fatalf("read %d: %v, %v; want nil, nil", i, v, err)
			}
		}()
	}
	if c.Stats().L1.Hits == 0 {
		t.Fatal("no L1 hit: the nil value was not kept")
	}
	// A value that is not nil is still copied on every hit.
	if err := c.Set(ctx, "v", &clonedPtr{Tags: []string{"a"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		v, err := c.Fetch(ctx, "v", time.Minute, load)
		if err != nil || v == nil || v.Tags[0] != "a" {
			t.Fatalf("%v, %v", v, err)
		}
		v.Tags[0] = "changed"
	}
}
