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
func explain(prefix string, err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"):
		return fmt.Errorf("%s: %w: the server refused the user name or password (%w); check the credentials in the URL or Options.Username/Options.Password", prefix, ErrAuth, err)
	case strings.HasPrefix(msg, "NOAUTH"):
		return fmt.Errorf("%s: %w: the server requires a password and none was given (%w); put it in the URL (redis://:password@host:port) or in Options.Password", prefix, ErrAuth, err)
	case strings.Contains(msg, "AUTH") && strings.Contains(msg, "without any password configured"):
		return fmt.Errorf("%s: %w: a password was given but the server has none configured (%w); remove it from the URL or Options.Password", prefix, ErrAuth, err)
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
