// Package ui is the web console behind `kura ui`: for the people who used
// to read cached values in Redis and cannot since they are compressed, a
// key page that decodes a value and its envelope header (package
// inspect), the last `kura scan` report with charts, a saved `kura
// bench` result as a page of its figures, and the list of saved results
// (package internal/results), each with its raw JSON a link away.
//
// It is read-only (GET and HEAD only; it never writes to the cache), its
// templates and styles are embedded (no build step, no script), values are
// never logged and can be masked by field name, and when it is given a
// token every request must carry it (?token=..., then a cookie; or an
// Authorization: Bearer header).
//
// It holds up against a hostile cache and a hostile web page (docs/ui.md):
// a request reads and decodes at most Options.MaxValueBytes of a value and
// at most Options.MaxDecodes requests decode at once; a request whose Host
// header is not the console's own address is refused (DNS rebinding); the
// token is dropped from the URL at once and the cookie holds a value
// derived from it, never the token; key names, values and report text are
// shown with every control and bidirectional character escaped; saved
// reports are checked before they are drawn.
package ui

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/inspect"
	"github.com/kuracache/kura/internal/deadline"
	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/internal/results"
	"github.com/kuracache/kura/internal/vis"
	"github.com/kuracache/kura/loadgen"
	"github.com/kuracache/kura/scan"
	"github.com/kuracache/kura/store"
)

//go:embed assets
var assets embed.FS

// cookiePrefix starts the name of the cookie that authenticates a browser
// after a first request gave the token in the URL; the listening port
// follows, so consoles on one host do not share a cookie.
const cookiePrefix = "kura_ui_"

// MaxKeyLen bounds a key typed into the key page.
const MaxKeyLen = 4096

// MinTokenLen is the shortest token New accepts.
const MinTokenLen = 16

// Defaults of the zero Options.
const (
	// DefaultMaxValueBytes is how much of a value the key page reads and
	// decodes when Options.MaxValueBytes is 0.
	DefaultMaxValueBytes = 1 << 20
	// DefaultMaxDecodes is how many key pages decode at once when
	// Options.MaxDecodes is 0.
	DefaultMaxDecodes = 2
)

// Options configures New. The zero value serves the results pages only.
type Options struct {
	// Store is where the key page reads keys. If nil, the key page says
	// no store was given.
	Store store.Store
	// Target names the store on the pages (redacted).
	Target string
	// ResultsDir holds the saved scan and bench results. If empty,
	// results.Dir().
	ResultsDir string
	// Token, if not empty, is required on every request. It must be at
	// least MinTokenLen (16) characters.
	Token string
	// Listen is the address the console is served on, as given to
	// net.Listen ("127.0.0.1:7777"). A request whose Host header names
	// another host or port is refused (421), so a web page cannot reach
	// the console through a DNS name it rebinds to 127.0.0.1. Names of
	// the loopback address (localhost, 127.0.0.1, ::1) are accepted for a
	// loopback Listen; any Host for an unspecified address (0.0.0.0),
	// which needs a Token. If empty, only loopback names are accepted.
	Listen string
	// Hosts are further Host names accepted (a reverse proxy's name).
	Hosts []string
	// Secure marks the console as served over TLS (directly or by a
	// proxy): the cookie is then sent only over TLS.
	Secure bool
	// MaxValueBytes bounds the bytes of a value a key page reads and
	// decodes; a larger value is shown as its first bytes, and the page
	// says so. If 0, DefaultMaxValueBytes (1 MiB).
	MaxValueBytes int
	// MaxDecodes bounds the key pages that read and decode at once;
	// others wait for a slot (until their request ends). If 0,
	// DefaultMaxDecodes (2).
	MaxDecodes int
	// Mask lists field names whose values are shown as "***" (matched
	// case-insensitively).
	Mask []string
	// Codec decodes kura values (give it your dictionaries). If nil, a
	// default codec whose MaxDecodedSize is 4 x MaxValueBytes and whose
	// DictionarySource is Dictionaries.
	Codec *codec.Codec
	// Dictionaries finds the dictionaries values were compressed with
	// when Codec is nil (inspect.Options.Dictionaries; dictstore.Registry
	// is one). If nil, such values are shown with a note naming the
	// dictionary they need.
	Dictionaries codec.DictionarySource
	// Schemas names the fields of structs stored as arrays (the compact
	// envelope) from their published schemas (inspect.Options.Schemas).
	// If nil, they are shown as arrays.
	Schemas inspect.SchemaSource
}

