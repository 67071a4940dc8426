package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kuracache/kura/internal/units"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/storeurl"
)

// The one grammar every kura command shares: the cache is named by a URL,
// either as the first argument or with --url (-u); sizes are read by one
// parser (K and KB are 1,000 bytes, KiB 1,024); an error is one line that
// starts with the command's name.

// urlHelp is the help of --url in every command that reads a cache.
const urlHelp = "the cache: redis://[user:password@]host:port[/db], rediss://... (TLS), redis://h1:p1,h2:p2 (Cluster), redis+ring://h1:p1,h2:p2 (sharded standalone Redis), redis+sentinel://s1:26379[,s2:26379]/MASTERSET (Sentinel) or memcached://h1:p1[,h2:p2]; or give it as the first argument"

// addURLFlag registers --url (-u).
func addURLFlag(f *pflag.FlagSet, p *string, help string) {
	f.StringVarP(p, "url", "u", "", help)
}

// deprecatedAlias registers old as a hidden flag bound to the same value
// as the flag named now, so scripts written for the old name keep working
// and say what to write instead.
func deprecatedAlias(f *pflag.FlagSet, now, old string) {
	fl := f.Lookup(now)
	f.Var(fl.Value, old, fl.Usage)
	_ = f.MarkDeprecated(old, "use --"+now)
}

// takeURL returns the URL a command reads: --url, else the first argument
// when it looks like one (or, with firstIsURL, whatever it is), and the
// arguments that remain.
func takeURL(flagURL string, args []string, firstIsURL bool) (string, []string, error) {
	if flagURL != "" {
		if len(args) > 0 && looksLikeURL(args[0]) {
			return "", nil, errors.New("give the URL once: as the first argument or with --url, not both")
		}
		return flagURL, args, nil
	}
	if len(args) > 0 && (firstIsURL || looksLikeURL(args[0])) {
		return args[0], args[1:], nil
	}
	return "", args, nil
}

// looksLikeURL reports an argument meant as a store URL, mistyped ones
// included ("redis:/…", "redis//…", "memcached:…"), so a command that also
// takes other words there (bench's command template) parses it as a URL
// and refuses it with the password masked, instead of sending it to the
// default server as a command and printing it.
func looksLikeURL(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	i := strings.IndexAny(s, ":/")
	if i <= 0 || !(s[i] == ':' || strings.HasPrefix(s[i:], "//")) {
		return false
	}
	switch strings.ToLower(s[:i]) {
	case "redis", "rediss", "redis+ring", "rediss+ring", "redis+sentinel", "rediss+sentinel",
		"memcached", "memcache", "mem", "memory", "valkey", "unix":
		return true
	}
	return false
}

// openStore parses a URL once and connects to the server it names,
// proving with one PING that it answers and accepts the credentials, so
// every command fails the same way, at the start, with the same words
// (storeurl.Explain).
func openStore(ctx context.Context, raw string) (store.Store, storeurl.Target, error) {
	t, err := storeurl.ParseServer(raw)
	if err != nil {
		return nil, t, err
	}
	t.Resolver = resolverOf(ctx)
	st, err := storeurl.OpenTarget(ctx, t)
	if err != nil {
		return nil, t, err
	}
	if p, ok := store.Find[store.Pinger](st); ok {
		if err := p.Ping(ctx); err != nil {
			st.Close()
			return nil, t, storeurl.Explain(t, err)
		}
	}
	return st, t, nil
}

// parseSize reads a size flag with the one parser of every command:
// "100KB" and "100K" are 100,000 bytes, "64KiB" is 65,536, "4096" bytes.
func parseSize(s string) (int64, error) {
	v, err := units.ParseBytes(s)
	if err != nil {
		return 0, errors.New(strings.TrimPrefix(err.Error(), units.ErrSize.Error()+": "))
	}
	if v > 1<<50 {
		return 0, fmt.Errorf("%q is more than a petabyte", s)
	}
	return int64(v), nil
}

// errorLine is the line main prints for err: "kura CMD: message", with
// the sentinels' own "kura: " prefixes and the command's repeated name
// taken out so that nothing is said twice.
func errorLine(cmd *cobra.Command, err error) string {
	if errors.Is(err, context.Canceled) {
		// Ctrl-C or SIGTERM: what ran was printed; "context canceled"
		// would read as a failure of the command.
		return commandPath(cmd) + ": interrupted"
	}
	if m := unknownCommand.FindStringSubmatch(err.Error()); m != nil {
		// cobra's "unknown command "benhc" for "kura"\n\nDid you mean
		// this?\n\tbench\n", as one line that names the command to run.
		msg := fmt.Sprintf("unknown command %q", m[1])
		if alt := strings.Fields(m[3]); len(alt) > 0 {
			msg += "; did you mean " + m[2] + " " + strings.Join(alt, " or "+m[2]+" ") + "?"
		}
		return "kura: " + msg + " (" + m[2] + " --help lists the commands)"
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	msg = strings.TrimPrefix(msg, "kura: ")
	msg = strings.ReplaceAll(msg, ": kura: ", ": ")
	msg = strings.ReplaceAll(msg, " kura: ", " ")
	for c := cmd; c != nil && c.HasParent(); c = c.Parent() {
		msg = strings.TrimPrefix(msg, c.Name()+": ")
	}
	return commandPath(cmd) + ": " + msg
}

func commandPath(cmd *cobra.Command) string {
	if cmd == nil {
		return "kura"
	}
	return cmd.CommandPath()
}

// unknownCommand matches cobra's error for a mistyped command: the word,
// the command it was given to, and the suggestions, if any.
var unknownCommand = regexp.MustCompile(`(?s)^unknown command "(.*)" for "([^"]*)"(?:\s*Did you mean this\?(.*))?$`)

type resolverKey struct{}

// withResolver returns ctx with the resolver every command looks host
// names up with (tests record lookups with one; nil is the system's).
func withResolver(ctx context.Context, r store.Resolver) context.Context {
	return context.WithValue(ctx, resolverKey{}, r)
}

// resolverOf returns the resolver withResolver put in ctx, or nil.
func resolverOf(ctx context.Context) store.Resolver {
	r, _ := ctx.Value(resolverKey{}).(store.Resolver)
	return r
}
