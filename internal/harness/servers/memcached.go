package servers

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// MemcachedConfig configures a private memcached. The zero value is a 64 MB
// server with 2 threads and the default 1 MB item size limit.
type MemcachedConfig struct {
	// MemoryMB is -m; 0 means 64.
	MemoryMB int
	// Threads is -t; 0 means 2.
	Threads int
	// MaxItemSize is -I in bytes; 0 leaves memcached's default (1 MB).
	MaxItemSize int
	// Args are extra arguments passed through verbatim.
	Args []string
	// Host and Port are as in RedisConfig: the loopback address ("" means
	// 127.0.0.1) and a fixed port (0: a free one).
	Host string
	Port int
}

// Memcached is a running private memcached.
type Memcached struct{ *Proc }

// StartMemcached starts a private memcached on a free loopback port.
func StartMemcached(ctx context.Context, cfg MemcachedConfig) (*Memcached, error) {
	bin, err := LookPath("memcached")
	if err != nil {
		return nil, err
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 64
	}
	if cfg.Threads == 0 {
		cfg.Threads = 2
	}
	host := cmp.Or(cfg.Host, "127.0.0.1")
	p, err := onPort(cfg.Port, func(port int) (*Proc, error) {
		args := []string{"-l", host, "-p", strconv.Itoa(port), "-U", "0",
			"-m", strconv.Itoa(cfg.MemoryMB), "-t", strconv.Itoa(cfg.Threads), "-u", "root"}
		if cfg.MaxItemSize > 0 {
			args = append(args, "-I", strconv.Itoa(cfg.MaxItemSize))
			// memcached refuses to start when -I is below its default
			// slab chunk size (512 KiB) unless the chunk size follows.
			if cfg.MaxItemSize < 512<<10 {
				args = append(args, "-o", "slab_chunk_max="+strconv.Itoa(cfg.MaxItemSize/2))
			}
		}
		args = append(args, cfg.Args...)
		return startReady(ctx, "memcached", bin, args, net.JoinHostPort(host, strconv.Itoa(port)),
			func(ctx context.Context, p *Proc) error {
				s, err := roundTrip(ctx, p.Addr, "version")
				if err == nil && !strings.HasPrefix(s, "VERSION") {
					err = fmt.Errorf("version answered %q", s)
				}
				return err
			})
	})
	if err != nil {
		return nil, err
	}
	p.killOnStop = true // memcached keeps nothing; SIGTERM takes up to 1s
	return &Memcached{Proc: p}, nil
}
