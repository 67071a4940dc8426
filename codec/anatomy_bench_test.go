package codec

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkEntryAnatomy says what the bytes of a compact entry with a
// 16 KiB S2 dictionary are made of, per value of each data set (the
// measured half; the dictionary trained on the other): the header's
// parts, and the S2 block's length prefix, copy elements, literal tags
// and literal bytes, the literal bytes split by what they are in the
// msgpack payload (map keys, strings seen in the training half, strings
// not seen there, numbers, structure), and the payload's bytes split the
// same way ("pay-"). "unique-zstd19" is the string and number bytes left
// as literals (all of them for a value stored uncompressed) of the whole
// measured half, compressed together by zstd at its best level, per
// value: about what a coder that models them across values would still
// have to store. It times nothing; its figures are exact.
//
//	go test ./codec -run '^$' -bench 'EntryAnatomy/(stocks|people|emoji)/' -benchtime 1x
func BenchmarkEntryAnatomy(b *testing.B) {
	for _, s := range corpusSets(b) {
		b.Run(s.name, func(b *testing.B) {
			ser := MsgPack()
			if s.struct_ {
				ser = MsgPackArray()
			}
			var samples [][]byte
			seen := map[string]bool{}
			for _, v := range s.train {
				p, err := ser.Marshal(nil, v)
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, p)
				var cl byteClasses
				cl.walk(p, 0, false)
				for _, str := range cl.strs {
					seen[string(p[str[0]:str[1]])] = true
				}
			}
			d, _, err := TrainS2Dictionary(samples, 16<<10)
			if err != nil {
				b.Fatal(err)
			}
			c := pairedCodec(b, d)
			fields := Fields{Schema: Fingerprint(reflect.TypeOf(s.test[0]), "msgpack"), HasSchema: true, Written: time.Now()}
			var a anatomy
			var lits []byte
			for _, v := range s.test {
				seed, err := msgpack.Marshal(v)
				if err != nil {
					b.Fatal(err)
				}
				a.seed += len(snappy.Encode(nil, seed))
				p, err := ser.Marshal(nil, v)
				if err != nil {
					b.Fatal(err)
				}
				a.payload += len(p)
				e, h, err := c.EncodeWith(nil, v, fields)
				if err != nil {
					b.Fatal(err)
				}
				a.entry += len(e)
				plain := compactHeaderLen(&h)
				a.hdrPlain += plain
				a.hdrComp += h.Len - plain
				var cl byteClasses
				cl.walk(p, 0, false)
				class := cl.classes(p, seen)
				for i, k := range class {
					a.pay[k]++
					if h.Compressor == IDNone && (k == classStrNew || k == classStrSeen || k == classNum) {
						lits = append(lits, p[i])
					}
				}
				if h.Compressor == IDNone {
					a.uncompressed += len(e) - h.Len
					continue
				}
				lits = a.block(b, e[h.Len:], p, class, lits)
			}
			n := float64(len(s.test))
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
			if err != nil {
				b.Fatal(err)
			}
			uz := len(enc.EncodeAll(lits, nil))
			for b.Loop() {
			}
			for _, m := range []struct {
				name string
				v    int
			}{
				{"m+s", a.seed}, {"entry", a.entry}, {"payload", a.payload},
				{"hdr-fixed+fp+time", a.hdrPlain}, {"hdr-comp+dict+digest", a.hdrComp},
				{"stored-raw", a.uncompressed}, {"blk-len", a.lenPrefix}, {"blk-copies", a.copies}, {"blk-littags", a.litTags},
				{"lit-keys", a.lit[classKey]}, {"lit-str-seen", a.lit[classStrSeen]}, {"lit-str-unseen", a.lit[classStrNew]},
				{"lit-num", a.lit[classNum]}, {"lit-struct", a.lit[classStruct]}, {"unique-zstd19", uz},
				{"pay-keys", a.pay[classKey]}, {"pay-str-seen", a.pay[classStrSeen]}, {"pay-str-unseen", a.pay[classStrNew]},
				{"pay-num", a.pay[classNum]}, {"pay-struct", a.pay[classStruct]},
			} {
				b.ReportMetric(float64(m.v)/n, m.name)
			}
			b.ReportMetric(float64(a.entry)/float64(a.seed), "entry/m+s")
		})
	}
}

type anatomy struct {
	seed, entry, payload, hdrPlain, hdrComp, uncompressed int
	lenPrefix, copies, litTags                            int
	lit, pay                                              [classCount]int
}

