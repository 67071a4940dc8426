package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/store"
)

// wrapErr adds the server address to err and, for the failures a person
// has to fix (credentials, ACL permissions), says what to fix. An error of
// a known server comes in a *store.NodeError. Sentinels stay reachable
// through errors.Is.
func (s *Store) wrapErr(addr string, err error) error {
	if addr == "" {
		return s.explain("redis cluster", err)
	}
	return store.NodeErr(addr, s.explain("redis", err))
}

// keyErr is wrapErr for the Err of a store.KeyError, whose Addr field
// already names the server.
func (s *Store) keyErr(addr string, err error) error {
	if addr == "" {
		return s.wrapErr(addr, err)
	}
	return s.explain("redis", err)
}

func (s *Store) explain(prefix string, err error) error {
	switch {
	case errors.Is(err, rueidis.ErrClosing) && s.closed.Load():
		return fmt.Errorf("%s: %w", prefix, store.ErrClosed)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return explain(prefix, err)
}

// explain turns the server's terse refusals into messages that say what to
// do.
func explain(prefix string, err error) error { return explainAuth(prefix, dataAuth, err) }

// authHint says, for the server a refusal came from, which option or URL
// part holds the credentials it wants.
type authHint struct {
	who       string // "the server", "the sentinel"
	sentinel  bool   // the refusal came from a sentinel: wrap ErrSentinelAuth
	noauth    string // a password is needed and none was given
	wrongpass string // the user name or password was refused
	nopass    string // a password was given but the server has none
}

var (
	// dataAuth is a standalone server or a Cluster node.
	dataAuth = authHint{
		who:       "the server",
		noauth:    "put it in the URL (redis://:password@host:port) or in Options.Password",
		wrongpass: "check the credentials in the URL or Options.Username/Options.Password",
		nopass:    "remove it from the URL or Options.Password",
	}
	// sentinelDataAuth is a data server the sentinels named: its
	// credentials are the URL's user info, not sentinel_password=.
	sentinelDataAuth = authHint{
		who:       "the primary the sentinels named",
		noauth:    "put it in the URL's user info (redis+sentinel://:password@sentinel:port/master-set) or in Options.Password; sentinel_password= (Options.Sentinel.Password) is the sentinels' own",
		wrongpass: "check the URL's user info (redis+sentinel://user:password@...) or Options.Username/Options.Password; sentinel_user= and sentinel_password= (Options.Sentinel) are the sentinels' own",
		nopass:    "remove the password from the URL's user info or Options.Password",
	}
	// sentinelAuth is a sentinel itself.
	sentinelAuth = authHint{
		who:       "the sentinel",
		sentinel:  true,
		noauth:    "add sentinel_password=PASSWORD to the URL or set Options.Sentinel.Password; the URL's user info (Options.Password) is the data servers' password",
		wrongpass: "check sentinel_user= and sentinel_password= in the URL or Options.Sentinel.Username/Options.Sentinel.Password",
		nopass:    "remove sentinel_password= from the URL or Options.Sentinel.Password",
	}
	// eitherAuth is a Sentinel-mode refusal whose source could not be
	// told (no sentinel answered a second time).
	eitherAuth = authHint{
		who:       "the sentinels or the primary they named",
		noauth:    "the sentinels' password is sentinel_password= in the URL (Options.Sentinel.Password), the data servers' is the URL's user info (Options.Password)",
		wrongpass: "check sentinel_user= and sentinel_password= (the sentinels', Options.Sentinel) and the URL's user info (the data servers', Options.Username/Options.Password)",
		nopass:    "remove the password given to the side that has none: sentinel_password= (the sentinels') or the URL's user info (the data servers')",
	}
)

// explainAuth is explain for a server of the kind h describes.
func explainAuth(prefix string, h authHint, err error) error {
	msg := err.Error()
	sentinel := ErrAuth
	if h.sentinel {
		sentinel = ErrSentinelAuth
	}
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"):
		return fmt.Errorf("%s: %w: %s refused the user name or password (%w); %s", prefix, sentinel, h.who, err, h.wrongpass)
	case strings.HasPrefix(msg, "NOAUTH"):
		return fmt.Errorf("%s: %w: %s requires a password and none was given (%w); %s", prefix, sentinel, h.who, err, h.noauth)
	case strings.Contains(msg, "AUTH") && strings.Contains(msg, "without any password configured"):
		return fmt.Errorf("%s: %w: a password was given but %s has none configured (%w); %s", prefix, sentinel, h.who, err, h.nopass)
	case strings.HasPrefix(msg, "NOPERM"):
		return fmt.Errorf("%s: the ACL user lacks a permission kura needs (%w); grant at least +get +set +mget +del +ping, and +config|get to let kura read proto-max-bulk-len", prefix, err)
	case strings.HasPrefix(msg, "CLUSTERDOWN"):
		return fmt.Errorf("%s: the cluster is down, some hash slots have no live master (%w)", prefix, err)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// connectError explains a failure of rueidis.NewClient, which dials and
// authenticates the seeds.
func connectError(seeds string, err error) error {
	if errors.Is(err, rueidis.ErrNoAddr) {
		return fmt.Errorf("redis %s: no seed address answered: %w", seeds, err)
	}
	return explain("redis "+seeds, err)
}

// redactURL hides the password of a URL in messages.
func redactURL(s string) string { return redact.URL(s) }

// urlError is NewFromURL's error for a URL with a secret that does not
// parse: the parser's message (Unwrap) quotes the URL, password included,
// so Error shows only the redacted URL.
type urlError struct {
	shown string
	err   error
}

func (e *urlError) Error() string {
	return fmt.Sprintf("redisstore: bad URL %q: it does not parse as a URL (the parser's message is not shown: it quotes the password); check its %%-escapes and port", e.shown)
}

func (e *urlError) Unwrap() error { return e.err }
