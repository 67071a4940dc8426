package ui

import (
	"fmt"
	"html/template"
	"sort"
	"strings"

	"github.com/kuracache/kura/internal/units"
	"github.com/kuracache/kura/internal/vis"
	"github.com/kuracache/kura/scan"
)

// The charts are SVG drawn on the server: no script, nothing to build.
// Every text in them is escaped (key patterns come from the cache).

func esc(s string) string { return vis.HTML(s) }

// histogramSVG draws keys per value-size bucket, from the first to the last
// non-empty bucket.
func histogramSVG(h []scan.Bucket) template.HTML {
	first, last := -1, -1
	var top int64
	for i, b := range h {
		if b.Keys > 0 {
			if first < 0 {
				first = i
			}
			last = i
			top = max(top, b.Keys)
		}
	}
	if first < 0 {
		return ""
	}
	bars := h[first : last+1]
	const W, H, pad, base = 760, 260, 40, 200
	bw := float64(W-2*pad) / float64(len(bars))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="histogram" viewBox="0 0 %d %d" role="img" aria-label="value size histogram">`, W, H)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`, pad, base, W-pad, base)
	for i, bk := range bars {
		hgt := float64(base-20) * float64(bk.Keys) / float64(top)
		x := float64(pad) + float64(i)*bw
		label := "> " + units.FormatBound(h[len(h)-2].LE)
		if bk.LE >= 0 {
			label = "≤ " + units.FormatBound(bk.LE)
		}
		fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d keys, %s</title></rect>`,
			x+2, float64(base)-hgt, bw-4, hgt, esc(label), bk.Keys, esc(scan.Bytes(bk.ValueBytes)))
		if bk.Keys > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="val">%d</text>`, x+bw/2, float64(base)-hgt-4, bk.Keys)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="lbl" transform="rotate(35 %.1f %d)">%s</text>`, x+bw/2, base+14, x+bw/2, base+14, esc(label))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

type hbar struct {
	label string
	value int64
	note  string
}

// hbarsSVG draws horizontal bars, largest first.
func hbarsSVG(id, aria string, bars []hbar) template.HTML {
	if len(bars) == 0 {
		return ""
	}
	const W, row, left = 760, 26, 260
	var top int64
	for _, b := range bars {
		top = max(top, b.value)
	}
	if top <= 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="%s" viewBox="0 0 %d %d" role="img" aria-label="%s">`, id, W, row*len(bars)+10, esc(aria))
	for i, br := range bars {
		y := 5 + i*row
		w := float64(W-left-160) * float64(max(br.value, 0)) / float64(top)
		label := br.label
		if len(label) > 38 {
			label = label[:37] + "…"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="name">%s</text>`, left-8, y+17, esc(label))
		fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%.1f" height="%d"><title>%s: %s</title></rect>`, left, y+3, w, row-8, esc(br.label), esc(br.note))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="val-left">%s</text>`, float64(left)+w+6, y+17, esc(br.note))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func memorySVG(ps []scan.Pattern) template.HTML {
	var bars []hbar
	for _, p := range ps {
		v := p.MemoryBytes
		if v == 0 {
			v = p.ValueBytes
		}
		bars = append(bars, hbar{p.Pattern, v, fmt.Sprintf("%s, %.1f%%", scan.Bytes(v), 100*p.MemoryShare)})
	}
	sort.SliceStable(bars, func(i, j int) bool { return bars[i].value > bars[j].value })
	return hbarsSVG("by-memory", "top patterns by memory", first(bars, 10))
}

func savingsSVG(ps []scan.Pattern) template.HTML {
	var bars []hbar
	for _, p := range ps {
		if p.Savings == nil {
			continue
		}
		best := scan.Estimate{}
		for _, e := range p.Savings.Estimates {
			if e.SavedBytes > best.SavedBytes {
				best = e
			}
		}
		if best.SavedBytes > 0 {
			bars = append(bars, hbar{p.Pattern, best.SavedBytes, fmt.Sprintf("%s with %s (%.0f%%)", scan.Bytes(best.SavedBytes), best.Codec, 100*best.SavedFraction)})
		}
	}
	sort.SliceStable(bars, func(i, j int) bool { return bars[i].value > bars[j].value })
	return hbarsSVG("by-savings", "top patterns by potential savings", first(bars, 10))
}
