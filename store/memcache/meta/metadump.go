package meta

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DumpItem is one line of `lru_crawler metadump`: an item's key and what
// the server keeps about it.
type DumpItem struct {
	// Key is the item's key (metadump sends it URI-encoded; this is the
	// decoded form).
	Key string
	// Exp is the absolute expiry time (unix seconds), -1 for none.
	Exp int64
	// LastAccess is the last access time (unix seconds).
	LastAccess int64
	// Size is the item's total size in the slab: header, key, value and
	// flags. It is the server's memory for the item, not the value length
	// (read that with mg's s flag).
	Size int64
	// Class is the slab class.
	Class int
}

// ErrCrawlerBusy is matched by Metadump's error when the server's LRU
// crawler is busy with another request; try again later.
var ErrCrawlerBusy = errors.New("meta: the LRU crawler is busy")

// Metadump streams the server's item list: `lru_crawler metadump hash`
// (memcached 1.6: a walk of the hash table, which sees every item once
// even while the LRU maintainer moves items between LRU segments), or
// `lru_crawler metadump all` (the LRU lists) on servers without the hash
// mode. each is called once per live item, in the server's order, on the
// calling goroutine. An error from each stops the dump (the connection is
// then closed, not reused) and is returned. A server started without the
// LRU crawler answers with an error that says so.
func (cl *Client) Metadump(ctx context.Context, each func(DumpItem) error) error {
	err := cl.metadump(ctx, "hash", each)
	if errors.Is(err, errDumpMode) {
		err = cl.metadump(ctx, "all", each)
	}
	return err
}

// errDumpMode: the server refused the dump mode before sending any item.
var errDumpMode = errors.New("meta: metadump mode not supported")

func (cl *Client) metadump(ctx context.Context, mode string, each func(DumpItem) error) error {
	c, err := cl.Conn(ctx)
	if err != nil {
		return err
	}
	defer cl.Put(c)
	c.Begin(ctx)
	defer c.End()
	if _, err := c.bw.WriteString("lru_crawler metadump " + mode + "\r\n"); err != nil {
		return c.fail(err)
	}
	if err := c.Flush(); err != nil {
		return err
	}
	for first := true; ; first = false {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = fmt.Errorf("memcache %s: %w: metadump line too long", cl.addr, ErrProtocol)
			}
			return c.fail(err)
		}
		s := strings.TrimRight(string(line), "\r\n")
		switch {
		case s == "END":
			return nil
		case strings.HasPrefix(s, "BUSY"):
			return c.fail(fmt.Errorf("memcache %s: %w (%s)", cl.addr, ErrCrawlerBusy, s))
		case first && mode != "all" && (s == "ERROR" || strings.HasPrefix(s, "CLIENT_ERROR")):
			return errDumpMode // the line is consumed: the connection is in step
		case strings.HasPrefix(s, "ERROR"), strings.HasPrefix(s, "CLIENT_ERROR"), strings.HasPrefix(s, "SERVER_ERROR"):
			return c.fail(fmt.Errorf("memcache %s: lru_crawler metadump %s: %s", cl.addr, mode, s))
		}
		it, err := ParseDumpLine(s)
		if err != nil {
			return c.fail(fmt.Errorf("memcache %s: %w: %v", cl.addr, ErrProtocol, err))
		}
		if err := each(it); err != nil {
			return c.fail(err)
		}
	}
}

// ParseDumpLine parses one metadump line such as
// "key=user%3A1 exp=-1 la=1700000000 cas=5 fetch=no cls=1 size=70".
// Fields it does not know are ignored; key is required.
func ParseDumpLine(line string) (DumpItem, error) {
	it := DumpItem{Exp: -1}
	haveKey := false
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		var err error
		switch k {
		case "key":
			it.Key, err = url.QueryUnescape(v)
			haveKey = err == nil && it.Key != ""
		case "exp":
			it.Exp, err = strconv.ParseInt(v, 10, 64)
		case "la":
			it.LastAccess, err = strconv.ParseInt(v, 10, 64)
		case "size":
			it.Size, err = strconv.ParseInt(v, 10, 64)
			if err == nil && it.Size < 0 {
				err = errors.New("negative size")
			}
		case "cls":
			it.Class, err = strconv.Atoi(v)
		}
		if err != nil {
			return DumpItem{}, fmt.Errorf("metadump line %q: field %s: %v", truncate(line, 200), k, err)
		}
	}
	if !haveKey {
		return DumpItem{}, fmt.Errorf("metadump line %q: no key", truncate(line, 200))
	}
	return it, nil
}

// TTL returns the time left before the item expires, measured from now;
// ok is false for an item without expiry.
func (it DumpItem) TTL(now time.Time) (ttl time.Duration, ok bool) {
	if it.Exp < 0 {
		return 0, false
	}
	return max(time.Unix(it.Exp, 0).Sub(now), 0), true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
