package dictstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// Published schemas (docs/FORMAT.md, "Published schemas").
//
// A writer with kura.EnvelopeCompactPositional stores a struct as the array of
// its field values, keyed by its type's schema fingerprint: its own
// readers decode it by position, but a reader without the Go type (kura
// inspect, kura ui, the Node package) sees arrays. PublishSchema puts the
// type's description (codec.SchemaOf) under the reserved key
// SchemaKeyPrefix + the fingerprint in 8 hex digits, on every server as
// Publish does; Schema finds it by the fingerprint an entry carries,
// checks that the description hashes to it, and parses it, so the reader
// can name the fields (codec.Schema.Named).
//
// The fingerprint is a 32-bit FNV-1a, not a cryptographic hash: anybody
// who can write to the servers can publish another description with the
// same fingerprint, as they can write any entry. A wrong description can
// only mislabel what a tool shows (Named refuses values of another
// shape); it never changes what a Go reader with the type decodes.

// DefaultSchemaKeyPrefix starts the reserved keys of published schemas.
const DefaultSchemaKeyPrefix = "kura:schema:"

// ErrSchemaNotPublished is matched by the error for a fingerprint no
// server holds a description of (or only one that does not hash to it
// or does not parse).
var ErrSchemaNotPublished = errors.New("kura: dictstore: schema not published on any server")

// maxSchemas bounds the descriptions a Registry keeps from the servers.
const maxSchemas = 1024

type heldSchema struct {
	desc   string
	schema *codec.Schema
	pinned bool
}

// SchemaKey returns the reserved key of the schema with fingerprint fp
// (before NodeKeys spreads it over the servers).
func (r *Registry) SchemaKey(fp uint32) string {
	return fmt.Sprintf("%s%08x", r.opts.SchemaKeyPrefix, fp)
}

// PublishSchema writes the description of t (msgpack field names: the
// codec's default serializer) under its fingerprint's reserved key on
// every server, and keeps it published (Republish, Run). It returns the
// fingerprint, the one a Cache of t writes in every entry. A type whose
// description a reader could not name fields from is refused
// (codec.PublishableSchema).
func (r *Registry) PublishSchema(ctx context.Context, t reflect.Type) (uint32, error) {
	desc, err := codec.PublishableSchema(t, "msgpack")
	if err != nil {
		return 0, err
	}
	if len(desc) > min(r.opts.MaxSize, codec.MaxSchemaLen) {
		return 0, fmt.Errorf("kura: dictstore: schema of %v: %d bytes, over the limit (%d)", t, len(desc), min(r.opts.MaxSize, codec.MaxSchemaLen))
	}
	s, err := codec.ParseSchema(desc)
	if err != nil {
		return 0, fmt.Errorf("kura: dictstore: schema of %v: %w", t, err)
	}
	fp := codec.SchemaFingerprint(desc)
	r.mu.Lock()
	r.schemas[fp] = &heldSchema{desc: desc, schema: s, pinned: true}
	delete(r.schemaNeg, fp)
	if !slices.Contains(r.pubSchemas, fp) {
		r.pubSchemas = append(r.pubSchemas, fp)
	}
	r.mu.Unlock()
	keys, err := r.nodeKeysOf(ctx, r.SchemaKey(fp))
	if err != nil {
		return fp, fmt.Errorf("kura: dictstore: publish schema %08x: %w", fp, err)
	}
	items := make([]store.Item, len(keys))
	for i, k := range keys {
		items[i] = store.Item{Key: k, Value: []byte(desc)}
	}
	if err := store.SetMany(ctx, r.opts.Store, items); err != nil {
		return fp, fmt.Errorf("kura: dictstore: publish schema %08x on %d server(s): %w", fp, len(keys), err)
	}
	return fp, nil
}

// Schema returns the parsed description of the schema with fingerprint
// fp: one this Registry published or read before, or read from the
// servers now (waiting at most Options.FetchTimeout and ctx; a
// fingerprint found nowhere is answered from memory for
// Options.NegativeTTL). Only a description that hashes to fp and parses
// is accepted. Errors match ErrSchemaNotPublished, or are ctx's.
func (r *Registry) Schema(ctx context.Context, fp uint32) (*codec.Schema, error) {
	r.mu.Lock()
	if h, ok := r.schemas[fp]; ok {
		r.mu.Unlock()
		return h.schema, nil
	}
	if until, ok := r.schemaNeg[fp]; ok && time.Now().Before(until) {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %08x (looked up recently)", ErrSchemaNotPublished, fp)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	defer cancel()
	desc, s, err := r.readSchema(ctx, fp)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.opts.NegativeTTL > 0 {
			r.schemaNeg[fp] = time.Now().Add(r.opts.NegativeTTL)
			if len(r.schemaNeg) > 4096 {
				clear(r.schemaNeg)
			}
		}
		return nil, err
	}
	if len(r.schemas) >= maxSchemas {
		for k, h := range r.schemas {
			if !h.pinned {
				delete(r.schemas, k)
				break
			}
		}
	}
	r.schemas[fp] = &heldSchema{desc: desc, schema: s}
	return s, nil
}

// readSchema reads fp's node keys and returns the first description that
// hashes to fp and parses.
func (r *Registry) readSchema(ctx context.Context, fp uint32) (string, *codec.Schema, error) {
	keys, err := r.nodeKeysOf(ctx, r.SchemaKey(fp))
	if err != nil {
		return "", nil, fmt.Errorf("%w: %08x: %w", ErrSchemaNotPublished, fp, err)
	}
	vals, _, err := r.getBounded(ctx, keys)
	if err != nil && !isBatchErr(err) {
		return "", nil, fmt.Errorf("%w: %08x: %w", ErrSchemaNotPublished, fp, err)
	}
	for _, v := range vals {
		if v == nil || len(v) > codec.MaxSchemaLen || codec.SchemaFingerprint(string(v)) != fp {
			continue
		}
		if s, perr := codec.ParseSchema(string(v)); perr == nil {
			return string(v), s, nil
		}
	}
	return "", nil, fmt.Errorf("%w: %08x on %d key(s)", ErrSchemaNotPublished, fp, len(keys))
}

// PublishedSchemas returns the fingerprints this Registry keeps
// published.
func (r *Registry) PublishedSchemas() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pubSchemas)
}
