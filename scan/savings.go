package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/klauspost/compress/s2"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kuracache/kura/codec"
)

// candidate is one way kura could store the values: a compressor, with
// msgpack for JSON documents and raw bytes for anything else.
type candidate struct {
	name         string
	msgpack, raw *codec.Codec
}

func candidates() ([]candidate, error) {
	var out []candidate
	for _, c := range []struct {
		name string
		comp codec.Compressor
	}{{"s2", codec.S2()}, {"zstd", codec.Zstd(0)}} {
		mp, err := codec.New(codec.Options{Serializer: sortedMsgpack{}, Compressor: c.comp})
		if err != nil {
			return nil, err
		}
		raw, err := codec.New(codec.Options{Serializer: codec.Raw(), Compressor: c.comp})
		if err != nil {
			return nil, err
		}
		out = append(out, candidate{c.name, mp, raw})
	}
	return out, nil
}

// sortedMsgpack is msgpack with map keys sorted: a JSON document decoded
// into a map must encode to the same bytes every time, or the estimate
// (and the golden output) would move with Go's map order. It writes what
// kura's msgpack serializer writes, in a fixed key order.
type sortedMsgpack struct{}

func (sortedMsgpack) ID() byte     { return codec.IDMsgPack }
func (sortedMsgpack) Name() string { return "msgpack" }
func (sortedMsgpack) Marshal(dst []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := msgpack.NewEncoder(buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}
func (sortedMsgpack) Unmarshal(data []byte, v any) error { return msgpack.Unmarshal(data, v) }

// valueClass says how a sampled value is counted.
type valueClass int

const (
	plainValue      valueClass = iota
	kuraValue                  // already a kura envelope: as it is
	compressedValue            // compressed by another writer: as it is
)

func classify(b []byte) valueClass {
	if _, err := codec.ParseHeader(b); err == nil || !errors.Is(err, codec.ErrNotKura) {
		return kuraValue
	}
	switch {
	case len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b:
		return compressedValue // gzip
	case len(b) >= 2 && b[0] == 0x78 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0:
		return compressedValue // zlib
	case len(b) >= 2 && b[len(b)-1] == 1:
		// go-redis/cache: S2 block then a trailing 1.
		if n, err := s2.DecodedLen(b[:len(b)-1]); err == nil && n > 0 {
			if _, err := s2.Decode(nil, b[:len(b)-1]); err == nil {
				return compressedValue
			}
		}
	}
	return plainValue
}

// encodedSizes returns what each candidate stores for b.
func encodedSizes(b []byte, cands []candidate, buf []byte) ([]int64, []byte) {
	out := make([]int64, len(cands))
	doc, isDoc := jsonDocument(b)
	for i, c := range cands {
		var err error
		if isDoc {
			buf, _, err = c.msgpack.Encode(buf[:0], doc)
		}
		if !isDoc || err != nil {
			buf, _, err = c.raw.Encode(buf[:0], b)
		}
		if err != nil {
			out[i] = int64(len(b)) // too large to encode: stays as it is
			continue
		}
		out[i] = int64(len(buf))
	}
	return out, buf
}

// jsonDocument decodes a JSON object or array, with whole numbers as
// integers (a typed Go value would hold them so, and msgpack stores them
// in 1 to 9 bytes instead of a float's 9).
func jsonDocument(b []byte) (any, bool) {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') || !json.Valid(t) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(t))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return integers(v, 0), true
}

func integers(v any, depth int) any {
	if depth > 100 {
		return v
	}
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		for k, e := range x {
			x[k] = integers(e, depth+1)
		}
	case []any:
		for i, e := range x {
			x[i] = integers(e, depth+1)
		}
	}
	return v
}

// sample reads the sampled values of every pattern and estimates what
// each candidate would store. Errors are recorded in a.errors: the scan
// report stands without the estimate.
func (a *aggregator) sample(ctx context.Context, walkers []walker) {
	a.mu.Lock()
	a.fold()
	a.folded = true
	names := make([]string, 0, len(a.patterns))
	for n, p := range a.patterns {
		if len(p.samples) > 0 {
			names = append(names, n)
		}
	}
	a.mu.Unlock()
	sort.Strings(names)
	cands, err := candidates()
	if err != nil {
		a.errors = append(a.errors, "compression estimate: "+err.Error())
		return
	}
	var buf []byte
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		a.mu.Lock()
		p := a.patterns[name]
		refs := append([]sampleRef(nil), p.samples...)
		a.mu.Unlock()
		byServer := map[int][]string{}
		for _, r := range refs {
			byServer[r.server] = append(byServer[r.server], r.key)
		}
		sv := &Savings{}
		sampledStored := make([]int64, len(cands))
		servers := make([]int, 0, len(byServer))
		for s := range byServer {
			servers = append(servers, s)
		}
		sort.Ints(servers)
		for _, s := range servers {
			keys := byServer[s]
			for len(keys) > 0 {
				n := min(len(keys), a.opts.Count)
				vals, err := walkers[s].fetch(ctx, keys[:n])
				if err != nil {
					a.mu.Lock()
					a.errors = append(a.errors, fmt.Sprintf("%s: reading sampled values of %s: %v", walkers[s].addr(), name, err))
					a.mu.Unlock()
					break
				}
				keys = keys[n:]
				for _, v := range vals {
					if v == nil {
						continue // gone since the walk
					}
					sv.Sampled++
					sv.SampledBytes += int64(len(v))
					switch classify(v) {
					case kuraValue:
						sv.KuraValues++
						for i := range sampledStored {
							sampledStored[i] += int64(len(v))
						}
						continue
					case compressedValue:
						sv.CompressedValues++
						for i := range sampledStored {
							sampledStored[i] += int64(len(v))
						}
						continue
					}
					var sizes []int64
					sizes, buf = encodedSizes(v, cands, buf)
					for i, n := range sizes {
						sampledStored[i] += n
					}
				}
			}
		}
		if sv.Sampled == 0 || sv.SampledBytes == 0 {
			continue
		}
		a.mu.Lock()
		for i, c := range cands {
			ratio := float64(sampledStored[i]) / float64(sv.SampledBytes)
			stored := int64(math.Round(float64(p.stringBytes) * ratio))
			e := Estimate{Codec: c.name, StoredBytes: stored, SavedBytes: p.stringBytes - stored}
			if p.valueBytes > 0 {
				e.SavedFraction = float64(e.SavedBytes) / float64(p.valueBytes)
			}
			sv.Estimates = append(sv.Estimates, e)
		}
		p.savings = sv
		a.mu.Unlock()
	}
}
