package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// script is a Lua script sent with EVALSHA, and with EVAL only for the
// commands the server answers NOSCRIPT (a fresh server, a promoted
// replica, SCRIPT FLUSH; EVAL loads it there for the next time): one
// round trip per batch. rueidis's Lua.ExecMulti sends SCRIPT LOAD to
// every node before each batch, which cost every Fill and Release a
// round trip more (every master's, on a Cluster) and the server a script
// compile per fill (TestFillSendsNoScriptLoad).
type script struct {
	src, sha string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// execMulti runs the script once per exec, pipelined (rueidis sends each
// cluster node its share).
func (l *script) execMulti(ctx context.Context, c rueidis.Client, execs []rueidis.LuaExec) []rueidis.RedisResult {
	cmds := make([]rueidis.Completed, len(execs))
	for i, e := range execs {
		cmds[i] = c.B().Evalsha().Sha1(l.sha).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build()
	}
	res := c.DoMulti(ctx, cmds...)
	var again []int
	for i, r := range res {
		if err, ok := rueidis.IsRedisErr(r.Error()); ok && err.IsNoScript() {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return res
	}
	cmds = cmds[:0]
	for _, i := range again {
		e := execs[i]
		cmds = append(cmds, c.B().Eval().Script(l.src).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build())
	}
	for j, r := range c.DoMulti(ctx, cmds...) {
		res[again[j]] = r
	}
	return res
}
