package codec_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kuracache/kura/codec"
)

type Article struct {
	ID    int64  `msgpack:"id"`
	Title string `msgpack:"title"`
	Body  string `msgpack:"body"`
}

func Example() {
	c, err := codec.New(codec.Options{}) // msgpack + S2 above 256 bytes
	if err != nil {
		panic(err)
	}
	in := Article{ID: 1, Title: "日銀、金利を据え置き", Body: strings.Repeat("The yen weakened. ", 40)}
	b, h, err := c.Encode(nil, in)
	if err != nil {
		panic(err)
	}
	fmt.Printf("serializer %d, compressor %d, %d bytes raw, %d stored\n", h.Serializer, h.Compressor, h.RawLen, len(b))

	var out Article
	if _, err := c.Decode(b, &out); err != nil {
		panic(err)
	}
	fmt.Println(out.Title)

	// A value some other library wrote is an error, never a panic.
	_, err = c.Decode([]byte(`{"id":1}`), &out)
	fmt.Println(errors.Is(err, codec.ErrMalformed), errors.Is(err, codec.ErrNotKura))

	// A cached "not found".
	h, err = c.Decode(c.EncodeNegative(nil), &out)
	fmt.Println(h.Negative, err)
	// Output:
	// serializer 1, compressor 1, 778 bytes raw, 123 stored
	// 日銀、金利を据え置き
	// true true
	// true <nil>
}
