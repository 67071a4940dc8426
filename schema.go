package kura

import (
	"time"

	"github.com/kuracache/kura/codec"
)

// tooYoungToOverwrite reports whether an entry of another type (h is its
// header) was written less than Options.SchemaGrace ago. A write time
// further in the future than the grace is not believed (a skewed clock or
// a hostile value must not pin a key).
func (c *Cache[V]) tooYoungToOverwrite(h codec.Header) bool {
	written := h.Fields.Written
	if written.IsZero() || c.opts.SchemaGrace < 0 {
		return false
	}
	age := time.Since(written)
	return age < c.opts.SchemaGrace && age > -c.opts.SchemaGrace
}
