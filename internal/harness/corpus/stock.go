package corpus

import "math/rand/v2"

// Stock is one line of a shop's stock: the smallest record a cache holds
// (about 20 bytes as msgpack with its field names), shaped like
// {42, "apple", 3}.
type Stock struct {
	ID   int64  `json:"id" msgpack:"id"`
	Name string `json:"name" msgpack:"name"`
	Qty  int    `json:"qty" msgpack:"qty"`
}

var stockNames = []string{"apple", "pear", "plum", "cherry", "grape", "peach", "lemon", "melon", "kiwi", "fig", "りんご", "みかん"}

// Stocks returns n stock lines for seed.
func Stocks(seed int64, n int) []Stock {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5705c))
	out := make([]Stock, n)
	for i := range out {
		out[i] = Stock{ID: int64(1 + r.IntN(100_000)), Name: pick(r, stockNames), Qty: r.IntN(200)}
	}
	return out
}
