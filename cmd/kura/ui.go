package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/internal/results"
	"github.com/kuracache/kura/ui"
)

func newUICmd() *cobra.Command {
	var (
		listen     string
		token      string
		mask       []string
		resultsDir string
		url        string
	)
	cmd := &cobra.Command{
		Use:   "ui [URL]",
		Short: "A read-only web console: decode a key, see the last scan with charts, list saved results",
		Long: `ui serves a small read-only web console for the people who need to read cached
values that are now compressed: enter a key and see its envelope header and the
value decoded as JSON (fields named by --mask shown as ***); the last kura scan
report with charts (value sizes, top patterns by memory and by potential
savings); and the saved scan and bench results.

It listens on 127.0.0.1 by default. Bound to any other address it requires a
token: the one given with --token (or $KURA_UI_TOKEN), else a random one. The
URL with the token is printed once, here, to the terminal that started it; it
is never logged. Requests never change the cache, and values are never logged.

Saved results are read from $KURA_RESULTS_DIR, else $XDG_STATE_HOME/kura/results,
else ~/.local/state/kura/results (kura scan writes there).`,
		Example: `  kura ui redis://127.0.0.1:6379
  kura ui redis://10.0.0.1:6379,10.0.0.2:6379 --mask email,phone
  kura ui memcached://10.0.0.1:11211 --listen 0.0.0.0:7777   # prints the URL with its token`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			raw, rest, err := takeURL(url, args, true)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return fmt.Errorf("ui takes at most one URL; %q is one argument too many", rest[0])
			}
			if token == "" {
				token = os.Getenv("KURA_UI_TOKEN")
			}
			needToken, err := needsToken(listen)
			if err != nil {
				return fmt.Errorf("--listen %q: %w", listen, err)
			}
			if needToken && token == "" {
				token = newToken()
			}
			if resultsDir == "" {
				if resultsDir, err = results.Dir(); err != nil {
					return err
				}
			}
			opts := ui.Options{Token: token, Mask: mask, ResultsDir: resultsDir}
			if raw != "" {
				st, target, err := openStore(ctx, raw)
				if err != nil {
					return err
				}
				defer st.Close()
				opts.Store, opts.Target = st, target.Redacted()
			}
			h, err := ui.New(opts)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			url := "http://" + ln.Addr().String() + "/"
			if token != "" {
				url += "?token=" + token // printed once, to this terminal: the deliberate exception
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kura ui: %s\n", url)
			return serve(ctx, ln, h, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7777", "address to listen on (a token is required unless it is a loopback address)")
	f.StringVar(&token, "token", "", "token every request must carry (default: $KURA_UI_TOKEN, else random when not on loopback)")
	f.StringSliceVar(&mask, "mask", nil, "field names whose values are shown as *** (personal data)")
	addURLFlag(f, &url, urlHelp)
	f.StringVar(&resultsDir, "results-dir", "", "directory of saved results (default $KURA_RESULTS_DIR, else $XDG_STATE_HOME/kura/results, else ~/.local/state/kura/results)")
	return cmd
}

// needsToken reports whether addr listens beyond loopback.
func needsToken(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return false, nil
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback(), nil
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// serve runs the console until ctx ends. Server errors go to stderr
// without request details (no URL, no key, no value).
func serve(ctx context.Context, ln net.Listener, h http.Handler, stderr io.Writer) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintln(stderr, "kura ui:", err)
		}
		return nil
	}
}
