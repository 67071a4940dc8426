package loadgen

import (
	"bytes"
	"strings"
	"testing"
)

// TestOneNodeIsSingular: a run against one server says "1 node", not
// "1 node(s)", in the text and in the HTML report.
func TestOneNodeIsSingular(t *testing.T) {
	r := &Result{Target: "redis://127.0.0.1:6379", Topology: "standalone", Nodes: 1, Protocol: "resp"}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(standalone, 1 node, resp)") {
		t.Errorf("text: %s", b.String())
	}
	r.Nodes = 3
	b.Reset()
	_ = r.WriteText(&b)
	if !strings.Contains(b.String(), "(standalone, 3 nodes, resp)") {
		t.Errorf("text: %s", b.String())
	}
}
