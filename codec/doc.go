// Package codec is kura's value format: a small self-describing envelope
// around a serialized, optionally compressed Go value.
//
// Every cached value starts with a header that names its format version,
// serializer, compressor, compression dictionary and uncompressed length
// (docs/FORMAT.md specifies it byte by byte, with test vectors). Decode
// chooses the serializer, compressor and dictionary from that header, not
// from the reader's own configuration, so a reader decodes what any writer
// stored, and a tool such as `kura inspect` can show any value.
//
// The default Codec (the zero [Options]) writes msgpack, compressed with
// S2 when the payload is at least 256 bytes and compression saves at least
// 10%. [MsgPack], [JSON] and [Raw] serializers and [None], [S2], [S2Better]
// and [Zstd] compressors are built in; zstd can use trained dictionaries
// ([TrainDictionary], Options.Dictionaries). Users plug their own
// serializers and compressors with ids 128..255.
//
// Decoding never panics on hostile or foreign bytes (a plain string, JSON,
// a value written by go-redis/cache, a truncated or lying header, a
// decompression bomb): every failure is an error matching [ErrMalformed],
// which the Cache counts as a miss and overwrites on the next fill.
//
// This package knows nothing about stores, keys or TTLs; it turns values
// into bytes and back.
package codec
