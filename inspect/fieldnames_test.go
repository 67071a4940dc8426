package inspect_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/inspect"
	"github.com/kuracache/kura/store/memstore"
)

// TestDefaultEntriesNameFields: what kura.New writes with zero Options
// (version 3, structs with their names) is shown with the names of the
// field-name rule (docs/FORMAT.md, "Field names"), with no published
// schema: json tags for a struct written for encoding/json, Go names for
// an untagged one. kura ui shows inspect's reports.
func TestDefaultEntriesNameFields(t *testing.T) {
	type jsonTagged struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	type untagged struct {
		ID   int
		Name string
	}
	ctx := context.Background()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := kura.New[jsonTagged](st, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := kura.New[untagged](st, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Set(ctx, "a", jsonTagged{1, "lamp"}, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(ctx, "b", untagged{1, "lamp"}, 0); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]map[string]any{
		"a": {"id": 1.0, "name": "lamp"},
		"b": {"ID": 1.0, "Name": "lamp"},
	} {
		raw, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		rep := inspect.Bytes(key, raw, inspect.Options{})
		var got map[string]any
		if err := json.Unmarshal(rep.Value, &got); err != nil || rep.Kura == nil || rep.Kura.Version != 3 || rep.Kura.Serializer != "msgpack" {
			t.Fatalf("%s: %+v (%v)", key, rep, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: shown as %s, want %v", key, rep.Value, want)
		}
	}
}
