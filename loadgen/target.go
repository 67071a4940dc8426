package loadgen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kuracache/kura/ring"
	"github.com/kuracache/kura/store/storeurl"
)

// Kind is the server family a Target names.
type Kind string

// Server families.
const (
	KindRedis     Kind = "redis"
	KindMemcached Kind = "memcached"
)

// Target is a parsed Config.Target.
type Target struct {
	Kind Kind
	// Addrs are host:port seed addresses (one for a standalone server).
	Addrs []string
	// User and Password authenticate to Redis (AUTH [user] password).
	User, Password string
	// DB is the Redis database number (SELECT), standalone only.
	DB int
	// TLS is set for rediss://.
	TLS bool
	// Cluster is set when the URL names several Redis addresses; Run also
	// sets it when the server reports cluster_enabled:1.
	Cluster bool
	// Ring is set for redis+ring:// (standalone Redis shards): the ring
	// store/redisring places keys with (storeurl.Target.Placement), built
	// from the URL's ring=, weights=, names= and hashtag=, so each shard
	// gets the keys a kura application on the same URL sends it.
	Ring ring.Ring
	// RingMode is the URL's ring= ("" for the default, go-redis).
	RingMode ring.Mode
	// MasterSet is set for redis+sentinel://: Sentinels are the
	// sentinels' addresses and Addrs, empty until Run asks them, the
	// primary they name (SENTINEL GET-MASTER-ADDR-BY-NAME). SentinelUser
	// and SentinelPassword authenticate to the sentinels.
	MasterSet                      string
	Sentinels                      []string
	SentinelUser, SentinelPassword string
}

// String returns the target without its password.
func (t Target) String() string {
	scheme := string(t.Kind)
	if t.TLS {
		scheme = "rediss"
	}
	if t.Ring != nil {
		scheme += "+ring"
	}
	if t.MasterSet != "" {
		scheme += "+sentinel"
	}
	s := scheme + "://"
	if t.User != "" {
		s += t.User + "@"
	}
	if t.MasterSet != "" {
		s += strings.Join(t.Sentinels, ",") + "/" + t.MasterSet
		if len(t.Addrs) > 0 {
			s += " (primary " + strings.Join(t.Addrs, ",") + ")"
		}
		return s
	}
	s += strings.Join(t.Addrs, ",")
	if t.DB != 0 {
		s += "/" + strconv.Itoa(t.DB)
	}
	if t.RingMode != "" {
		s += "?ring=" + string(t.RingMode)
	}
	return s
}

// ParseTarget reads a target URL with storeurl.Parse, the one parser of
// store URLs, and adds the CLI's shorthands (an empty target, a bare
// host:port):
//
//	redis://[user:password@]host[:port][/db]
//	rediss://...                          (TLS)
//	redis://host:port,host:port           (Redis Cluster seeds)
//	redis://host:port?addr=host:port      (the same, rueidis style)
//	redis+ring://host:port,host:port[?ring=...]
//	                                      (standalone shards placed by
//	                                      store/redisring's ring)
//	redis+sentinel://[user:password@]sentinel:port[,...]/masterset[?sentinel_password=...]
//	                                      (the primary the sentinels name,
//	                                      asked once when the run starts)
//	memcached://host:port[,host:port...]  (a memcached pool)
//	host:port                             (redis://host:port)
//
// The default ports are 6379 and 11211; an empty target is
// redis://127.0.0.1:6379.
func ParseTarget(s string) (Target, error) {
	if s == "" {
		s = "redis://127.0.0.1:6379"
	}
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	st, err := storeurl.Parse(s)
	if err != nil {
		return Target{}, &ConfigError{Reason: "target: " + err.Error(), Err: err}
	}
	t := Target{Addrs: st.Addrs, User: st.User, Password: st.Password, DB: st.DB, TLS: st.TLS, Cluster: st.Cluster}
	switch st.Kind {
	case storeurl.Redis:
		t.Kind = KindRedis
	case storeurl.RedisRing:
		t.Kind = KindRedis
		r, err := st.Placement()
		if err != nil {
			return Target{}, &ConfigError{Reason: fmt.Sprintf("target %s: %v", st.Redacted(), err), Err: err}
		}
		t.Ring, t.RingMode = r, st.Ring
	case storeurl.RedisSentinel:
		t.Kind, t.Addrs, t.DB = KindRedis, nil, 0
		t.MasterSet, t.Sentinels, t.SentinelUser, t.SentinelPassword = st.MasterSet, st.Addrs, st.SentinelUser, st.SentinelPass
		if st.DB != 0 {
			return Target{}, cfgErr("target %s: kura bench uses database 0; drop the database from the URL", st.Redacted())
		}
	case storeurl.Memcached:
		t.Kind = KindMemcached
	default:
		return Target{}, cfgErr("target %q: the scheme must be redis://, rediss://, redis+ring://, redis+sentinel:// or memcached://", st.Redacted())
	}
	return t, nil
}
