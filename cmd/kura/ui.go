package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/redial"
	"github.com/kuracache/kura/internal/results"
	"github.com/kuracache/kura/ui"
)

func newUICmd() *cobra.Command {
	var (
		listen     string
		token      string
		tokenFile  string
		urlFile    string
		hosts      []string
		tlsCert    string
		tlsKey     string
		maxValue   string
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
token: the one in --token-file or $KURA_UI_TOKEN (or --token, visible in ps),
at least 16 characters, else a random one. The URL with the token is printed
once, here, to the terminal that started it; it is never logged, and the
console drops it from the browser's address bar at once (a cookie for this
port follows). The store URL, which may hold a password, can come from
--url-file or $KURA_UI_URL instead of the command line.

Requests whose Host header is not the console's address are refused (a web
page cannot reach it through a rebound DNS name); add a proxy's name with
--host. --tls-cert and --tls-key serve HTTPS; otherwise keep it on loopback
or behind a TLS proxy (docs/ui.md). A key page reads and decodes at most
--max-value of a value (1MiB; larger values show their first bytes) and two
pages decode at once. Requests never change the cache, and values are never
logged.

Saved results are read from $KURA_RESULTS_DIR, else $XDG_STATE_HOME/kura/results,
else ~/.local/state/kura/results (kura scan writes there).`,
		Example: `  kura ui redis://127.0.0.1:6379
  kura ui redis://10.0.0.1:6379,10.0.0.2:6379 --mask email,phone
  kura ui memcached://10.0.0.1:11211 --listen 0.0.0.0:7777   # prints the URL with its token`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var err error
			if urlFile != "" {
				if url != "" || len(args) > 0 {
					return errors.New("give the URL once: --url-file, --url or the first argument")
				}
				if url, err = readSecretFile(urlFile); err != nil {
					return fmt.Errorf("--url-file: %w", err)
				}
			} else if url == "" && len(args) == 0 {
				url = os.Getenv("KURA_UI_URL")
			}
			raw, rest, err := takeURL(url, args, true)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return fmt.Errorf("ui takes at most one URL; %q is one argument too many", rest[0])
			}
			if tokenFile != "" {
				if token != "" {
					return errors.New("give the token once: --token-file or --token")
				}
				if token, err = readSecretFile(tokenFile); err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
			}
			if token == "" {
				token = os.Getenv("KURA_UI_TOKEN")
			}
			if token != "" && len(token) < ui.MinTokenLen {
				return fmt.Errorf("the token has %d characters; use at least %d (leave it out for a random one)", len(token), ui.MinTokenLen)
			}
			if (tlsCert == "") != (tlsKey == "") {
				return errors.New("--tls-cert and --tls-key go together")
			}
			if tlsCert != "" {
				// Checked before the URL is printed: a console that cannot
				// serve TLS must not announce an address.
				if _, err := tls.LoadX509KeyPair(tlsCert, tlsKey); err != nil {
					return fmt.Errorf("--tls-cert %s, --tls-key %s: %v", tlsCert, tlsKey, err)
				}
			}
			maxBytes := int64(0)
			if maxValue != "" {
				if maxBytes, err = parseSize(maxValue); err != nil || maxBytes < 1 || maxBytes > 1<<30 {
					return fmt.Errorf("--max-value %q: want a size from 1 byte to 1GiB", maxValue)
				}
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
			opts := ui.Options{Token: token, Mask: mask, ResultsDir: resultsDir, Hosts: hosts, Secure: tlsCert != "", MaxValueBytes: int(maxBytes)}
			if raw != "" {
				st, target, err := openStore(ctx, raw)
				if err != nil {
					return err
				}
				defer st.Close()
				opts.Store, opts.Target = st, target.Redacted()
				// Structs stored as arrays (the compact envelope) are shown
				// with the field names of their published schemas, and values
				// compressed with a dictionary are decoded with the one their
				// writer published (checked against the digest they carry).
				if reg, err := dictstore.New(dictstore.Options{Store: st}); err == nil {
					opts.Schemas, opts.Dictionaries = reg, reg
				}
			}
			ln, err := net.Listen("tcp", listen)
			if errors.Is(err, syscall.EADDRINUSE) {
				// Most often a kura ui already running there.
				return fmt.Errorf("--listen %s: the port is taken (another kura ui?); stop that one or choose another port, such as --listen 127.0.0.1:7778", listen)
			}
			if err != nil {
				return fmt.Errorf("--listen %s: %v", listen, redial.Cause(err))
			}
			opts.Listen = ln.Addr().String()
			h, err := ui.New(opts)
			if err != nil {
				ln.Close()
				return err
			}
			scheme := "http"
			if tlsCert != "" {
				scheme = "https"
			}
			url := scheme + "://" + ln.Addr().String() + "/"
			if token != "" {
				url += "?token=" + token // printed once, to this terminal: the deliberate exception
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kura ui: %s\n", url)
			return serve(ctx, ln, h, tlsCert, tlsKey, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7777", "address to listen on (a token is required unless it is a loopback address)")
	f.StringVar(&token, "token", "", "token every request must carry, at least 16 characters (visible in ps: prefer --token-file or $KURA_UI_TOKEN; default random when not on loopback)")
	f.StringVar(&tokenFile, "token-file", "", "read the token from this file (its first line)")
	f.StringVar(&urlFile, "url-file", "", "read the store URL (it may hold a password) from this file, not the command line (or set $KURA_UI_URL)")
	f.StringSliceVar(&hosts, "host", nil, "further Host names to answer (a reverse proxy's name); others are refused (DNS rebinding)")
	f.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM), with --tls-key")
	f.StringVar(&tlsKey, "tls-key", "", "the certificate's private key (PEM)")
	f.StringVar(&maxValue, "max-value", "", "the most of a value a key page reads and decodes (default 1MiB; larger values show their first bytes)")
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

// readSecretFile returns the first line of a file holding a secret.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return line, nil
}

// serve runs the console until ctx ends, over TLS when cert and key are
// given. Server errors go to stderr without request details (no URL, no
// key, no value).
func serve(ctx context.Context, ln net.Listener, h http.Handler, cert, key string, stderr io.Writer) error {
	srv := ui.Server(h)
	errc := make(chan error, 1)
	go func() {
		if cert != "" {
			errc <- srv.ServeTLS(ln, cert, key)
			return
		}
		errc <- srv.Serve(ln)
	}()
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