type server struct {
	opts   Options
	tmpl   *template.Template
	mux    *http.ServeMux
	slots  chan struct{}
	cookie string // the cookie's name
	// session keys the cookie's value (sessionFor): derived from the token, so that a
	// cookie sent to another service on the same host does not give the
	// token away.
	session string
	port    string
	lhost   string // Listen's host ("" when empty)
}

// New returns the console's handler.
func New(opts Options) (http.Handler, error) {
	if opts.ResultsDir == "" {
		d, err := results.Dir()
		if err != nil {
			return nil, err
		}
		opts.ResultsDir = d
	}
	if opts.Token != "" && len(opts.Token) < MinTokenLen {
		return nil, fmt.Errorf("ui: Options.Token has %d characters; use at least %d (a random one: leave it empty on a non-loopback address and kura ui makes one)", len(opts.Token), MinTokenLen)
	}
	if opts.MaxValueBytes < 0 || opts.MaxDecodes < 0 {
		return nil, errors.New("ui: Options.MaxValueBytes and Options.MaxDecodes must not be negative")
	}
	if opts.MaxValueBytes == 0 {
		opts.MaxValueBytes = DefaultMaxValueBytes
	}
	if opts.MaxDecodes == 0 {
		opts.MaxDecodes = DefaultMaxDecodes
	}
	if opts.Codec == nil {
		c, err := codec.New(codec.Options{MaxDecodedSize: 4 * opts.MaxValueBytes, DictionarySource: opts.Dictionaries})
		if err != nil {
			return nil, err
		}
		opts.Codec = c
	}
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	s := &server{opts: opts, tmpl: t, mux: http.NewServeMux(), slots: make(chan struct{}, opts.MaxDecodes), cookie: cookiePrefix + "token"}
	if opts.Listen != "" {
		h, p, err := net.SplitHostPort(opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("ui: Options.Listen %q: %w", opts.Listen, err)
		}
		s.lhost, s.port = strings.Trim(h, "[]"), p
		if p != "" && p != "0" {
			s.cookie = cookiePrefix + p
		}
		if (s.lhost == "" || isUnspecified(s.lhost)) && opts.Token == "" {
			return nil, fmt.Errorf("ui: listening on %q (every address) needs a Token", opts.Listen)
		}
	}
	if opts.Token != "" {
		m := hmac.New(sha256.New, []byte(opts.Token))
		m.Write([]byte("kura ui session cookie"))
		s.session = hex.EncodeToString(m.Sum(nil))
	}
	css, err := assets.ReadFile("assets/style.css")
	if err != nil {
		return nil, err
	}
	// Only the style sheet: the templates stay unlisted and unserved.
	s.mux.HandleFunc("GET /static/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Write(css)
	})
	s.mux.HandleFunc("GET /{$}", s.home)
	s.mux.HandleFunc("GET /key", s.key)
	s.mux.HandleFunc("GET /scan", s.scanPage)
	s.mux.HandleFunc("GET /results", s.resultsPage)
	s.mux.HandleFunc("GET /results/file", s.resultFile)
	s.mux.HandleFunc("GET /bench", s.benchPage)
	return s, nil
}

func isUnspecified(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsUnspecified()
}

