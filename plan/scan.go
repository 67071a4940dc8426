package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
)

// ScanSchema is the version of `kura scan --json` output ReadScan reads
// (docs/scan.md).
const ScanSchema = "kura.scan/v1"

// maxScanBytes bounds what ReadScan reads: a scan report keeps at most
// 1,000 big values and a bounded set of patterns.
const maxScanBytes = 64 << 20

// Scanned is what `kura scan --json` found on a live cache, in the terms
// the planner uses.
type Scanned struct {
	Target string
	// Complete is false when the scan was interrupted or a server failed:
	// the figures are then a lower bound.
	Complete bool
	Keys     int64
	// ValueBytes is the values' total; MemoryBytes what the server counts
	// for them (Redis MEMORY USAGE, memcached item sizes), zero when the
	// server would not say.
	ValueBytes  float64
	MemoryBytes float64
	// MaxValueBytes is the largest value found.
	MaxValueBytes float64
	// ValueSizes is the value-size histogram.
	ValueSizes []SizeBucket
	// CodecRatios maps a compressor ("s2", "zstd") to the scan's estimate
	// of stored bytes over value bytes for the whole cache, with the
	// values it could not compress counted as they are.
	CodecRatios map[string]float64
}

type scanReport struct {
	Schema      string  `json:"schema"`
	Target      string  `json:"target"`
	Complete    bool    `json:"complete"`
	Keys        int64   `json:"keys"`
	ValueBytes  float64 `json:"value_bytes"`
	MemoryBytes float64 `json:"memory_bytes"`
	Biggest     []struct {
		ValueBytes float64 `json:"value_bytes"`
	} `json:"biggest"`
	Histogram []struct {
		LE         float64 `json:"le"`
		Keys       int64   `json:"keys"`
		ValueBytes float64 `json:"value_bytes"`
	} `json:"histogram"`
	Patterns []struct {
		ValueBytes float64 `json:"value_bytes"`
		Savings    *struct {
			Estimates []struct {
				Codec       string  `json:"codec"`
				StoredBytes float64 `json:"stored_bytes"`
			} `json:"estimates"`
		} `json:"savings"`
	} `json:"patterns"`
	BigValues *struct {
		Keys []struct {
			ValueBytes float64 `json:"value_bytes"`
		} `json:"keys"`
	} `json:"big_values"`
}

// ReadScan reads the JSON that `kura scan --json` printed (schema
// kura.scan/v1).
func ReadScan(r io.Reader) (*Scanned, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxScanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("scan result: %w", err)
	}
	if len(data) > maxScanBytes {
		return nil, fmt.Errorf("%w: scan result larger than %d bytes", ErrInput, maxScanBytes)
	}
	var sr scanReport
	if err := json.Unmarshal(data, &sr); err != nil {
		return nil, fmt.Errorf("%w: scan result is not the JSON of kura scan --json: %v", ErrInput, err)
	}
	if sr.Schema != ScanSchema {
		return nil, fmt.Errorf("%w: scan result has schema %q; this kura reads %q", ErrInput, sr.Schema, ScanSchema)
	}
	finite := func(v float64) bool { return v >= 0 && !math.IsNaN(v) && !math.IsInf(v, 0) && v <= maxBytes }
	if sr.Keys < 0 || sr.Keys > maxKeys || !finite(sr.ValueBytes) || !finite(sr.MemoryBytes) {
		return nil, fmt.Errorf("%w: scan result has a negative or non-finite total", ErrInput)
	}
	s := &Scanned{Target: sr.Target, Complete: sr.Complete, Keys: sr.Keys, ValueBytes: sr.ValueBytes, MemoryBytes: sr.MemoryBytes}
	for _, b := range sr.Biggest {
		if finite(b.ValueBytes) {
			s.MaxValueBytes = math.Max(s.MaxValueBytes, b.ValueBytes)
		}
	}
	if sr.BigValues != nil {
		for _, b := range sr.BigValues.Keys {
			if finite(b.ValueBytes) {
				s.MaxValueBytes = math.Max(s.MaxValueBytes, b.ValueBytes)
			}
		}
	}
	for _, h := range sr.Histogram {
		if h.Keys < 0 || h.Keys > maxKeys || !finite(h.ValueBytes) || (h.LE != -1 && !finite(h.LE)) {
			return nil, fmt.Errorf("%w: scan histogram bucket le=%v is not a size", ErrInput, h.LE)
		}
		le := h.LE
		if le == -1 { // no upper bound: the largest value found is one
			le = math.Max(s.MaxValueBytes, h.ValueBytes)
		}
		s.ValueSizes = append(s.ValueSizes, SizeBucket{MaxBytes: le, Keys: h.Keys, Bytes: h.ValueBytes})
	}
	sort.SliceStable(s.ValueSizes, func(i, j int) bool { return s.ValueSizes[i].MaxBytes < s.ValueSizes[j].MaxBytes })
	if sr.ValueBytes > 0 {
		stored := map[string]float64{}
		var covered float64
		codecs := map[string]bool{}
		for _, p := range sr.Patterns {
			if p.Savings == nil {
				continue
			}
			for _, e := range p.Savings.Estimates {
				codecs[e.Codec] = true
			}
		}
		for _, p := range sr.Patterns {
			if !finite(p.ValueBytes) {
				return nil, fmt.Errorf("%w: scan pattern with a negative or non-finite size", ErrInput)
			}
			est := map[string]float64{}
			if p.Savings != nil {
				for _, e := range p.Savings.Estimates {
					if finite(e.StoredBytes) {
						est[e.Codec] = e.StoredBytes
					}
				}
			}
			covered += p.ValueBytes
			for c := range codecs {
				if v, ok := est[c]; ok {
					stored[c] += v
				} else {
					stored[c] += p.ValueBytes // not compressible by c: as it is
				}
			}
		}
		if len(codecs) > 0 && covered > 0 {
			s.CodecRatios = map[string]float64{}
			for c, v := range stored {
				s.CodecRatios[c] = v / covered
			}
		}
	}
	return s, nil
}

// Apply fills the workload's data figures from the scan, leaving what the
// user set.
func (s *Scanned) Apply(w *Workload) {
	if w.DataBytes == 0 {
		w.DataBytes = s.MemoryBytes
		if w.DataBytes == 0 {
			w.DataBytes = s.ValueBytes
		}
	}
	if w.Keys == 0 {
		w.Keys = s.Keys
	}
	if w.AvgValueBytes == 0 && s.Keys > 0 {
		w.AvgValueBytes = s.ValueBytes / float64(s.Keys)
	}
	if w.MaxValueBytes == 0 {
		w.MaxValueBytes = s.MaxValueBytes
	}
	if len(w.ValueSizes) == 0 {
		w.ValueSizes = s.ValueSizes
	}
}
