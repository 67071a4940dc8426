// Package results is the directory where kura commands save their JSON
// results for `kura ui` to list: $KURA_RESULTS_DIR, else
// $XDG_STATE_HOME/kura/results, else ~/.local/state/kura/results. Files
// are named KIND-YYYYMMDD-HHMMSS.json (kind "scan", "bench", ...).
package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Dir returns the results directory (not created).
func Dir() (string, error) {
	if d := os.Getenv("KURA_RESULTS_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "kura", "results"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("results directory: %w (set KURA_RESULTS_DIR)", err)
	}
	return filepath.Join(home, ".local", "state", "kura", "results"), nil
}

// Save writes v as indented JSON to dir/KIND-YYYYMMDD-HHMMSS.json (a
// suffix -2, -3, ... when the name is taken) and returns the path. The
// directory is created (0700: results name keys and servers).
func Save(dir, kind string, at time.Time, v any) (string, error) {
	if !validKind(kind) {
		return "", fmt.Errorf("results: bad kind %q", kind)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	base := kind + "-" + at.UTC().Format("20060102-150405")
	for i := 1; ; i++ {
		name := base + ".json"
		if i > 1 {
			name = fmt.Sprintf("%s-%d.json", base, i)
		}
		path := filepath.Join(dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("results: %w", err)
		}
		_, werr := f.Write(append(b, '\n'))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", fmt.Errorf("results: %w", werr)
		}
		return path, nil
	}
}

// Entry is one saved result.
type Entry struct {
	Name string    // file name
	Kind string    // "scan", "bench", ...
	Time time.Time // from the name
	Size int64
}

// List returns the saved results in dir, newest first. A missing directory
// is an empty list.
func List(dir string) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var out []Entry
	for _, de := range des {
		e, ok := parseName(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		if fi, err := de.Info(); err == nil {
			e.Size = fi.Size()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.After(out[j].Time)
		}
		return out[i].Name > out[j].Name
	})
	return out, nil
}

func parseName(name string) (Entry, bool) {
	stem, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return Entry{}, false
	}
	kind, rest, ok := strings.Cut(stem, "-")
	if !ok || !validKind(kind) || len(rest) < 15 {
		return Entry{}, false
	}
	t, err := time.Parse("20060102-150405", rest[:15])
	if err != nil {
		return Entry{}, false
	}
	return Entry{Name: name, Kind: kind, Time: t}, true
}

func validKind(k string) bool {
	if k == "" || len(k) > 32 {
		return false
	}
	for _, c := range k {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}