// hostAllowed reports whether the request's Host header names this
// console (see Options.Listen).
func (s *server) hostAllowed(r *http.Request) bool {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	for _, h := range s.opts.Hosts {
		if strings.EqualFold(h, host) || strings.EqualFold(h, r.Host) {
			return true
		}
	}
	if s.port != "" && s.port != "0" && port != s.port {
		return false
	}
	if s.lhost != "" && isUnspecified(s.lhost) {
		return true // a token is required (New)
	}
	if s.lhost != "" && strings.EqualFold(host, s.lhost) {
		return true
	}
	loopbackListen := s.lhost == "" || s.lhost == "localhost"
	if ip := net.ParseIP(s.lhost); ip != nil && ip.IsLoopback() {
		loopbackListen = true
	}
	if !loopbackListen {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A page that fails must not take the console down or print a
		// trace with request data; say so and go on.
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			http.Error(w, "internal error (this page failed; the console goes on)", http.StatusInternalServerError)
		}
	}()
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store") // pages may show personal data
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "read-only console: only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	if !s.hostAllowed(r) {
		http.Error(w, "unknown Host: open the console by the address kura ui printed (a page on another name may be a DNS rebinding attack; a proxy's name is added with --host)", http.StatusMisdirectedRequest)
		return
	}
	if !sameOrigin(r) {
		// Any web page the operator opens could otherwise make the
		// browser request key pages (the CPU and memory of the console,
		// and the values, through a rebinding or a leak), also on loopback
		// where there is no token.
		http.Error(w, "cross-site request refused: open the console by the address kura ui printed, not from another page or site", http.StatusForbidden)
		return
	}
	if s.opts.Token != "" {
		if q := r.URL.Query(); q.Has("token") {
			// The token leaves the URL at once (history, screenshots,
			// Referer): a valid one becomes the cookie, and the browser is
			// sent to the same page without it.
			if !s.eq(q.Get("token"), s.opts.Token) {
				http.Error(w, "wrong token", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.sessionFor(r), Path: "/", HttpOnly: true, Secure: s.opts.Secure, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			u.Scheme, u.Host = "", ""
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if !s.authorized(r) {
			http.Error(w, "token required: open the URL printed by `kura ui` (it ends in ?token=...)", http.StatusUnauthorized)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// sessionFor returns the cookie's value for a request: derived from the
// token (a cookie sent to another service on the same host does not give
// the token away) and from the console's origin as the browser named it
// (the Host header), so that it is worth nothing to a console on another
// port or name, even one started with the same token.
func (s *server) sessionFor(r *http.Request) string {
	m := hmac.New(sha256.New, []byte(s.opts.Token))
	m.Write([]byte(s.session))
	m.Write([]byte{0})
	m.Write([]byte(strings.ToLower(r.Host)))
	return hex.EncodeToString(m.Sum(nil))
}

// sameOrigin reports whether a request may come from the console's own
// pages: a browser's Fetch metadata (Sec-Fetch-Site) must say
// same-origin or none (typed, a bookmark), and an Origin header must name
// the console's Host. Clients that send neither (curl, scripts) pass: they
// are not a web page acting in the operator's browser. A page on another
// port of the same host is same-site, not same-origin: refused too.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) && (u.Scheme == "http" || u.Scheme == "https")
}

func (s *server) eq(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (s *server) authorized(r *http.Request) bool {
	if c, err := r.Cookie(s.cookie); err == nil && s.eq(c.Value, s.sessionFor(r)) {
		return true
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.eq(a, s.opts.Token) {
		return true
	}
	return false
}

type page struct {
	Title  string
	Target string
	Nav    string
	Data   any
	Error  string
}

func (s *server) render(w http.ResponseWriter, name string, p page) {
	p.Target = vis.Escape(redact.URL(s.opts.Target))
	p.Error = vis.Escape(p.Error)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.ExecuteTemplate(w, name, p); err != nil {
		// Headers are out; say so in the page rather than in a log.
		fmt.Fprintf(w, "<p class=error>template error: %s</p>", template.HTMLEscapeString(err.Error()))
	}
}

func (s *server) home(w http.ResponseWriter, r *http.Request) {
	list, err := results.List(s.opts.ResultsDir)
	p := page{Title: "console", Nav: "home", Data: struct {
		HaveStore bool
		Results   []results.Entry
	}{s.opts.Store != nil, first(list, 10)}}
	if err != nil {
		p.Error = err.Error()
	}
	s.render(w, "home.html", p)
}

func first[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

type keyView struct {
	Key    string
	Report *inspect.Report
	Value  string
	// Cut says the value shown is a prefix, and of what.
	Cut string
}

// MaxShownBytes bounds the text of a decoded value a key page shows,
// whatever the value and Options.MaxValueBytes: with HTML escaping and
// the escaping of controls, a page's body stays within a few times this.
const MaxShownBytes = 1 << 20

func (s *server) key(w http.ResponseWriter, r *http.Request) {
	k := r.URL.Query().Get("k")
	p := page{Title: "key", Nav: "key"}
	v := keyView{Key: k}
	switch {
	case k == "":
	case len(k) > MaxKeyLen:
		p.Error = fmt.Sprintf("key longer than %d bytes", MaxKeyLen)
	case s.opts.Store == nil:
		p.Error = "no store: start kura ui with a store URL (kura ui redis://...)"
	default:
		select {
		case s.slots <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		s.describe(r, k, &v, &p)
		<-s.slots
	}
	p.Data = v
	s.render(w, "key.html", p)
}

// KeyTimeout bounds the store reads of one key page. A stalled server
// (SIGSTOP, a frozen host) otherwise held the page, and one of the two
// decode slots every other key page waits for, until the client's
// connection timed out (about 20 s with Redis).
const KeyTimeout = 5 * time.Second

// describe reads and decodes key k, within MaxValueBytes and KeyTimeout.
func (s *server) describe(r *http.Request, k string, v *keyView, p *page) {
	ctx, cancel := context.WithTimeout(r.Context(), KeyTimeout)
	defer cancel()
	rep, err := inspect.Key(ctx, s.opts.Store, k, inspect.Options{
		Codec: s.opts.Codec, Mask: s.opts.Mask, MaxStored: s.opts.MaxValueBytes, MaxDecoded: 4 * s.opts.MaxValueBytes,
		Schemas: s.opts.Schemas,
	})
	if err != nil {
		p.Error = err.Error()
		// A deadline error is KeyTimeout's unless the request's own
		// context ended, also when the store reports it a moment before
		// the context's timer marks ctx done (deadline.Ours).
		if deadline.Ours(r.Context(), err) || deadline.Ours(r.Context(), ctx.Err()) {
			p.Error = fmt.Sprintf("the store did not answer within %v (a stalled or overloaded server): %v", KeyTimeout, err)
		}
		return
	}
	if !rep.Truncated && rep.StoredBytes > s.opts.MaxValueBytes {
		// A store that cannot read part of a value (in process): what
		// was read is not shown past the bound either.
		rep.Truncated = true
	}
	v.Report = &rep
	if rep.Truncated {
		v.Value = vis.EscapeBytes(rep.Prefix)
		v.Cut = fmt.Sprintf("the first %d of %d bytes, as stored (the console decodes values up to %d bytes; kura inspect reads any size)", len(rep.Prefix), rep.StoredBytes, s.opts.MaxValueBytes)
		return
	}
	if len(rep.Value) == 0 {
		return
	}
	// Indentation multiplies a deep value's size (62 levels: about 100
	// times); the indenter stops at the page's bound, whatever the value.
	text, cut := inspect.Indent(rep.Value, "", "  ", MaxShownBytes)
	if cut {
		v.Cut = fmt.Sprintf("the first %d bytes of the decoded value (%d bytes as compact JSON)", MaxShownBytes, len(rep.Value))
	}
	// JSON escapes C0 controls, not C1 or bidirectional ones; escape
	// line by line to keep the indentation, backslashes single (they are
	// JSON's own escapes).
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = vis.EscapeJSON(l)
	}
	v.Value = strings.Join(lines, "\n")
}

// MaxResultFileBytes bounds what a scan or bench page reads of a saved
// result: a larger file (hand-edited or planted) is refused before it is
// read, so a request costs at most this much memory; its raw JSON link
// streams it instead.
const MaxResultFileBytes = 16 << 20

// findResult names a saved result; only names that List returns are
// opened (no path from the request reaches the file system).
func (s *server) findResult(name, kind string) (results.Entry, error) {
	list, err := results.List(s.opts.ResultsDir)
	if err != nil {
		return results.Entry{}, err
	}
	for _, e := range list {
		if (name == "" && e.Kind == kind) || (name != "" && e.Name == name) {
			return e, nil
		}
	}
	if name == "" {
		return results.Entry{}, fmt.Errorf("no saved %s in %s: run kura %s first", kind, s.opts.ResultsDir, kind)
	}
	return results.Entry{}, errNoSuchResult
}

// loadResult reads a saved result of at most MaxResultFileBytes.
func (s *server) loadResult(name, kind string) (results.Entry, []byte, error) {
	e, err := s.findResult(name, kind)
	if err != nil {
		return e, nil, err
	}
	f, err := os.Open(filepath.Join(s.opts.ResultsDir, e.Name))
	if err != nil {
		return e, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxResultFileBytes+1))
	if err == nil && len(b) > MaxResultFileBytes {
		return e, nil, fmt.Errorf("%s is over %d MiB: not drawn here (its raw JSON link serves it)", e.Name, MaxResultFileBytes>>20)
	}
	return e, b, err
}

var errNoSuchResult = errors.New("no such result")

type scanView struct {
	Entry     results.Entry
	R         *scan.Report
	Histogram template.HTML
	ByMemory  template.HTML
	BySavings template.HTML
}

func (s *server) scanPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "scan", Nav: "scan"}
	e, b, err := s.loadResult(r.URL.Query().Get("f"), "scan")
	if err != nil {
		if errors.Is(err, errNoSuchResult) {
			w.WriteHeader(http.StatusNotFound)
		}
		p.Error = err.Error()
		s.render(w, "scan.html", p)
		return
	}
	var rep scan.Report
	if err := json.Unmarshal(b, &rep); err != nil || rep.Schema != scan.Schema {
		p.Error = fmt.Sprintf("%s is not a %s report", e.Name, scan.Schema)
		s.render(w, "scan.html", p)
		return
	}
	if err := checkReport(&rep); err != nil {
		p.Error = fmt.Sprintf("%s is not a report kura scan wrote: %v", e.Name, err)
		s.render(w, "scan.html", p)
		return
	}
	p.Data = scanView{Entry: e, R: &rep, Histogram: histogramSVG(rep.Histogram), ByMemory: memorySVG(rep.Patterns), BySavings: savingsSVG(rep.Patterns)}
	s.render(w, "scan.html", p)
}

func (s *server) resultsPage(w http.ResponseWriter, r *http.Request) {
	list, err := results.List(s.opts.ResultsDir)
	p := page{Title: "results", Nav: "results", Data: struct {
		Results []results.Entry
	}{list}}
	if err != nil {
		p.Error = err.Error()
	}
	s.render(w, "results.html", p)
}

func (s *server) resultFile(w http.ResponseWriter, r *http.Request) {
	e, err := s.findResult(r.URL.Query().Get("f"), "")
	if err != nil {
		http.Error(w, "no such result", http.StatusNotFound)
		return
	}
	f, err := os.Open(filepath.Join(s.opts.ResultsDir, e.Name))
	if err != nil {
		http.Error(w, "no such result", http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/json")
	io.Copy(w, f) // streamed: a file of any size costs a buffer, not its size
}

// Bounds of a bench page (a saved result is input like any other: a
// hand-edited or planted file must not make a page of any size): files
// over MaxResultFileBytes are not read (loadResult; the raw JSON link
// still serves them), tables show at most MaxBenchRows rows with a count
// of the rest, and each text at most MaxBenchText bytes.
const (
	MaxBenchRows = 50
	MaxBenchText = 400
)

type benchView struct {
	Entry       results.Entry
	R           *loadgen.Result
	Target      string
	Commands    []benchCount
	MoreCmds    int
	Nodes       []loadgen.NodeReport
	MoreNodes   int
	Errors      []string
	HitRatio    float64
	HaveLookups bool
}

type benchCount struct {
	Name  string
	Count int64
}

// benchPage draws a saved `kura bench` result: its figures in tables,
// every text escaped and clipped, the raw JSON a link away.
func (s *server) benchPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "bench", Nav: "results"}
	e, b, err := s.loadResult(r.URL.Query().Get("f"), "bench")
	if err != nil {
		if errors.Is(err, errNoSuchResult) {
			w.WriteHeader(http.StatusNotFound)
		}
		p.Error = err.Error()
		s.render(w, "bench.html", p)
		return
	}
	var res loadgen.Result
	if err := json.Unmarshal(b, &res); err != nil || (res.Protocol == "" && res.Command == "" && res.Ops == 0) {
		p.Error = fmt.Sprintf("%s is not a result kura bench wrote", e.Name)
		s.render(w, "bench.html", p)
		return
	}
	v := benchView{Entry: e, R: &res, Target: clip(redact.URL(res.Target))}
	res.Workload, res.Command, res.Topology, res.Protocol = clip(res.Workload), clip(res.Command), clip(res.Topology), clip(res.Protocol)
	for i, m := range res.ErrorSamples {
		if i == 5 {
			break
		}
		v.Errors = append(v.Errors, clip(m))
	}
	if n := res.Hits + res.Misses; n > 0 {
		v.HaveLookups, v.HitRatio = true, float64(res.Hits)/float64(n)
	}
	if res.Server != nil {
		for k, n := range res.Server.Commands {
			v.Commands = append(v.Commands, benchCount{clip(k), n})
		}
		slices.SortFunc(v.Commands, func(a, b benchCount) int {
			if c := cmp.Compare(b.Count, a.Count); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		if len(v.Commands) > MaxBenchRows {
			v.MoreCmds, v.Commands = len(v.Commands)-MaxBenchRows, v.Commands[:MaxBenchRows]
		}
		v.Nodes = res.Server.PerNode
		if len(v.Nodes) > MaxBenchRows {
			v.MoreNodes, v.Nodes = len(v.Nodes)-MaxBenchRows, v.Nodes[:MaxBenchRows]
		}
		for i := range v.Nodes {
			v.Nodes[i].Addr = clip(v.Nodes[i].Addr)
		}
	}
	p.Data = v
	s.render(w, "bench.html", p)
}

// clip escapes every control and bidirectional character of s and keeps
// at most MaxBenchText bytes of it (whole characters), marking the cut.
func clip(s string) string {
	if len(s) > MaxBenchText {
		cut := MaxBenchText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return vis.Escape(s[:cut]) + fmt.Sprintf("… (%d bytes in all)", len(s))
	}
	return vis.Escape(s)
}

// checkReport refuses a saved scan report the pages cannot draw (a file
// in the results directory is input like any other): a histogram must be
// kura scan's, ascending sizes ending in the overflow bucket, counts and
// sizes non-negative, shares between 0 and 1, savings at most 1.
func checkReport(r *scan.Report) error {
	h := r.Histogram
	if len(h) > 0 {
		if len(h) < 2 || h[len(h)-1].LE >= 0 {
			return fmt.Errorf("histogram of %d bucket(s) without the overflow bucket", len(h))
		}
		for i, b := range h {
			if b.Keys < 0 || b.ValueBytes < 0 {
				return fmt.Errorf("histogram bucket %d has negative counts", i)
			}
			if i > 0 && i < len(h)-1 && b.LE <= h[i-1].LE {
				return fmt.Errorf("histogram buckets not ascending at %d", i)
			}
		}
	}
	frac := func(f float64) bool { return f >= 0 && f <= 1+1e-9 && !math.IsNaN(f) }
	for i, p := range r.Patterns {
		if p.Keys < 0 || p.ValueBytes < 0 || p.MemoryBytes < 0 || !frac(p.MemoryShare) {
			return fmt.Errorf("pattern %d has negative counts or a share outside 0..1", i)
		}
		if p.Savings != nil {
			for _, e := range p.Savings.Estimates {
				// A codec may store more than it was given: negative
				// savings are honest; more than everything is not.
				if math.IsNaN(e.SavedFraction) || e.SavedFraction > 1+1e-9 {
					return fmt.Errorf("pattern %d has an impossible saving", i)
				}
			}
		}
	}
	return nil
}

var funcs = template.FuncMap{
	"vis":   vis.Escape,
	"bytes": scan.Bytes,
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"num":   func(f float64) string { return fmt.Sprintf("%.0f", f) },
	"f3":    func(f float64) string { return fmt.Sprintf("%.3f", f) },
	"secs":  scan.FormatTTL,
	"ms":    func(f float64) string { return fmt.Sprintf("%.1f ms", 1000*f) },
	"bits":  scan.Bits,
	"int64": func(v any) int64 {
		switch x := v.(type) {
		case int:
			return int64(x)
		case float64:
			return int64(math.Round(x)) // as kura scan's text rounds a mean, not truncates it
		case int64:
			return x
		}
		return 0
	},
	"deref": func(p *float64) float64 { return *p },
	"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"saved": func(p scan.Pattern, codec string) string {
		if p.Savings == nil {
			return "-"
		}
		for _, e := range p.Savings.Estimates {
			if e.Codec == codec {
				return scan.FormatSaving(e.SavedBytes, e.SavedFraction)
			}
		}
		return "-"
	},
}

// Server timeouts: a client that sends slowly, never reads, or keeps a
// connection idle holds a connection (and what its request allocated) at
// most this long.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 60 * time.Second
	IdleTimeout       = 60 * time.Second
	MaxHeaderBytes    = 32 << 10
)

// Server returns an http.Server for the console's handler h with the
// timeouts above and no error log (server errors would carry request
// details).
func Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}
