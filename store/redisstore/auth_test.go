package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

func TestAuthPassword(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{Password: "s3cret"})
	ctx := context.Background()

	s := open(t, r.URL(), redisstore.Options{}) // redis://:s3cret@host:port
	if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	s2, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{r.Addr}, Password: "s3cret"})
	if err != nil {
		t.Fatalf("New with Options.Password: %v", err)
	}
	if v, err := s2.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	s2.Close()

	for name, url := range map[string]string{
		"wrong":   "redis://:nope@" + r.Addr,
		"missing": "redis://" + r.Addr,
	} {
		t.Run(name, func(t *testing.T) {
			// Started without waiting, the store reports the refusal on
			// its requests.
			lazy := open(t, url, redisstore.Options{StartWait: -1})
			if _, err := lazy.Get(ctx, "k"); !errors.Is(err, redisstore.ErrAuth) || !errors.Is(err, store.ErrNotConnected) {
				t.Fatalf("Get on a store whose password is refused = %v, want ErrAuth and ErrNotConnected", err)
			}
			if _, err := redisstore.NewFromURL(ctx, url, redisstore.Options{FailFast: true}); !errors.Is(err, redisstore.ErrAuth) {
				t.Fatalf("FailFast with a bad password: %v, want ErrAuth", err)
			}
			s, err := redisstore.NewFromURL(ctx, url, redisstore.Options{})
			if err == nil {
				s.Close()
				t.Fatal("connected with a bad password")
			}
			if !errors.Is(err, redisstore.ErrAuth) {
				t.Fatalf("error %q does not match ErrAuth", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, r.Addr) || !strings.Contains(msg, "password") || strings.Contains(msg, "nope") {
				t.Fatalf("error %q should name the server and the password, and not leak it", msg)
			}
			t.Log(msg)
		})
	}
}

func TestAuthACLUser(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	if _, err := r.Do(ctx, "ACL", "SETUSER", "kura", "on", ">pw-kura", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	// A user that may only read: writes fail with a message naming the fix.
	if _, err := r.Do(ctx, "ACL", "SETUSER", "reader", "on", ">pw-reader", "~*", "+get", "+mget", "+ping", "+hello", "+client"); err != nil {
		t.Fatal(err)
	}

	s := open(t, "redis://kura:pw-kura@"+r.Addr, redisstore.Options{})
	if err := s.Set(ctx, "k", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get as ACL user = %q, %v", v, err)
	}
	if got := s.MaxValueSize(); got != 512<<20 { // read by Set's connection
		t.Fatalf("MaxValueSize = %d, want the server's 512 MiB", got)
	}

	_, err := redisstore.NewFromURL(ctx, "redis://kura:wrong@"+r.Addr, redisstore.Options{FailFast: true})
	if !errors.Is(err, redisstore.ErrAuth) {
		t.Fatalf("wrong ACL password: %v, want ErrAuth", err)
	}
	t.Log(err)

	rd := open(t, "redis://reader:pw-reader@"+r.Addr, redisstore.Options{})
	if v, err := rd.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get as reader = %q, %v", v, err)
	}
	if got := rd.MaxValueSize(); got != redisstore.DefaultMaxValueSize {
		t.Fatalf("MaxValueSize without +config = %d, want the default", got)
	}
	err = rd.Set(ctx, "k", []byte("w"), 0)
	if err == nil || !strings.Contains(err.Error(), "+set") {
		t.Fatalf("Set as a read-only ACL user = %v, want a NOPERM error naming the permission", err)
	}
	t.Log(err)
}
