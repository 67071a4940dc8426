package loadgen

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// askSentinels asks the target's sentinels, in turn, for the address of
// the primary of its master set, authenticating with the sentinels' own
// credentials (and TLS when the target is rediss+sentinel://). The run
// then loads that primary as a standalone server: a failover during the
// run is not followed (the run reports the errors).
func askSentinels(ctx context.Context, s *settings) (string, error) {
	t := s.target
	ss := *s
	ss.target.User, ss.target.Password = t.SentinelUser, t.SentinelPassword
	var errs []string
	for _, a := range t.Sentinels {
		c, err := dial(ctx, &ss, a)
		if err != nil {
			if isAuthError(err) {
				return "", err // names sentinel_password= (redisHandshake)
			}
			errs = append(errs, err.Error())
			continue
		}
		v, err := c.redisDo("SENTINEL", "GET-MASTER-ADDR-BY-NAME", t.MasterSet)
		c.close()
		if err != nil {
			errs = append(errs, fmt.Sprintf("sentinel %s: %v", a, err))
			continue
		}
		hp, _ := v.([]any)
		if len(hp) != 2 {
			errs = append(errs, fmt.Sprintf("sentinel %s does not know master set %q", a, t.MasterSet))
			continue
		}
		host, _ := hp[0].(string)
		port, _ := hp[1].(string)
		if host == "" || port == "" {
			errs = append(errs, fmt.Sprintf("sentinel %s answered %v for master set %q", a, v, t.MasterSet))
			continue
		}
		return net.JoinHostPort(host, port), nil
	}
	return "", fmt.Errorf("no sentinel named the primary of %q: %s", t.MasterSet, strings.Join(errs, "; "))
}
