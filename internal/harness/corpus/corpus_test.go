package corpus

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestArticleDeterministic(t *testing.T) {
	a := Articles(7, 5)
	b := Articles(7, 5)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different articles")
	}
	if !reflect.DeepEqual(a[3], NewArticle(7, 3)) {
		t.Fatal("NewArticle(seed, i) differs from Articles(seed, n)[i]")
	}
	if reflect.DeepEqual(NewArticle(7, 0), NewArticle(8, 0)) {
		t.Fatal("different seeds gave the same article")
	}
}

func TestArticleSizesAndMix(t *testing.T) {
	const n = 300
	ja := 0
	for i, a := range Articles(1, n) {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 10_000 || len(b) > 20_480 {
			t.Errorf("article %d is %d bytes of JSON, want 10-20 KB", i, len(b))
		}
		if a.Language == "ja" {
			ja++
		}
		if a.Title == "" || a.Author.Name == "" || len(a.Body) < 4 || len(a.Images) == 0 || a.UpdatedAt.Before(a.PublishedAt) {
			t.Errorf("article %d is missing fields: %+v", i, a)
		}
	}
	if ja < n/2 || ja == n {
		t.Errorf("%d of %d articles are Japanese; want a majority, not all", ja, n)
	}
}

func TestInventory(t *testing.T) {
	items := Inventory(1, 42, 20)
	if !reflect.DeepEqual(items, Inventory(1, 42, 20)) {
		t.Fatal("not deterministic")
	}
	total := 0
	for _, it := range items {
		if it.UserID != 42 {
			t.Fatalf("user id %d", it.UserID)
		}
		b, _ := json.Marshal(it)
		total += len(b)
	}
	if avg := total / len(items); avg < 200 || avg > 400 {
		t.Errorf("average item is %d bytes of JSON, want about 300", avg)
	}
}

func BenchmarkNewArticle(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		NewArticle(1, i)
	}
}
