// Package ui is the web console behind `kura ui`: for the people who used
// to read cached values in Redis and cannot since they are compressed, a
// key page that decodes a value and its envelope header (package
// inspect), the last `kura scan` report with charts, and the saved
// results of `kura scan` and `kura bench` (package internal/results).
//
// It is read-only (GET and HEAD only; it never writes to the cache), its
// templates and styles are embedded (no build step, no script), values are
// never logged and can be masked by field name, and when it is given a
// token every request must carry it (?token=..., then a cookie; or an
// Authorization: Bearer header).
package ui

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/inspect"
	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/internal/results"
	"github.com/kuracache/kura/scan"
	"github.com/kuracache/kura/store"
)

//go:embed assets
var assets embed.FS

// cookieName carries the token after a first request gave it in the URL.
const cookieName = "kura_ui_token"

// MaxKeyLen bounds a key typed into the key page.
const MaxKeyLen = 4096

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
	// Token, if not empty, is required on every request.
	Token string
	// Mask lists field names whose values are shown as "***".
	Mask []string
	// Codec decodes kura values (give it your dictionaries). If nil, the
	// default codec.
	Codec *codec.Codec
}

type server struct {
	opts Options
	tmpl *template.Template
	mux  *http.ServeMux
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
	if opts.Codec == nil {
		c, err := codec.New(codec.Options{})
		if err != nil {
			return nil, err
		}
		opts.Codec = c
	}
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	s := &server{opts: opts, tmpl: t, mux: http.NewServeMux()}
	static, _ := fs.Sub(assets, "assets")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.home)
	s.mux.HandleFunc("GET /key", s.key)
	s.mux.HandleFunc("GET /scan", s.scanPage)
	s.mux.HandleFunc("GET /results", s.resultsPage)
	s.mux.HandleFunc("GET /results/file", s.resultFile)
	return s, nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	if !s.authorized(w, r) {
		http.Error(w, "token required: open the URL printed by `kura ui` (it ends in ?token=...)", http.StatusUnauthorized)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	eq := func(v string) bool { return subtle.ConstantTimeCompare([]byte(v), []byte(s.opts.Token)) == 1 }
	if q := r.URL.Query().Get("token"); q != "" && eq(q) {
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.opts.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return true
	}
	if c, err := r.Cookie(cookieName); err == nil && eq(c.Value) {
		return true
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && eq(a) {
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
	p.Target = redact.URL(s.opts.Target)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.ExecuteTemplate(w, name, p); err != nil {
		// Headers are out; say so in the page rather than in a log.
		fmt.Fprintf(w, "<p class=error>template error: %s</p>", template.HTMLEscapeString(err.Error()))
	}
}

func (s *server) home(w http.ResponseWriter, r *http.Request) {
	list, err := results.List(s.opts.ResultsDir)
	p := page{Title: "kura", Nav: "home", Data: struct {
		HaveStore bool
		Results   []results.Entry
		Dir       string
	}{s.opts.Store != nil, first(list, 10), s.opts.ResultsDir}}
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
}

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
		rep, err := inspect.Key(r.Context(), s.opts.Store, k, inspect.Options{Codec: s.opts.Codec, Mask: s.opts.Mask})
		if err != nil {
			p.Error = err.Error()
			break
		}
		v.Report = &rep
		if len(rep.Value) > 0 {
			var x any
			if json.Unmarshal(rep.Value, &x) == nil {
				b, _ := json.MarshalIndent(x, "", "  ")
				v.Value = string(b)
			} else {
				v.Value = string(rep.Value)
			}
		}
	}
	p.Data = v
	s.render(w, "key.html", p)
}

// loadResult reads a saved result by name; only names that List returns
// are opened (no path from the request reaches the file system).
func (s *server) loadResult(name, kind string) (results.Entry, []byte, error) {
	list, err := results.List(s.opts.ResultsDir)
	if err != nil {
		return results.Entry{}, nil, err
	}
	for _, e := range list {
		if (name == "" && e.Kind == kind) || (name != "" && e.Name == name) {
			b, err := os.ReadFile(filepath.Join(s.opts.ResultsDir, e.Name))
			return e, b, err
		}
	}
	if name == "" {
		return results.Entry{}, nil, fmt.Errorf("no saved %s in %s: run kura %s first", kind, s.opts.ResultsDir, kind)
	}
	return results.Entry{}, nil, errNoSuchResult
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
	p.Data = scanView{Entry: e, R: &rep, Histogram: histogramSVG(rep.Histogram), ByMemory: memorySVG(rep.Patterns), BySavings: savingsSVG(rep.Patterns)}
	s.render(w, "scan.html", p)
}

func (s *server) resultsPage(w http.ResponseWriter, r *http.Request) {
	list, err := results.List(s.opts.ResultsDir)
	p := page{Title: "results", Nav: "results", Data: struct {
		Dir     string
		Results []results.Entry
	}{s.opts.ResultsDir, list}}
	if err != nil {
		p.Error = err.Error()
	}
	s.render(w, "results.html", p)
}

func (s *server) resultFile(w http.ResponseWriter, r *http.Request) {
	_, b, err := s.loadResult(r.URL.Query().Get("f"), "")
	if err != nil {
		http.Error(w, "no such result", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

var funcs = template.FuncMap{
	"bytes": scan.Bytes,
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
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
				return fmt.Sprintf("%s (%.0f%%)", scan.Bytes(e.SavedBytes), 100*e.SavedFraction)
			}
		}
		return "-"
	},
}
