package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/ui"
)

// TestKeyPageDecodesDictionaryValues: with Options.Dictionaries, the key
// page of a value a writer compressed with a published dictionary shows
// the value (masked); without it, a note naming the dictionary; with a
// forged dictionary under the reserved key, the note again and never
// bytes decoded with the wrong dictionary.
func TestKeyPageDecodesDictionaryValues(t *testing.T) {
	ctx := context.Background()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var samples [][]byte
	for i := range 64 {
		p, err := codec.MsgPack().Marshal(nil, member{ID: i, Name: fmt.Sprintf("member number %d of the sushi club", i), Email: fmt.Sprintf("member%d@example.com", i), Note: "likes salmon and tuna"})
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, p)
	}
	d, _, err := codec.TrainS2Dictionary(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := dictstore.New(dictstore.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	id, err := reg.Publish(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := codec.New(codec.Options{Compact: true, Compressor: codec.S2(), MinCompressSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wc.SetDictionary(d); err != nil {
		t.Fatal(err)
	}
	c, err := kura.New[map[string]any](st, kura.Options{Codec: wc})
	if err != nil {
		t.Fatal(err)
	}
	val := map[string]any{"id": 7, "name": "member number 7 of the sushi club", "email": "someone@example.com", "note": "likes salmon and tuna"}
	if err := c.Set(ctx, "member:7", val, time.Hour); err != nil {
		t.Fatal(err)
	}
	if raw, err := st.Get(ctx, "member:7"); err != nil {
		t.Fatal(err)
	} else if h, err := codec.ParseHeader(raw); err != nil || h.Dict != id {
		t.Fatalf("the writer did not use the dictionary: %+v %v", h, err)
	}
	page := func(o ui.Options) string {
		o.Store, o.Token, o.Mask = st, token, []string{"email"}
		h, err := ui.New(o)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		req, _ := http.NewRequest("GET", srv.URL+"/key?k=member:7", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	// A fresh registry, as kura ui builds one: it holds nothing and reads
	// the published dictionary from the store.
	readerReg := func() *dictstore.Registry {
		r, err := dictstore.New(dictstore.Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if p := page(ui.Options{Dictionaries: readerReg()}); !strings.Contains(p, "member number 7 of the sushi club") || strings.Contains(p, "someone@example.com") {
		t.Errorf("with Dictionaries: the page does not show the decoded, masked value:\n%s", excerpt(p, "member"))
	}
	if p := page(ui.Options{}); strings.Contains(p, "member number 7") || !strings.Contains(p, fmt.Sprintf("dictionary %d", id)) {
		t.Errorf("without Dictionaries: the page does not name the dictionary the value needs:\n%s", excerpt(p, "dictionary"))
	}
	// Forged bytes under the dictionary's key: the digest the value
	// carries refuses them.
	forged := append([]byte(nil), d...)
	forged[len(forged)-1] ^= 0xff
	if err := st.Set(ctx, reg.Key(id), forged, 0); err != nil {
		t.Fatal(err)
	}
	if p := page(ui.Options{Dictionaries: readerReg()}); strings.Contains(p, "member number 7") || !strings.Contains(p, fmt.Sprintf("dictionary %d", id)) {
		t.Errorf("forged dictionary: the page decoded the value or does not say why not:\n%s", excerpt(p, "dictionary"))
	}
}

// excerpt returns the part of a page around the first occurrence of s.
func excerpt(page, s string) string {
	i := strings.Index(page, s)
	if i < 0 {
		return "(" + s + " not on the page)"
	}
	return page[max(0, i-300):min(len(page), i+300)]
}
