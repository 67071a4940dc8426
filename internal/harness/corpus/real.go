package corpus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Real is a JSON data set shipped in a public package that kura's code was
// not tuned on, split into cache values (one JSON document each).
type Real struct {
	// Name is a short label ("redis-commands").
	Name string
	// Source and License say where the data comes from and under what
	// terms; the files are read from the package, never copied into
	// this repository.
	Source, License string
	// Values are the documents, in the data set's order.
	Values [][]byte
}

// realSet describes one data set: a file inside a Go module of go.mod
// (read from the module cache) or a file fetched by
// scripts/fetch-corpora.sh into testdata/corpora.
type realSet struct {
	name, source, license string
	module, path          string // Go module and file inside it
	fetched               string // file under testdata/corpora
	// split picks the documents out of the file; if nil, splitJSON.
	split func([]byte) ([][]byte, error)
}

var realSets = []realSet{
	{name: "redis-commands", module: "github.com/redis/rueidis", path: "hack/cmds/commands.json",
		source:  "github.com/redis/rueidis (Go module in go.mod), hack/cmds/commands.json: Redis command reference, one record per command",
		license: "Apache-2.0 (rueidis)"},
	{name: "people", module: "github.com/klauspost/compress", path: "gzhttp/testdata/benchmark.json",
		source:  "github.com/klauspost/compress (Go module in go.mod), gzhttp/testdata/benchmark.json: person records (id, name, company, email, phone)",
		license: "BSD-3-Clause (klauspost/compress)"},
	{name: "emoji", fetched: "emojibase-data-en.json",
		source:  "npm package emojibase-data@17.0.0, en/data.json: one record per emoji (label, tags, skins); fetched by scripts/fetch-corpora.sh",
		license: "MIT (emojibase-data)"},
	{name: "github-webhooks", fetched: "octokit-webhooks-examples.json", split: webhookPayloads,
		source:  "npm package @octokit/webhooks-examples@7.6.1, api.github.com/index.json: example webhook payloads (nested objects: repository, owner, sender), 0.9-27 KB; fetched by scripts/fetch-corpora.sh",
		license: "MIT (@octokit/webhooks-examples)"},
	{name: "browser-compat", fetched: "mdn-browser-compat-data.json", split: compatTrees(false),
		source:  "npm package @mdn/browser-compat-data@8.1.9, data.json: one feature tree per API, CSS property, HTML element... (5-6 levels deep), those up to 10 KB; fetched by scripts/fetch-corpora.sh",
		license: "CC0-1.0 (@mdn/browser-compat-data)"},
	{name: "browser-compat-large", fetched: "mdn-browser-compat-data.json", split: compatTrees(true),
		source:  "npm package @mdn/browser-compat-data@8.1.9, data.json: the feature trees of 10-100 KB; fetched by scripts/fetch-corpora.sh",
		license: "CC0-1.0 (@mdn/browser-compat-data)"},
}

// LargeDoc is the size above which a document counts as large (the
// browser-compat-large set), and MaxDoc the size above which the set
// leaves a document out: the 24 trees over 100 KB (up to 3.5 MB) are
// stored uncompressed by kura's codec, whose reader-side allocation bound
// (codec.AllocBound) refuses so many small maps per compressed byte
// (BENCHMARKS.md, issue 24), and would measure that guard, not the codecs.
const (
	LargeDoc = 10 << 10
	MaxDoc   = 100 << 10
)

// webhookPayloads returns every example payload of every event in
// @octokit/webhooks-examples' index ([{name, examples: [...]}, ...]).
func webhookPayloads(b []byte) ([][]byte, error) {
	var events []struct {
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(b, &events); err != nil {
		return nil, err
	}
	var out [][]byte
	for _, e := range events {
		for _, x := range e.Examples {
			out = append(out, compactJSON(x))
		}
	}
	return out, nil
}

// compatTrees returns the feature trees of @mdn/browser-compat-data's
// data.json ({category: {feature: tree}}, less __meta and browsers) in
// category and feature order: those over LargeDoc bytes (up to MaxDoc)
// when large, those up to LargeDoc when not.
func compatTrees(large bool) func([]byte) ([][]byte, error) {
	return func(b []byte) ([][]byte, error) {
		var cats map[string]map[string]json.RawMessage
		if err := json.Unmarshal(b, &cats); err != nil {
			return nil, err
		}
		var out [][]byte
		for _, c := range sortedKeys(cats) {
			if c == "__meta" || c == "browsers" {
				continue
			}
			for _, f := range sortedKeys(cats[c]) {
				doc := compactJSON(cats[c][f])
				if len(doc) <= LargeDoc && !large || len(doc) > LargeDoc && len(doc) <= MaxDoc && large {
					out = append(out, doc)
				}
			}
		}
		return out, nil
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// compactJSON drops the insignificant white space of a document.
func compactJSON(doc []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, doc) != nil {
		return doc
	}
	return buf.Bytes()
}

// RealCorpora loads every data set it can find. root is the repository
// root (for testdata/corpora). A set that is not available (the module
// cache is empty, the fetch script was not run) comes back as an error
// naming how to get it, beside the sets that loaded.
func RealCorpora(root string) ([]Real, []error) {
	var out []Real
	var errs []error
	for _, s := range realSets {
		var file string
		if s.module != "" {
			cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", s.module)
			cmd.Dir = root
			dir, err := cmd.Output()
			if err != nil || strings.TrimSpace(string(dir)) == "" {
				errs = append(errs, fmt.Errorf("%s: module %s not in the module cache (go mod download): %v", s.name, s.module, err))
				continue
			}
			file = filepath.Join(strings.TrimSpace(string(dir)), s.path)
		} else {
			file = filepath.Join(root, "testdata", "corpora", s.fetched)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w (run scripts/fetch-corpora.sh)", s.name, err))
			continue
		}
		split := s.split
		if split == nil {
			split = splitJSON
		}
		vals, err := split(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", s.name, file, err))
			continue
		}
		out = append(out, Real{Name: s.name, Source: s.source, License: s.license, Values: vals})
	}
	return out, errs
}

// splitJSON returns the elements of a top-level array, or the values of a
// top-level object in key order (each with its key as "name").
func splitJSON(b []byte) ([][]byte, error) {
	var arr []json.RawMessage
	if err := json.Unmarshal(b, &arr); err == nil {
		out := make([][]byte, len(arr))
		for i, e := range arr {
			out[i] = e
		}
		return out, nil
	}
	var obj map[string]map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, errors.New("neither an array nor an object of objects")
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		obj[k]["name"] = k
		v, err := json.Marshal(obj[k])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
