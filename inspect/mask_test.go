package inspect_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/inspect"
)

// TestMaskMatchesGoFieldNames: kura's default msgpack of a Go struct
// stores Email and Phone; --mask email,phone must hide them, and a mask
// name that matches nothing is reported.
func TestMaskMatchesGoFieldNames(t *testing.T) {
	type person struct {
		Name  string
		Email string
		Phone string
		Inner struct{ EMAIL string }
	}
	c, _ := codec.New(codec.Options{})
	p := person{Name: "alice", Email: "alice@example.com", Phone: "+81 3 1234 5678"}
	p.Inner.EMAIL = "inner@example.com"
	raw, _, err := c.Encode(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	r := inspect.Bytes("user:1", raw, inspect.Options{Mask: []string{"email", "phone", "ssn"}})
	v := string(r.Value)
	for _, secret := range []string{"alice@example.com", "+81 3", "inner@example.com"} {
		if strings.Contains(v, secret) {
			t.Errorf("masked field shown: %s", v)
		}
	}
	if !strings.Contains(v, "alice") || !reflect.DeepEqual(r.MaskUnmatched, []string{"ssn"}) {
		t.Errorf("value %s, unmatched %v", v, r.MaskUnmatched)
	}
}
