package dictstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/storeurl"
)

// TestPublishedSchemaNamesCompactEntries: a writer with the compact
// envelope stores Items as arrays and publishes the type's schema; a
// reader with no Go type (as kura inspect is) finds the schema by the
// entry's fingerprint on a real Redis and gets the field names back. A
// forged description under the key, an evicted key and a value of
// another shape are handled as documented.
func TestPublishedSchemaNamesCompactEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	srv := servertest.Redis(t, servers.RedisConfig{})
	open := func() *dictstore.Registry {
		st, err := storeurl.Open(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		reg, err := dictstore.New(dictstore.Options{Store: st, NegativeTTL: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	writer := open()
	st, err := storeurl.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := kura.New[corpus.Item](st, kura.Options{Envelope: kura.EnvelopeCompactPositional})
	if err != nil {
		t.Fatal(err)
	}
	item := corpus.Inventory(1, 1, 1)[0]
	if err := c.Set(ctx, "item:1", item, time.Minute); err != nil {
		t.Fatal(err)
	}
	raw, err := srv.Do(ctx, "GET", "item:1")
	if err != nil {
		t.Fatal(err)
	}
	entry := []byte(raw)
	h, err := codec.ParseHeader(entry)
	if err != nil || h.Serializer != codec.IDMsgPackArray || !h.Fields.HasSchema {
		t.Fatalf("entry header %+v, %v: want a msgpack-array entry with a fingerprint", h, err)
	}
	fp, err := writer.PublishSchema(ctx, reflect.TypeFor[corpus.Item]())
	if err != nil {
		t.Fatal(err)
	}
	if fp != h.Fields.Schema {
		t.Fatalf("published fingerprint %08x, the entry carries %08x", fp, h.Fields.Schema)
	}

	// A reader that has never seen the type.
	reader := open()
	s, err := reader.Schema(ctx, fp)
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := codec.New(codec.Options{})
	var arr any
	if _, err := dec.Decode(entry, &arr); err != nil {
		t.Fatal(err)
	}
	named, err := s.Named(arr)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(named)
	var back corpus.Item
	if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, item) {
		t.Fatalf("named value %s does not decode back to the item (%v)", got, err)
	}

	// A forged description under the key: does not hash to the
	// fingerprint, never used.
	other := open()
	if _, err := srv.Do(ctx, "SET", writer.SchemaKey(fp), `{"password":int}`); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Schema(ctx, fp); !errors.Is(err, dictstore.ErrSchemaNotPublished) {
		t.Fatalf("forged description: %v, want ErrSchemaNotPublished", err)
	}
	// Republish writes the real one back (and an evicted one).
	if n, err := writer.Republish(ctx); err != nil || n != 1 {
		t.Fatalf("Republish after the forgery: %d keys, %v", n, err)
	}
	if _, err := srv.Do(ctx, "DEL", writer.SchemaKey(fp)); err != nil {
		t.Fatal(err)
	}
	if n, err := writer.Republish(ctx); err != nil || n != 1 {
		t.Fatalf("Republish after eviction: %d keys, %v", n, err)
	}
	time.Sleep(5 * time.Millisecond) // other's negative entry expires
	if _, err := other.Schema(ctx, fp); err != nil {
		t.Fatalf("after Republish: %v", err)
	}
	if got := writer.PublishedSchemas(); len(got) != 1 || got[0] != fp {
		t.Fatalf("PublishedSchemas %v", got)
	}
	// An unknown fingerprint.
	if _, err := other.Schema(ctx, fp^1); !errors.Is(err, dictstore.ErrSchemaNotPublished) {
		t.Fatalf("unknown fingerprint: %v", err)
	}
	// A value of another shape than the schema is refused, not named.
	if _, err := s.Named([]any{"too", "short"}); !errors.Is(err, codec.ErrSchemaDescription) {
		t.Fatalf("Named of another shape: %v", err)
	}
}
