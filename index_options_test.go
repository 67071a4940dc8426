package kura

import (
	"context"
	"testing"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store/memstore"
)

// TestIndexOptionsFilled pins what NewIndex and NewUniqueIndex fill in and
// refuse, the same way for both (newSide): each default, the inherited
// TTL and options, the side's codec, and every error's words.
func TestIndexOptionsFilled(t *testing.T) {
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rcodec, err := codec.New(codec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New[string](s, Options{Name: "items", Codec: rcodec})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := NewKeyed[int64, string](c, KeyedOptions[int64]{Prefix: "r:", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	loadIDs := func(context.Context, string) ([]int64, error) { return nil, nil }
	loadRecs := func(context.Context, []int64) (map[int64]string, error) { return nil, nil }
	loadID := func(context.Context, string) (int64, error) { return 0, nil }
	loadRec := func(context.Context, int64) (string, error) { return "", nil }

	idx, err := NewIndex(recs, IndexOptions[string, int64, string]{LoadIDs: loadIDs, LoadRecords: loadRecs})
	if err != nil {
		t.Fatal(err)
	}
	if got := idx.Name(); got != "items-index" {
		t.Errorf("Index name %q, want items-index", got)
	}
	if got := idx.Lists().Key("a"); got != "idx:a" {
		t.Errorf("Index key %q, want idx:a", got)
	}
	if got := idx.Lists().TTL(); got != time.Minute {
		t.Errorf("Index TTL %v, want the records' 1m0s", got)
	}
	if lc := idx.Lists().Cache(); lc.opts.Codec == nil || lc.opts.Codec == rcodec || lc.Store() != s {
		t.Errorf("Index over int64 ids: codec %p (records' %p), want its own id-list codec over the records' store", lc.opts.Codec, rcodec)
	}
	type sid struct{ A, B int }
	sidRecs, _ := NewKeyed[sid, string](c, KeyedOptions[sid]{Prefix: "s:"})
	sidx, err := NewIndex(sidRecs, IndexOptions[string, sid, string]{Name: "by-pair", Prefix: "p:", TTL: time.Second,
		LoadIDs:     func(context.Context, string) ([]sid, error) { return nil, nil },
		LoadRecords: func(context.Context, []sid) (map[sid]string, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if sidx.Name() != "by-pair" || sidx.Lists().Key("a") != "p:a" || sidx.Lists().TTL() != time.Second || sidx.Lists().Cache().opts.Codec != rcodec {
		t.Errorf("Index over struct ids: name %q key %q TTL %v, codec is the records' %v",
			sidx.Name(), sidx.Lists().Key("a"), sidx.Lists().TTL(), sidx.Lists().Cache().opts.Codec == rcodec)
	}

	u, err := NewUniqueIndex(recs, UniqueIndexOptions[string, int64, string]{LoadID: loadID, LoadRecord: loadRec})
	if err != nil {
		t.Fatal(err)
	}
	if ic := u.ids.Cache(); ic.Name() != "items-unique" || u.ids.Key("a") != "uidx:a" || u.ids.TTL() != time.Minute || ic.opts.Codec == rcodec {
		t.Errorf("UniqueIndex: name %q key %q TTL %v codec %p, want items-unique, uidx:a, 1m0s, the default codec (not the records' %p)",
			ic.Name(), u.ids.Key("a"), u.ids.TTL(), ic.opts.Codec, rcodec)
	}

	for _, tc := range []struct {
		err  error
		want string
	}{
		{second(NewIndex[string](nil, IndexOptions[string, int64, string]{})), "kura: NewIndex needs the records' Keyed view"},
		{second(NewIndex(recs, IndexOptions[string, int64, string]{LoadRecords: loadRecs})), "kura: IndexOptions.LoadIDs is required"},
		{second(NewIndex(recs, IndexOptions[string, int64, string]{LoadIDs: loadIDs})), "kura: IndexOptions.LoadRecords is required"},
		{second(NewIndex(recs, IndexOptions[string, int64, string]{Prefix: "r:", LoadIDs: loadIDs, LoadRecords: loadRecs})),
			`kura: IndexOptions.Prefix "r:" is the records' prefix; id lists and records need their own keys`},
		{second(NewIndex(recs, IndexOptions[string, int64, string]{TTL: -2, LoadIDs: loadIDs, LoadRecords: loadRecs})),
			"kura: IndexOptions.TTL must not be negative, got -2ns"},
		{second(NewUniqueIndex[string](nil, UniqueIndexOptions[string, int64, string]{})), "kura: NewUniqueIndex needs the records' Keyed view"},
		{second(NewUniqueIndex(recs, UniqueIndexOptions[string, int64, string]{LoadID: loadID})), "kura: UniqueIndexOptions.LoadID and LoadRecord are required"},
		{second(NewUniqueIndex(recs, UniqueIndexOptions[string, int64, string]{Prefix: "r:", LoadID: loadID, LoadRecord: loadRec})),
			`kura: UniqueIndexOptions.Prefix "r:" is the records' prefix`},
		{second(NewUniqueIndex(recs, UniqueIndexOptions[string, int64, string]{TTL: -2, LoadID: loadID, LoadRecord: loadRec})),
			"kura: UniqueIndexOptions.TTL must not be negative, got -2ns"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("got error %v, want %q", tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }
