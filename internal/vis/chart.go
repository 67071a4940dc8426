package vis

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file is kura's charting code: the label placement the `kura
// codecs` report uses for its scatter chart, and the bar chart of the
// results page (BENCHMARKS.md, `make bench-report`). Charts are plain SVG
// with a viewBox, so a page scales them to any width without cutting
// anything off; text is escaped with HTML, so a name from a cache or a
// file cannot act on the page.

// Rect is a box in chart coordinates (y grows downwards, as in SVG).
type Rect struct{ X, Y, W, H float64 }

// Overlaps reports whether r and o share any area.
func (r Rect) Overlaps(o Rect) bool {
	return r.X < o.X+o.W && o.X < r.X+r.W && r.Y < o.Y+o.H && o.Y < r.Y+r.H
}

// Inside reports whether r lies wholly within o.
func (r Rect) Inside(o Rect) bool {
	return r.X >= o.X && r.Y >= o.Y && r.X+r.W <= o.X+o.W && r.Y+r.H <= o.Y+o.H
}

// TextWidth estimates, generously, the width in pixels of s drawn in a
// sans-serif font of size px: wide letters and CJK count wider, narrow
// ones narrower, and every estimate errs on the wide side so that boxes
// placed from it do not overlap in a browser (TestChartsInBrowser checks
// the real boxes in Chromium).
func TextWidth(s string, px float64) float64 {
	var em float64
	for _, r := range s {
		switch {
		case r > 0x2e80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)):
			em += 1.05
		case strings.ContainsRune("iljtfI.,:;'|!() ", r):
			em += 0.36
		case strings.ContainsRune("mwMW@%", r):
			em += 0.95
		case unicode.IsUpper(r):
			em += 0.72
		case r > 0x7f:
			em += 0.8
		default:
			em += 0.6
		}
	}
	return em * px
}

// Label is a piece of text to place next to an anchor point (a point of
// a scatter chart).
type Label struct {
	// AX, AY is the anchor.
	AX, AY float64
	// Text is what the label says (escaped when drawn).
	Text string
}

// Placed is where PlaceLabels put a label: the text's baseline start (X,
// Y) for text-anchor="start", its box, and whether a leader line should
// join it to its anchor (when it sits away from it). Shown is false for a
// label that found no free place: the caller leaves it out (a chart keeps
// the figures in a tooltip or a table).
type Placed struct {
	Label
	X, Y   float64
	Box    Rect
	Leader bool
	Shown  bool
}

// PlaceLabels places labels, in the order given (put the most important
// first), so that no two overlap, none covers an anchor (a point of radius
// r) and each stays inside bounds. Each label tries spots around its own
// anchor, nearest first, then farther out with a leader line; a label
// with no free spot is not shown. px is the font size.
func PlaceLabels(labels []Label, bounds Rect, px, r float64) []Placed {
	out := make([]Placed, len(labels))
	var taken []Rect
	points := make([]Rect, len(labels))
	for i, l := range labels {
		points[i] = Rect{l.AX - r - 1, l.AY - r - 1, 2*r + 2, 2*r + 2}
	}
	h := px * 1.3
	for i, l := range labels {
		out[i].Label = l
		w := TextWidth(l.Text, px) + 2
		for _, d := range []float64{r + 3, r + 14, r + 28, r + 46} {
			for _, c := range [][2]float64{{1, -1}, {1, 1}, {-1, -1}, {-1, 1}, {0, -1}, {0, 1}} {
				x := l.AX + c[0]*d
				switch c[0] {
				case -1:
					x -= w
				case 0:
					x -= w / 2
				}
				y := l.AY + c[1]*d // the box's top or bottom edge
				if c[1] < 0 {
					y -= h
				}
				if c[0] != 0 && d == r+3 {
					y = l.AY + c[1]*(r/2) // beside the point: the box starts level with it
					if c[1] < 0 {
						y -= h
					}
				}
				box := Rect{x, y, w, h}
				if !box.Inside(bounds) || collides(box, taken) || collides(box, points) {
					continue
				}
				taken = append(taken, box)
				out[i].Box, out[i].X, out[i].Y = box, x+1, y+h*0.78
				out[i].Leader, out[i].Shown = d > r+3, true
				break
			}
			if out[i].Shown {
				break
			}
		}
	}
	return out
}

func collides(b Rect, rs []Rect) bool {
	for _, o := range rs {
		if b.Overlaps(o) {
			return true
		}
	}
	return false
}

// Bar is one bar of a BarChart: a value with an optional spread (Lo–Hi,
// drawn as a whisker when Hi > Lo).
type Bar struct {
	Name      string
	Value     float64
	Lo, Hi    float64
	Highlight bool
	// Target, when not 0, is drawn as a short red mark across the bar's
	// row.
	Target float64
}

// BarChart is a horizontal bar chart: one row per bar, the name on the
// left, the value at the bar's end, optional reference lines (a ratio of
// 1, a target). It draws with a viewBox so that a narrow page scales it
// whole, and computes its left margin from its longest name, so no name
// is cut and no value overprints a name.
type BarChart struct {
	// ID is the svg element's id; Title is drawn above the bars and is
	// the chart's accessible name.
	ID, Title string
	// Unit follows each value ("x", " ops/s"); Digits is the number of
	// decimals shown.
	Unit   string
	Digits int
	// Format, when set, formats values instead of Unit and Digits.
	Format func(float64) string
	Bars   []Bar
	// Refs are vertical reference lines (value and label), such as the
	// peer's 1.0 and the target.
	Refs []Ref
	// Width is the drawing's width in its own units; if zero, 720.
	Width float64
	// Log draws the value axis on a log scale (for ratios that span
	// orders of magnitude).
	Log bool
	// Base, when not 0, is where bars start (a ratio chart's 1: a bar
	// to its left is a ratio below 1); otherwise bars start at the axis's
	// low end.
	Base float64
}

// Ref is a reference line of a BarChart.
type Ref struct {
	Value float64
	Label string
}

// SVG draws the chart as a standalone SVG document.
func (c BarChart) SVG() string {
	const px, rowH, top, bottom = 13.0, 26.0, 44.0, 34.0
	width := c.Width
	if width <= 0 {
		width = 720
	}
	var nameW, valueW float64
	maxV, minV := 0.0, math.Inf(1)
	for _, b := range c.Bars {
		nameW = math.Max(nameW, TextWidth(Escape(b.Name), px))
		valueW = math.Max(valueW, TextWidth(c.format(math.Max(b.Value, b.Hi)), px))
		maxV = math.Max(maxV, math.Max(b.Value, math.Max(b.Hi, b.Target)))
		for _, v := range []float64{b.Value, b.Lo, b.Target} {
			if v > 0 {
				minV = math.Min(minV, v)
			}
		}
	}
	for _, r := range c.Refs {
		maxV = math.Max(maxV, r.Value)
		if r.Value > 0 {
			minV = math.Min(minV, r.Value)
		}
	}
	maxV = niceCeil(maxV)
	if math.IsInf(minV, 1) {
		minV = 1
	}
	minV = math.Pow(10, math.Floor(math.Log10(minV)))
	left := nameW + 16
	right := width - valueW - 16
	if right-left < 260 { // long names: widen the drawing rather than squeeze the bars
		width = left + 260 + valueW + 16
		right = width - valueW - 16
	}
	axisY := top + float64(len(c.Bars))*rowH
	x := func(v float64) float64 { return left + v/maxV*(right-left) }
	if c.Log {
		x = func(v float64) float64 {
			v = math.Max(v, minV)
			return left + (math.Log10(v)-math.Log10(minV))/(math.Log10(maxV)-math.Log10(minV))*(right-left)
		}
	}
	// Reference labels go under the axis, moved down until none overlaps
	// another; the drawing grows to hold them.
	height := axisY + bottom
	refBoxes := make([]Rect, len(c.Refs))
	for i, r := range c.Refs {
		w := TextWidth(r.Label, px-2)
		box := Rect{x(r.Value) - w/2, axisY + 8, w, px * 1.3}
		box.X = math.Max(2, math.Min(box.X, width-w-2))
		for collides(box, refBoxes[:i]) {
			box.Y += px * 1.4
		}
		height = math.Max(height, box.Y+box.H+6)
		refBoxes[i] = box
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" id="%s" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" style="max-width:100%%;height:auto" role="img" aria-label="%s" font-family="system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif" font-size="%.0f">`+"\n",
		HTML(c.ID), width, height, width, height, HTML(c.Title), px)
	fmt.Fprintf(&s, `<rect width="%.0f" height="%.0f" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(&s, `<text class="title" x="8" y="20" font-weight="bold">%s</text>`+"\n", HTML(clip(c.Title, width-16, px)))
	for i, b := range c.Bars {
		y := top + float64(i)*rowH
		fill := "#7a9cc6"
		if b.Highlight {
			fill = "#2f7d32"
		}
		fmt.Fprintf(&s, `<text class="name" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, left-8, y+rowH*0.62, HTML(b.Name))
		x0, x1 := left, x(b.Value)
		if c.Base > 0 {
			x0, x1 = math.Min(x(c.Base), x1), math.Max(x(c.Base), x1)
		}
		fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x0, y+4, math.Max(1, x1-x0), rowH-8, fill)
		end := x1
		if b.Hi > b.Lo {
			fmt.Fprintf(&s, `<line class="spread" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#222"/>`, x(b.Lo), x(b.Hi), y+rowH/2, y+rowH/2)
			end = math.Max(end, x(b.Hi))
		}
		if b.Target > 0 {
			fmt.Fprintf(&s, `<line class="target" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#c0392b" stroke-width="3"/>`, x(b.Target), x(b.Target), y+1, y+rowH-1)
			end = math.Max(end, x(b.Target)+2)
		}
		fmt.Fprintf(&s, `<text class="value" x="%.1f" y="%.1f">%s</text>`+"\n", end+6, y+rowH*0.62, HTML(c.format(b.Value)))
	}
	fmt.Fprintf(&s, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, left, top, axisY)
	for i, r := range c.Refs {
		rx, box := x(r.Value), refBoxes[i]
		fmt.Fprintf(&s, `<line class="ref" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#c0392b" stroke-dasharray="4,3"/>`, rx, rx, top-4, axisY+4)
		fmt.Fprintf(&s, `<text class="ref-label" x="%.1f" y="%.1f" font-size="%.0f" fill="#c0392b">%s</text>`+"\n", box.X, box.Y+box.H*0.78, px-2, HTML(r.Label))
	}
	s.WriteString("</svg>\n")
	return s.String()
}

func (c BarChart) format(v float64) string {
	if c.Format != nil {
		return c.Format(v)
	}
	return fmt.Sprintf("%.*f%s", c.Digits, v, c.Unit)
}

// clip shortens s with an ellipsis to fit w pixels.
func clip(s string, w, px float64) string {
	if TextWidth(s, px) <= w {
		return s
	}
	for n := utf8.RuneCountInString(s); n > 0; n-- {
		t := string([]rune(s)[:n]) + "…"
		if TextWidth(t, px) <= w {
			return t
		}
	}
	return "…"
}

// niceCeil rounds v up to 1, 1.5, 2, 2.5 or 5 times a power of ten,
// leaving at least 2 % above v (a bar never touches the axis's end).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 5, 10} {
		if m*p >= v*1.02 {
			return m * p
		}
	}
	return 10 * p
}
