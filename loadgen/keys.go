package loadgen

import (
	"math"
	"math/rand/v2"
)

// keyGen draws key numbers in [0, n). Each worker owns one; none is safe
// for concurrent use.
type keyGen interface {
	next(r *rand.Rand) uint64
}

// newKeyGen returns the generator for a random distribution; sequential
// keys come from the run's global operation counter instead, so that
// together the workers walk the key space exactly in order.
func newKeyGen(s *settings) keyGen {
	if s.Distribution == Zipf {
		return newZipfKeys(uint64(s.Keys), s.ZipfExponent)
	}
	return uniformKeys(uint64(s.Keys))
}

type uniformKeys uint64

func (u uniformKeys) next(r *rand.Rand) uint64 { return r.Uint64N(uint64(u)) }

// zipfKeys draws key k (0-based) with probability proportional to
// 1/(k+1)^s for any exponent s > 0, by rejection-inversion (Hörmann and
// Derflinger, "Rejection-inversion to generate variates from monotone
// discrete distributions", 1996). math/rand's Zipf needs s > 1; cache
// studies usually quote s just below 1. Key 0 is the hottest.
type zipfKeys struct {
	n                  float64
	s                  float64
	hx1, hn, threshold float64
}

func newZipfKeys(n uint64, s float64) *zipfKeys {
	z := &zipfKeys{n: float64(n), s: s}
	z.hx1 = z.hIntegral(1.5) - 1
	z.hn = z.hIntegral(z.n + 0.5)
	z.threshold = 2 - z.hIntegralInverse(z.hIntegral(2.5)-z.h(2))
	return z
}

func (z *zipfKeys) next(r *rand.Rand) uint64 {
	for {
		u := z.hn + r.Float64()*(z.hx1-z.hn)
		x := z.hIntegralInverse(u)
		k := math.Floor(x + 0.5)
		if k < 1 {
			k = 1
		} else if k > z.n {
			k = z.n
		}
		if k-x <= z.threshold || u >= z.hIntegral(k+0.5)-z.h(k) {
			return uint64(k) - 1
		}
	}
}

func (z *zipfKeys) h(x float64) float64 { return math.Exp(-z.s * math.Log(x)) }

func (z *zipfKeys) hIntegral(x float64) float64 {
	lx := math.Log(x)
	return helper2((1-z.s)*lx) * lx
}

func (z *zipfKeys) hIntegralInverse(x float64) float64 {
	t := x * (1 - z.s)
	if t < -1 {
		t = -1
	}
	return math.Exp(helper1(t) * x)
}

// helper1 is log1p(x)/x, stable near 0.
func helper1(x float64) float64 {
	if math.Abs(x) > 1e-8 {
		return math.Log1p(x) / x
	}
	return 1 - x*(0.5-x*(1.0/3-0.25*x))
}

// helper2 is expm1(x)/x, stable near 0.
func helper2(x float64) float64 {
	if math.Abs(x) > 1e-8 {
		return math.Expm1(x) / x
	}
	return 1 + x*0.5*(1+x*(1.0/3)*(1+0.25*x))
}

// appendKey appends prefix and the key number as keyDigits zero-padded
// digits, so every key has the same length (the RESP length prefix of a
// key is then a constant).
func appendKey(dst []byte, prefix string, k uint64) []byte {
	dst = append(dst, prefix...)
	var d [keyDigits]byte
	for i := keyDigits - 1; i >= 0; i-- {
		d[i] = byte('0' + k%10)
		k /= 10
	}
	return append(dst, d[:]...)
}
