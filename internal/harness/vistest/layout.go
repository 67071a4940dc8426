package vistest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/browsertest"
)

// layoutScript measures, in the browser, every non-empty text of every
// svg on the page: a text that overlaps another text of the same chart,
// or reaches outside its chart or the window, is a problem. It writes
// the verdict as JSON into <pre id="layout-verdict">.
const layoutScript = `<script>
(function(){
  const texts=[...document.querySelectorAll('svg text')].filter(t=>t.textContent.trim()!=='');
  const vw=window.kuraLayoutWidth||document.documentElement.clientWidth, e=0.75, problems=[];
  const boxes=texts.map(t=>t.getBoundingClientRect());
  texts.forEach((t,i)=>{
    const b=boxes[i], s=t.ownerSVGElement.getBoundingClientRect(), name=JSON.stringify(t.textContent);
    if(b.width===0) problems.push('not drawn: '+name);
    if(b.left<s.left-e||b.right>s.right+e||b.top<s.top-e||b.bottom>s.bottom+e) problems.push('outside its chart: '+name);
    if(b.left<-e||b.right>vw+e) problems.push('outside the window ('+vw+' px): '+name);
    for(let j=0;j<i;j++){
      if(texts[j].ownerSVGElement!==t.ownerSVGElement) continue;
      const o=boxes[j], ix=Math.min(b.right,o.right)-Math.max(b.left,o.left), iy=Math.min(b.bottom,o.bottom)-Math.max(b.top,o.top);
      if(ix>e&&iy>e) problems.push('overlap: '+name+' and '+JSON.stringify(texts[j].textContent));
    }
  });
  const pre=document.createElement('pre'); pre.id='layout-verdict';
  pre.textContent=JSON.stringify({texts:texts.length,charts:document.querySelectorAll('svg').length,width:vw,problems});
  document.body.appendChild(pre);
})();
</script>`

// Layout is what CheckLayout saw at one window width.
type Layout struct {
	Texts, Charts, Width int
	Problems             []string
}

// CheckLayout loads page (a complete HTML document holding inline svg
// charts) in headless Chromium at each width and fails t when any chart
// text overlaps another of its chart, or is cut off by its chart or the
// window. It returns what it saw, per width.
func CheckLayout(t testing.TB, page string, widths ...int) []Layout {
	t.Helper()
	dir := t.TempDir()
	var out []Layout
	for _, w := range widths {
		// Headless Chromium will not make a window narrower than 500
		// px: below that the page's html element is held at w px, which
		// is what a phone's viewport gives the page.
		script, win := layoutScript, w
		if w < 500 {
			win = 500
			script = fmt.Sprintf(`<style>html{width:%dpx;overflow:hidden}</style><script>window.kuraLayoutWidth=%d</script>`, w, w) + script
		}
		p := page
		if i := strings.LastIndex(p, "</body>"); i >= 0 {
			p = p[:i] + script + p[i:]
		} else {
			p += script
		}
		path := filepath.Join(dir, fmt.Sprintf("layout-%d.html", w))
		if err := os.WriteFile(path, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		b := browsertest.NewWithOptions(t, browsertest.Options{Width: win, Height: 900})
		dom := b.DOM(t, browsertest.FileURL(path))
		l, err := verdict(dom)
		if err != nil {
			t.Fatalf("at %d px: %v", w, err)
		}
		if l.Texts == 0 {
			t.Errorf("at %d px: no chart text on the page", w)
		}
		for _, p := range l.Problems {
			t.Errorf("at %d px: %s", w, p)
		}
		out = append(out, l)
	}
	return out
}

func verdict(dom string) (Layout, error) {
	const open = `<pre id="layout-verdict">`
	i := strings.Index(dom, open)
	if i < 0 {
		return Layout{}, fmt.Errorf("the layout script wrote no verdict")
	}
	rest := dom[i+len(open):]
	j := strings.Index(rest, "</pre>")
	if j < 0 {
		return Layout{}, fmt.Errorf("unterminated verdict")
	}
	text := strings.NewReplacer("&quot;", `"`, "&lt;", "<", "&gt;", ">", "&#39;", "'", "&amp;", "&").Replace(rest[:j])
	var l Layout
	if err := json.Unmarshal([]byte(text), &l); err != nil {
		return Layout{}, fmt.Errorf("verdict %q: %w", text, err)
	}
	return l, nil
}

// SVGPage wraps standalone svg documents in an HTML page, one after the
// other, as a results page shows them.
func SVGPage(svgs ...string) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><style>body{margin:8px;font-family:system-ui,sans-serif}svg{display:block;margin:0 0 16px}</style></head><body>`)
	for _, s := range svgs {
		b.WriteString(s)
	}
	b.WriteString(`</body></html>`)
	return b.String()
}
