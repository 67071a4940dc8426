package inspect

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// Bounds of what Key reads from a Redis collection (a hash, list, set,
// sorted set or stream kura did not write): a sample of its first
// elements, each shown up to SampleBytes.
const (
	SampleElements = 10
	SampleBytes    = 256
)

// redisClient is the capability of a Redis store to run commands it does
// not cover (redisstore.Store.Client): Key asks it a key's type, encoding
// and length, and a collection's first elements.
type redisClient interface {
	Client() rueidis.Client
}

// wrongType reports a Redis WRONGTYPE reply: the key holds a collection,
// which GET cannot read.
func wrongType(err error) bool {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return strings.HasPrefix(re.Error(), "WRONGTYPE")
	}
	return err != nil && strings.Contains(err.Error(), "WRONGTYPE")
}

// keyType asks a Redis store for key's type and encoding (both "" when
// the store cannot tell).
func keyType(ctx context.Context, st store.Store, key string) (typ, enc string) {
	rc, ok := store.Find[redisClient](st)
	if !ok {
		return "", ""
	}
	c := rc.Client()
	if c == nil {
		return "", ""
	}
	res := c.DoMulti(ctx, c.B().Type().Key(key).Build(), c.B().ObjectEncoding().Key(key).Build())
	typ, _ = res[0].ToString()
	enc, _ = res[1].ToString()
	return typ, enc
}

// collection describes a key holding a Redis collection: its type,
// encoding, length and first elements (at most SampleElements, each cut to
// SampleBytes), never the whole collection. ok is false when the store
// cannot tell (not a Redis store).
func collection(ctx context.Context, st store.Store, key string) (Report, bool) {
	rc, found := store.Find[redisClient](st)
	if !found || rc.Client() == nil {
		return Report{}, false
	}
	c := rc.Client()
	r := Report{Key: key, Found: true, Format: "redis-collection"}
	typ, enc := keyType(ctx, st, key)
	if typ == "" || typ == "none" {
		return Report{}, false
	}
	r.Type, r.Encoding = typ, enc
	b := c.B()
	var lenCmd, sampleCmd rueidis.Completed
	n := int64(SampleElements)
	switch typ {
	case "hash":
		lenCmd, sampleCmd = b.Hlen().Key(key).Build(), b.Hscan().Key(key).Cursor(0).Count(n).Build()
	case "list":
		lenCmd, sampleCmd = b.Llen().Key(key).Build(), b.Lrange().Key(key).Start(0).Stop(n-1).Build()
	case "set":
		lenCmd, sampleCmd = b.Scard().Key(key).Build(), b.Sscan().Key(key).Cursor(0).Count(n).Build()
	case "zset":
		lenCmd, sampleCmd = b.Zcard().Key(key).Build(), b.Zrange().Key(key).Min("0").Max(strconv.FormatInt(n-1, 10)).Withscores().Build()
	case "stream":
		lenCmd, sampleCmd = b.Xlen().Key(key).Build(), b.Xrange().Key(key).Start("-").End("+").Count(n).Build()
	default:
		r.Note = "a Redis " + typ + ", which kura does not read"
		return r, true
	}
	res := c.DoMulti(ctx, lenCmd, sampleCmd)
	if l, err := res[0].AsInt64(); err == nil {
		r.Length = l
	}
	var sample []any
	switch typ {
	case "hash", "set":
		if e, err := res[1].AsScanEntry(); err == nil {
			els := e.Elements
			per := 1
			if typ == "hash" {
				per = 2
			}
			for i := 0; i+per <= len(els) && len(sample) < SampleElements; i += per {
				if per == 2 {
					sample = append(sample, map[string]any{"field": element(els[i]), "value": element(els[i+1])})
				} else {
					sample = append(sample, element(els[i]))
				}
			}
		}
	case "list":
		if els, err := res[1].AsStrSlice(); err == nil {
			for _, e := range els {
				sample = append(sample, element(e))
			}
		}
	case "zset":
		if els, err := res[1].AsZScores(); err == nil {
			for _, e := range els {
				sample = append(sample, map[string]any{"member": element(e.Member), "score": e.Score})
			}
		}
	case "stream":
		if els, err := res[1].AsXRange(); err == nil {
			for _, e := range els {
				fields := map[string]any{}
				for k, v := range e.FieldValues {
					fields[clip(k)] = element(v)
				}
				sample = append(sample, map[string]any{"id": e.ID, "fields": fields})
			}
		}
	}
	if len(sample) > SampleElements {
		sample = sample[:SampleElements]
	}
	r.Note = "a Redis " + typ + " (GET reads strings only): its length, and its first elements as stored"
	if len(sample) > 0 {
		v, _ := json.Marshal(sample)
		r.Value = v
	}
	return r, true
}

// element shows one collection element: text as it is, other bytes as
// base64, either cut to SampleBytes.
func element(s string) any {
	if utf8.ValidString(s) {
		return clip(s)
	}
	b := []byte(s)
	out := map[string]any{"base64": base64.StdEncoding.EncodeToString(b[:min(len(b), SampleBytes)])}
	if len(b) > SampleBytes {
		out["bytes"] = len(b)
	}
	return out
}

func clip(s string) string {
	if len(s) <= SampleBytes {
		return s
	}
	cut := SampleBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
