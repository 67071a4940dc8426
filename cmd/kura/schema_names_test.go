package main

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	kuralib "github.com/kuracache/kura"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/storeurl"
)

// TestInspectNamesPublishedSchema: kura inspect shows a struct a compact
// writer stored as an array with its field names once the writer
// published the type's schema, and --mask applies to those names; before
// that, the arrays and a note saying the schema is not published.
func TestInspectNamesPublishedSchema(t *testing.T) {
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
	c, err := kuralib.New[goldenDoc](st, kuralib.Options{Envelope: kuralib.EnvelopeCompactPositional})
	if err != nil {
		t.Fatal(err)
	}
	doc := goldenDoc{ID: 7, Title: "寿司の話", Email: "someone@example.com", Tags: []string{"food"}, Body: "b"}
	if err := c.Set(ctx, "compact:1", doc, kuralib.NoExpiry); err != nil {
		t.Fatal(err)
	}
	report := func() (map[string]any, string, string) {
		out, _, err := kura(t, "inspect", r.URL(), "compact:1", "--json", "--mask", "email")
		if err != nil {
			t.Fatal(err)
		}
		var reps []struct {
			Value json.RawMessage `json:"value"`
			Note  string          `json:"note"`
		}
		if err := json.Unmarshal([]byte(out), &reps); err != nil || len(reps) != 1 {
			t.Fatalf("inspect --json: %v\n%s", err, out)
		}
		var m map[string]any
		_ = json.Unmarshal(reps[0].Value, &m)
		return m, string(reps[0].Value), reps[0].Note
	}
	// Before: the arrays, and --mask has no names to match, so every field
	// value is hidden (the e-mail address is in none of them).
	if m, v, note := report(); m != nil || !strings.HasPrefix(v, "[") || !strings.Contains(note, "not published") ||
		strings.Contains(v, "someone@example.com") || strings.Contains(v, "寿司") || !strings.Contains(v, `"***"`) {
		t.Fatalf("before publishing: value %s, note %q", v, note)
	}
	reg, err := dictstore.New(dictstore.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PublishSchema(ctx, reflect.TypeFor[goldenDoc]()); err != nil {
		t.Fatal(err)
	}
	m, v, note := report()
	if m["title"] != doc.Title || m["email"] != "***" || m["id"] != float64(7) || strings.Contains(v, "someone@example.com") || !strings.Contains(note, "published") {
		t.Fatalf("after publishing: value %s, note %q", v, note)
	}
}
