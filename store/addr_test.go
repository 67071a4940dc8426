package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/redisstore"
)

// TestAddrWithPasswordIsRefusedWithoutPrintingIt: an operator who puts a
// URL, or user:password@host:port, where a host:port belongs gets an
// error that says so, and the password appears in no error. Before,
// redisring echoed the address in its "not host:port" error (and took
// "password@host:port" as a host named "password@host"), memcache did the
// same, and redisstore dialed it and named it in every NodeError.
func TestAddrWithPasswordIsRefusedWithoutPrintingIt(t *testing.T) {
	const secret = "S3cretPW"
	addrs := []string{
		"redis://:" + secret + "@127.0.0.1:1",
		"redis://user:" + secret + "@127.0.0.1:1/0",
		"user:" + secret + "@127.0.0.1:1",
		secret + "@127.0.0.1:1",
		"memcache://" + secret + "@127.0.0.1:1",
		// The host left out: the password stands where the port goes.
		"user:" + secret,
		":" + secret,
		"127.0.0.1:" + secret,
	}
	ctx := context.Background()
	for _, a := range addrs {
		var errs []error
		if s, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{a}, StartWait: -1}); err != nil {
			errs = append(errs, err)
		} else {
			_, gerr := s.Get(ctx, "k")
			s.Close()
			t.Errorf("redisstore.New accepted %s (Get: %v)", "the address", gerr)
		}
		if _, err := redisring.New(ctx, redisring.Options{Servers: []string{a, "127.0.0.1:2"}}); err != nil {
			errs = append(errs, err)
		} else {
			t.Error("redisring.New accepted the address")
		}
		if _, err := memcache.New(ctx, memcache.Options{Servers: []string{a}}); err != nil {
			errs = append(errs, err)
		} else {
			t.Error("memcache.New accepted the address")
		}
		for _, err := range errs {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("an error prints the password: %v", err)
			}
		}
		if err := store.CheckAddr("Addrs[0]", a); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("CheckAddr = %v", err)
		}
	}
	for _, ok := range []string{"127.0.0.1:6379", "[::1]:6379", "cache.internal:11211", "localhost"} {
		if err := store.CheckAddr("Addrs[0]", ok); err != nil {
			t.Errorf("CheckAddr(%q) = %v", ok, err)
		}
	}
}
