package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	kuralib "github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/storeurl"
)

// TestInspectDecodesDictionaryValues: kura inspect decodes a value its
// writer compressed with a dictionary by reading the dictionary the
// writer published (dictstore), and --mask applies; a value whose
// dictionary is not published gets a note naming it, not garbage.
func TestInspectDecodesDictionaryValues(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	r := servertest.Redis(t, servers.RedisConfig{})
	st, err := storeurl.Open(ctx, r.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var samples [][]byte
	for i := range 64 {
		p, err := codec.MsgPack().Marshal(nil, goldenDoc{ID: i, Title: fmt.Sprintf("寿司の話 part %d", i), Email: fmt.Sprintf("reader%d@example.com", i), Tags: []string{"food", "fish"}, Body: "salmon, tuna and eel"})
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, p)
	}
	writer := func(d []byte) *kuralib.Cache[goldenDoc] {
		wc, err := codec.New(codec.Options{Compressor: codec.S2(), MinCompressSize: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wc.SetDictionary(d); err != nil {
			t.Fatal(err)
		}
		c, err := kuralib.New[goldenDoc](st, kuralib.Options{Codec: wc})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	published, _, err := codec.TrainS2Dictionary(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	unpublished, id2, err := codec.TrainS2Dictionary(samples[:32], 2<<10)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := dictstore.New(dictstore.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Publish(ctx, published); err != nil {
		t.Fatal(err)
	}
	doc := goldenDoc{ID: 7, Title: "寿司の話 part 7", Email: "someone@example.com", Tags: []string{"food"}, Body: "salmon, tuna and eel"}
	if err := writer(published).Set(ctx, "dict:1", doc, kuralib.NoExpiry); err != nil {
		t.Fatal(err)
	}
	if err := writer(unpublished).Set(ctx, "dict:2", doc, kuralib.NoExpiry); err != nil {
		t.Fatal(err)
	}
	out, _, err := kura(t, "inspect", r.URL(), "dict:1", "dict:2", "--json", "--mask", "email")
	if err != nil {
		t.Fatal(err)
	}
	var reps []struct {
		Kura struct {
			Dictionary uint32 `json:"dictionary"`
		} `json:"kura"`
		Value json.RawMessage `json:"value"`
		Note  string          `json:"note"`
	}
	if err := json.Unmarshal([]byte(out), &reps); err != nil || len(reps) != 2 {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
	var m map[string]any
	_ = json.Unmarshal(reps[0].Value, &m)
	if reps[0].Kura.Dictionary == 0 || m["title"] != doc.Title || m["email"] != "***" || strings.Contains(out, "someone@example.com") {
		t.Errorf("published dictionary: value %s, note %q", reps[0].Value, reps[0].Note)
	}
	if reps[1].Kura.Dictionary != id2 || len(reps[1].Value) != 0 || !strings.Contains(reps[1].Note, fmt.Sprintf("dictionary %d", id2)) {
		t.Errorf("unpublished dictionary: value %s, note %q", reps[1].Value, reps[1].Note)
	}
}