// block walks S2 block blk of payload p (whose bytes are of class) and
// adds its parts to a; the literal string and number bytes are appended
// to lits.
func (a *anatomy) block(b *testing.B, blk, p []byte, class []uint8, lits []byte) []byte {
	_, n := binary.Uvarint(blk)
	a.lenPrefix += n
	s, d := n, 0
	for s < len(blk) {
		tag := blk[s]
		switch tag & 3 {
		case 0:
			x := int(tag >> 2)
			hl := 1
			switch {
			case x < 60:
			case x == 60:
				x, hl = int(blk[s+1]), 2
			case x == 61:
				x, hl = int(binary.LittleEndian.Uint16(blk[s+1:])), 3
			case x == 62:
				x, hl = int(uint32(blk[s+1])|uint32(blk[s+2])<<8|uint32(blk[s+3])<<16), 4
			default:
				x, hl = int(binary.LittleEndian.Uint32(blk[s+1:])), 5
			}
			l := x + 1
			a.litTags += hl
			for i := d; i < d+l; i++ {
				a.lit[class[i]]++
				if class[i] == classStrNew || class[i] == classStrSeen || class[i] == classNum {
					lits = append(lits, p[i])
				}
			}
			s += hl + l
			d += l
		case 1:
			l := int(tag>>2)&7 + 4
			el := 2
			if blk[s+1] == 0 && tag>>5 == 0 { // S2 repeat: lengths 5..7 extend it
				switch l - 4 {
				case 5:
					l, el = int(blk[s+2])+8, 3
				case 6:
					l, el = int(binary.LittleEndian.Uint16(blk[s+2:]))+1<<8+4, 4
				case 7:
					l, el = int(uint32(blk[s+2])|uint32(blk[s+3])<<8|uint32(blk[s+4])<<16)+1<<16+4, 5
				}
			}
			a.copies += el
			s += el
			d += l
		case 2:
			a.copies += 3
			d += int(tag>>2) + 1
			s += 3
		case 3:
			a.copies += 5
			d += int(tag>>2) + 1
			s += 5
		}
	}
	if d != len(p) {
		b.Fatalf("block walk ended at %d of %d bytes", d, len(p))
	}
	return lits
}

const (
	classStruct  = iota // map and array headers, nil, booleans
	classKey            // a map key (its header and bytes)
	classStrSeen        // a string value that occurs in the training half
	classStrNew         // a string value that does not
	classNum            // an integer or float (its type byte and bytes)
	classCount
)

// byteClasses records, for a msgpack payload, which byte ranges are map
// keys, string values and numbers (the rest is structure).
type byteClasses struct {
	keys, strs, nums [][2]int
}

// walk records the value at off and returns the offset after it.
func (c *byteClasses) walk(p []byte, off int, isKey bool) int {
	t := p[off]
	str := func(hl, l int) int {
		r := [2]int{off + hl, off + hl + l}
		if isKey {
			c.keys = append(c.keys, [2]int{off, r[1]})
		} else {
			c.strs = append(c.strs, r)
		}
		return r[1]
	}
	num := func(l int) int { c.nums = append(c.nums, [2]int{off, off + 1 + l}); return off + 1 + l }
	container := func(hl, n int, isMap bool) int {
		off += hl
		for range n {
			if isMap {
				off = c.walk(p, off, true)
			}
			off = c.walk(p, off, false)
		}
		return off
	}
	switch {
	case t <= 0x7f || t >= 0xe0:
		return num(0)
	case t <= 0x8f:
		return container(1, int(t&0x0f), true)
	case t <= 0x9f:
		return container(1, int(t&0x0f), false)
	case t <= 0xbf:
		return str(1, int(t&0x1f))
	}
	switch t {
	case 0xc0, 0xc2, 0xc3:
		return off + 1
	case 0xcc, 0xd0:
		return num(1)
	case 0xcd, 0xd1:
		return num(2)
	case 0xca, 0xce, 0xd2:
		return num(4)
	case 0xcb, 0xcf, 0xd3:
		return num(8)
	case 0xd9, 0xc4:
		return str(2, int(p[off+1]))
	case 0xda, 0xc5:
		return str(3, int(binary.BigEndian.Uint16(p[off+1:])))
	case 0xdb, 0xc6:
		return str(5, int(binary.BigEndian.Uint32(p[off+1:])))
	case 0xdc:
		return container(3, int(binary.BigEndian.Uint16(p[off+1:])), false)
	case 0xde:
		return container(3, int(binary.BigEndian.Uint16(p[off+1:])), true)
	case 0xdd:
		return container(5, int(binary.BigEndian.Uint32(p[off+1:])), false)
	case 0xdf:
		return container(5, int(binary.BigEndian.Uint32(p[off+1:])), true)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: a timestamp here
		return num(1 + 1<<(t-0xd4))
	case 0xc7:
		return num(2 + int(p[off+1]))
	}
	panic("msgpack type not in the corpora")
}

// classes returns the class of every byte of p (walked into c).
func (c *byteClasses) classes(p []byte, seen map[string]bool) []uint8 {
	out := make([]uint8, len(p))
	for _, r := range c.keys {
		for i := r[0]; i < r[1]; i++ {
			out[i] = classKey
		}
	}
	for _, r := range c.nums {
		for i := r[0]; i < r[1]; i++ {
			out[i] = classNum
		}
	}
	for _, r := range c.strs {
		k := uint8(classStrNew)
		if seen[string(p[r[0]:r[1]])] {
			k = classStrSeen
		}
		for i := r[0]; i < r[1]; i++ {
			out[i] = k
		}
	}
	return out
}
