package cdcconf

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestUnparsableDatabaseURLHidesItsPassword: a database.url that does not
// parse is refused with an error that holds no part of its password, in
// the URL form and in libpq's keyword/value form (quoted or not, with the
// characters a URL cannot hold).
func TestUnparsableDatabaseURLHidesItsPassword(t *testing.T) {
	const pw = "S3cr/et#q?x@y%41Z"
	for _, dsn := range []string{
		"host=127.0.0.1 port=5432 user=kura password=" + pw + " sslmode=bogus",
		"host=127.0.0.1 port=5432 user=kura password='" + pw + " tail' sslmode=bogus",
		"host=127.0.0.1 user=kura password='" + pw, // unterminated quote
		"postgres://kura:" + pw + "@127.0.0.1:5432/postgres?sslmode=bogus",
		"postgres://kura@127.0.0.1:5432/postgres?sslmode=bogus&password=" + pw,
	} {
		u, _ := json.Marshal(dsn)
		_, err := Parse([]byte(`{"database": {"url": ` + string(u) + `}, ` + tablesJSON + `}`))
		if err == nil {
			t.Errorf("%q parsed", dsn)
			continue
		}
		for _, part := range []string{pw, "S3cr", "y%41Z", "41Z", "et#q"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("%q: error %q holds %q", dsn, err, part)
			}
		}
		if !strings.Contains(err.Error(), "database.url") {
			t.Errorf("%q: error %q does not name the field", dsn, err)
		}
	}
}
