package codec

import (
	"errors"
	"fmt"

	"github.com/kuracache/kura/store"
)

// ErrMalformed is matched (with errors.Is) by every error Decode and
// ParseHeader return. A caller that only wants to know "treat this entry as a
// miss and overwrite it" checks this one; the finer sentinels below say why.
var ErrMalformed = errors.New("kura: malformed cached value")

// ErrNotUnderstood is matched by the errors for an entry this reader
// cannot fully understand: a newer format version, an unknown entry kind,
// or an unknown critical field. It does not match ErrMalformed, because
// the rule differs: such an entry is a miss that a reader must not
// overwrite (a newer writer wrote it, and will read it back).
var ErrNotUnderstood = errors.New("kura: cached entry from a newer writer")

// ErrUnsupportedVersion reports an envelope of a format version this
// reader does not know, or one with flag bits it does not understand. It
// matches ErrNotUnderstood.
var ErrUnsupportedVersion = fmt.Errorf("%w: unsupported format version or flags", ErrNotUnderstood)

// Finer decode errors. Each one also matches ErrMalformed.
var (
	// ErrNotKura reports bytes that do not start with the kura magic: a
	// plain string, a JSON document, a gob stream, or a value written by
	// another library such as go-redis/cache.
	ErrNotKura = fmt.Errorf("%w: not a kura envelope (wrong magic)", ErrMalformed)
	// ErrTruncated reports an envelope that ends inside its header or
	// whose payload is shorter than the header says.
	ErrTruncated = fmt.Errorf("%w: truncated", ErrMalformed)
	// ErrUnknownSerializer reports a serializer id this Codec has no
	// Serializer for (see Options.Serializers).
	ErrUnknownSerializer = fmt.Errorf("%w: unknown serializer id", ErrMalformed)
	// ErrUnknownCompressor reports a compressor id this Codec has no
	// Compressor for (see Options.Compressors).
	ErrUnknownCompressor = fmt.Errorf("%w: unknown compressor id", ErrMalformed)
	// ErrUnknownDictionary reports a dictionary id that is not in
	// Options.Dictionaries.
	ErrUnknownDictionary = fmt.Errorf("%w: unknown dictionary id", ErrMalformed)
	// ErrTooLarge reports a header that claims an uncompressed length
	// above Options.MaxDecodedSize: a decompression bomb, or a value from
	// a writer with a larger limit. Nothing is allocated for it.
	ErrTooLarge = fmt.Errorf("%w: uncompressed length exceeds MaxDecodedSize", ErrMalformed)
	// ErrCorrupt reports a payload that does not decompress, or that
	// decompresses (or is stored) at a length other than the header's.
	ErrCorrupt = fmt.Errorf("%w: corrupt payload", ErrMalformed)
	// ErrBomb reports a payload whose length claims or nesting could make
	// a decoder allocate far more than the payload's size, or recurse
	// until the stack overflows (see CheckMsgPack). It is refused before
	// the serializer runs.
	ErrBomb = fmt.Errorf("%w: length claims or nesting beyond what the bytes hold", ErrMalformed)
	// ErrDeserialize reports a payload the serializer could not decode
	// into the destination (wrong type, or invalid bytes).
	ErrDeserialize = fmt.Errorf("%w: cannot deserialize payload", ErrMalformed)
)

// Encode errors. They do not match ErrMalformed: nothing was read.
var (
	// ErrUnsupportedType reports a value a serializer cannot encode or a
	// destination it cannot decode into, such as a struct given to Raw.
	ErrUnsupportedType = errors.New("kura: unsupported type for serializer")
	// ErrValueTooLarge reports a value whose serialized form is larger
	// than Options.MaxDecodedSize: readers with the same limit would
	// refuse it, so it is not written. It is store.ErrValueTooLarge (and
	// kura.ErrValueTooLarge): one sentinel for a value too large, whichever
	// layer refused it.
	ErrValueTooLarge = store.ErrValueTooLarge
)
