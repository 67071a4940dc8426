package store

import (
	"fmt"
	"strings"

	"github.com/kuracache/kura/internal/redact"
)

// CheckAddr refuses a server address that is a URL or holds user info
// ("redis://:password@host:port", "user:password@host:port") where a
// host:port is expected (redisstore.Options.Addrs, a ring's or a
// memcached pool's Servers). Such a password is never sent as one, and
// every error that names the server (a NodeError's Addr, a failed dial)
// would print it. what names the field, for the message; the message
// shows the address with its secret masked. A port that is not a number
// (which may be a password: "user:password") is refused the same way.
func CheckAddr(what, addr string) error {
	if strings.Contains(addr, "://") || strings.ContainsRune(addr, '@') {
		return fmt.Errorf("kura: %s = %q is not host:port: it holds a URL or user info; give the password in the options, or open the store from its URL", what, redact.URL(addr))
	}
	// "user:password" or ":password" where host:port belongs has its
	// password where the port goes: a dial error ("unknown port") and every
	// NodeError would print it. A port is a number.
	if shown := redact.HostList(addr); shown != addr {
		return fmt.Errorf("kura: %s = %q is not host:port: the port must be a number (what follows the colon is not shown, in case it is a password)", what, shown)
	}
	return nil
}
