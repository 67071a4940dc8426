package storeurl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/redial"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// explained is an error worded for a person that still unwraps to the
// error it explains, so errors.Is(err, redisstore.ErrAuth) and
// errors.Is(err, syscall.ECONNREFUSED) keep working.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// DialError is the one message for a server that cannot be reached, used
// by Open and by kura bench's own connections: what failed, where, and
// what to do about it.
func DialError(kind Kind, addr string, err error) error {
	var hint string
	cause := redial.Cause(err)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		hint = "nothing listens there; start the server or fix host:port"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		hint = "check the address and any firewall"
		cause = errors.New("no answer in time")
	default:
		var dnsErr *net.DNSError
		var recErr tls.RecordHeaderError
		var certErr *tls.CertificateVerificationError
		switch {
		case errors.As(err, &certErr):
			hint = "the server's certificate is not trusted here"
		case errors.As(err, &dnsErr):
			hint = "the host name does not resolve; fix the URL"
		case errors.As(err, &recErr):
			return TLSError(kind, addr, err)
		default:
			hint = "check the URL"
		}
	}
	return &explained{fmt.Sprintf("cannot connect to %s at %s: %v (%s)", kind, addr, cause, hint), err}
}

// AuthError is the one message for credentials a Redis server refused;
// reply is the server's error reply (WRONGPASS ..., NOAUTH ...).
func AuthError(addr, reply string, err error) error {
	var msg string
	switch {
	case strings.HasPrefix(reply, "NOAUTH"):
		msg = fmt.Sprintf("redis at %s needs a password; put it in the URL (redis://:PASSWORD@%s)", addr, addr)
	case strings.Contains(reply, "without any password configured"):
		msg = fmt.Sprintf("redis at %s has no password configured but one was given; remove it from the URL", addr)
	default:
		msg = fmt.Sprintf("redis at %s refused the credentials (%s); check the user and password in the URL (redis://user:password@host:port)", addr, strings.TrimSpace(reply))
	}
	if err == nil {
		err = redisstore.ErrAuth
	}
	return &explained{msg, err}
}

// SentinelAuthError is AuthError for a redis+sentinel:// URL, whose two
// sets of credentials sit in different places: the sentinels' in
// sentinel_user= and sentinel_password=, the data servers' in the user
// info. bySentinel says a sentinel refused (redisstore.ErrSentinelAuth).
func SentinelAuthError(addr, reply string, bySentinel bool, err error) error {
	var msg string
	switch {
	case bySentinel && strings.HasPrefix(reply, "NOAUTH"):
		msg = fmt.Sprintf("redis sentinel at %s needs a password; add it to the URL as sentinel_password=PASSWORD (the user info is the data servers' password)", addr)
	case bySentinel && strings.Contains(reply, "without any password configured"):
		msg = fmt.Sprintf("redis sentinel at %s has no password configured but one was given; remove sentinel_password= from the URL", addr)
	case bySentinel:
		msg = fmt.Sprintf("redis sentinel at %s refused the credentials (%s); check sentinel_user= and sentinel_password= in the URL", addr, strings.TrimSpace(reply))
	case strings.HasPrefix(reply, "NOAUTH"):
		msg = fmt.Sprintf("redis at %s (the primary the sentinels named) needs a password; put it in the URL's user info (redis+sentinel://:PASSWORD@sentinel:port/master-set); sentinel_password= is the sentinels' own", addr)
	case strings.Contains(reply, "without any password configured"):
		msg = fmt.Sprintf("redis at %s (the primary the sentinels named) has no password configured but one was given; remove it from the URL's user info", addr)
	default:
		msg = fmt.Sprintf("redis at %s (the primary the sentinels named) refused the credentials (%s); check the URL's user info (redis+sentinel://user:password@...); sentinel_user= and sentinel_password= are the sentinels' own", addr, strings.TrimSpace(reply))
	}
	if err == nil {
		err = redisstore.ErrAuth
		if bySentinel {
			err = redisstore.ErrSentinelAuth
		}
	}
	return &explained{msg, err}
}

// Explain rewords an error of Open or of a store's first command for a
// person, with the same words in every kura command: an unreachable
// server, refused credentials. Other errors come back unchanged. The
// result never shows a password.
func Explain(t Target, err error) error {
	if err == nil {
		return nil
	}
	var ex *explained
	if errors.As(err, &ex) {
		return err
	}
	addr := strings.Join(t.Addrs, ",")
	var ne *store.NodeError
	if errors.As(err, &ne) && ne.Addr != "" {
		addr = ne.Addr
	}
	if t.Kind == Memcached && strings.Contains(err.Error(), `"-ERR `) {
		// A RESP error reply to a memcached command: the port is Redis's.
		return &explained{msg: RedisAtMemcachedURL(addr), err: err}
	}
	if errors.Is(err, redisstore.ErrAuth) {
		reply := ""
		var re *rueidis.RedisError
		if errors.As(err, &re) {
			reply = re.Error()
		} else {
			for _, p := range []string{"WRONGPASS", "NOAUTH", "ERR AUTH"} {
				if i := strings.Index(err.Error(), p); i >= 0 {
					reply, _, _ = strings.Cut(err.Error()[i:], ")")
					break
				}
			}
		}
		if t.Kind == RedisSentinel {
			return SentinelAuthError(addr, reply, errors.Is(err, redisstore.ErrSentinelAuth), err)
		}
		return AuthError(addr, reply, err)
	}
	if t.Kind == RedisSentinel && strings.Contains(err.Error(), "No such master with that name") {
		return &explained{fmt.Sprintf("the sentinels at %s know no master set %q; fix the name after the hosts (redis+sentinel://HOST:26379/MASTERSET; SENTINEL MASTERS lists them)", addr, t.MasterSet), err}
	}
	var recErr tls.RecordHeaderError
	if t.TLS && (errors.As(err, &recErr) || errors.Is(err, store.ErrNotConnected) &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded))) {
		// A plain server answers a TLS hello with plain text, or not at
		// all: kura bench says the same (TLSError).
		return TLSError(t.Kind, addr, err)
	}
	var op *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, store.ErrNotConnected) && errors.Is(err, context.DeadlineExceeded) {
		if op != nil && op.Addr != nil {
			addr = op.Addr.String()
		}
		return DialError(t.Kind, addr, err)
	}
	return err
}

// TLSError is the one message for a TLS connection (rediss://) that got
// no TLS handshake: most often a server that does not speak TLS there.
func TLSError(kind Kind, addr string, err error) error {
	return &explained{fmt.Sprintf("cannot connect to %s at %s: no TLS handshake (does the server speak TLS there? use redis:// for a plain server)", kind, addr), err}
}

// RedisAtMemcachedURL is the message for a memcached:// URL whose server
// answered as Redis does (a "-ERR" reply).
func RedisAtMemcachedURL(addr string) string {
	return fmt.Sprintf("the server at %s answered like Redis (\"-ERR unknown command\"), not memcached: for Redis write redis://%s; for memcached, fix the port (11211 by default)", addr, addr)
}
