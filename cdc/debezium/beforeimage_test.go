package debezium

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kuracache/kura/cdc"
)

// changes is a cdc.Handler that records the changes handed to it and
// confirms each commit at once.
type changes struct {
	s   *KafkaSource
	got []cdc.Change
}

func (h *changes) Change(c *cdc.Change) error { h.got = append(h.got, *c); return nil }
func (h *changes) Truncate([]string) error    { return nil }
func (h *changes) Commit(pos cdc.Position, _ time.Time) error {
	h.s.Confirm(pos)
	return nil
}
func (h *changes) Idle(pos cdc.Position) error { h.s.Confirm(pos); return nil }
func (h *changes) Reset(string) error          { return nil }

// TestUncheckedBeforeImageIsPartial: without a checked replica identity,
// an UPDATE's before image (null under PostgreSQL's REPLICA IDENTITY
// DEFAULT) does not say the index column was unchanged. The change goes to
// cdc marked OldPartial, with the record key's columns as the old image,
// so a rule on another column invalidates the table instead of missing
// the old list (moving item 1 from tea to coffee left items:cat:tea; the
// mapping's side is TestKeysOfEveryImage in cdc).
func TestUncheckedBeforeImageIsPartial(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	update := Event{Message: Message{
		Kind: KindChange,
		Key:  Row{"id": raw("1")},
		Change: &Change{Op: OpUpdate, Before: nil,
			After:  Row{"id": raw("1"), "category": raw(`"coffee"`)},
			Source: Source{Schema: "public", Table: "items"}},
	}}
	for _, checked := range []bool{false, true} {
		s := &KafkaSource{notify: make(chan struct{})}
		if checked {
			s.cfg.CheckBeforeImage = func(context.Context) error { return nil }
		}
		h := &changes{s: s}
		if err := (&sourceApplier{s: s, h: h}).Apply(context.Background(), []Event{update}); err != nil {
			t.Fatal(err)
		}
		if len(h.got) != 1 {
			t.Fatalf("checked=%v: %d changes, want 1", checked, len(h.got))
		}
		c := h.got[0]
		if c.OldPartial == checked {
			t.Errorf("checked=%v: OldPartial %v", checked, c.OldPartial)
		}
		if !checked && (c.Old["id"].Text != "1" || c.Old["id"].Unknown) {
			t.Errorf("unchecked: the old image lacks the record key's id: %+v", c.Old)
		}
	}
}
