package meta

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/kuracache/kura/store"
)

// Key limits of the memcached text protocol.
const (
	// MaxKeyLen is the longest key token memcached accepts on a command
	// line. It also bounds the base64 form of a binary key: memcached 1.6
	// checks the encoded token, not the decoded bytes.
	MaxKeyLen = 250
	// maxBase64Raw is the longest raw key whose base64 form fits in
	// MaxKeyLen (4*ceil(186/3) = 248).
	maxBase64Raw = 186
	// hashedPrefixLen is how much of a hashed key is kept readable in front
	// of its digest, so per-prefix tools (kura scan) still group it.
	hashedPrefixLen = 100
)

// KeyForm says how a key travels on the wire.
type KeyForm uint8

const (
	// KeyPlain is a key sent as is: 1 to 250 bytes, none of them a
	// space, a control character or DEL.
	KeyPlain KeyForm = iota
	// KeyBase64 is a key holding bytes the text protocol cannot carry
	// (space, control characters) but short enough (at most 186 bytes) to
	// be sent base64-encoded with the b flag. memcached decodes it and
	// stores the original bytes, so the key is unchanged on the server.
	KeyBase64
	// KeyHashed is a key too long for either form. It is replaced by the
	// binary key 0x00 + its first 100 bytes + SHA-256(key), sent with the
	// b flag. The leading NUL cannot occur in a plain key, and keys that
	// start with NUL are always hashed, so a hashed key never collides with
	// another form.
	KeyHashed
)

// ClassifyKey reports how key will be sent, or an error matching
// store.ErrInvalidKey for the empty key.
func ClassifyKey(key string) (KeyForm, error) {
	if key == "" {
		return 0, fmt.Errorf("%w: empty key (memcached keys are 1 to %d bytes)", store.ErrInvalidKey, MaxKeyLen)
	}
	if len(key) <= MaxKeyLen && plainKey(key) {
		return KeyPlain, nil
	}
	if len(key) <= maxBase64Raw && key[0] != 0 {
		return KeyBase64, nil
	}
	return KeyHashed, nil
}

func plainKey(key string) bool {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// AppendKey appends the wire token of key to dst and reports whether it
// must be sent with the b (base64) flag. Every non-empty key has a wire
// form; see KeyForm for the rules and why.
func AppendKey(dst []byte, key string) (out []byte, b64 bool, err error) {
	form, err := ClassifyKey(key)
	if err != nil {
		return dst, false, err
	}
	switch form {
	case KeyPlain:
		return append(dst, key...), false, nil
	case KeyBase64:
		return base64.StdEncoding.AppendEncode(dst, []byte(key)), true, nil
	default:
		var raw [1 + hashedPrefixLen + sha256.Size]byte
		n := 1 + copy(raw[1:1+hashedPrefixLen], key)
		sum := sha256.Sum256([]byte(key))
		n += copy(raw[n:], sum[:])
		return base64.StdEncoding.AppendEncode(dst, raw[:n]), true, nil
	}
}
