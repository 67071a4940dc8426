package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/ui"
)

// TestKeyPageNamesPublishedSchema: with Options.Schemas, the key page of a
// struct a compact writer stored as an array shows its field names (the
// masked one hidden).
func TestKeyPageNamesPublishedSchema(t *testing.T) {
	ctx := context.Background()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kura.New[member](st, kura.Options{Envelope: kura.EnvelopeCompactPositional})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "member:1", member{ID: 1, Name: "sushi-lover", Email: "someone@example.com", Note: "n"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	reg, err := dictstore.New(dictstore.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PublishSchema(ctx, reflect.TypeFor[member]()); err != nil {
		t.Fatal(err)
	}
	page := func(o ui.Options) string {
		o.Store, o.Token, o.Mask = st, token, []string{"email"}
		h, err := ui.New(o)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		req, _ := http.NewRequest("GET", srv.URL+"/key?k=member:1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	named := page(ui.Options{Schemas: reg})
	if !strings.Contains(named, "sushi-lover") || !strings.Contains(named, "name") || strings.Contains(named, "someone@example.com") || !strings.Contains(named, "published") {
		t.Errorf("with Schemas: the page does not show the named, masked value")
	}
	// Without Schemas: the arrays, and with a mask nothing to match it
	// against, so no field value is shown.
	if plain := page(ui.Options{}); strings.Contains(plain, "sushi-lover") || strings.Contains(plain, "someone@example.com") ||
		!strings.Contains(plain, "***") || !strings.Contains(plain, "cannot be matched without field names") {
		t.Errorf("without Schemas: the page shows field values a mask may name")
	}
}
