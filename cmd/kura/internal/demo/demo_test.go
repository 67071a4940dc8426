package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/cmd/kura/internal/demo"
	"github.com/kuracache/kura/internal/harness/browsertest"
)

func required() bool { return os.Getenv("CI") == "true" || os.Getenv("KURA_REQUIRE_SERVERS") == "1" }

// TestDemoEndToEnd runs every scenario at the reduced size on real servers
// and checks what each one showed: its numbers exist and the before/after
// direction holds on counts (bytes on the wire, round trips, database rows,
// warnings), never on times. Then the HTML report is loaded in headless
// Chromium and every chart must be in the page the browser built.
func TestDemoEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, redis-server and three memcached")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	progress := &timedLog{t: t, start: time.Now()}
	rep, err := demo.Run(ctx, demo.Config{Size: demo.SmallSize(), Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != len(demo.Names()) {
		t.Fatalf("%d scenarios, want %d", len(rep.Scenarios), len(demo.Names()))
	}
	for _, s := range rep.Scenarios {
		t.Logf("%s: %s in %.1fs", s.Name, s.Status, s.Seconds)
	}
	byName := map[string]demo.Result{}
	for _, s := range rep.Scenarios {
		byName[s.Name] = s
		switch s.Status {
		case demo.Ran, demo.Partial:
		case demo.Skipped:
			if required() || !strings.Contains(s.Reason, "not installed") {
				t.Fatalf("%s skipped: %s", s.Name, s.Reason)
			}
			t.Logf("%s skipped: %s", s.Name, s.Reason)
			continue
		default:
			t.Fatalf("%s: status %q", s.Name, s.Status)
		}
		if len(s.Tables) == 0 || len(s.Charts) == 0 || len(s.Commands) == 0 {
			t.Fatalf("%s: %d tables, %d charts, %d commands", s.Name, len(s.Tables), len(s.Charts), len(s.Commands))
		}
		if s.Status == demo.Partial && len(s.Missing) == 0 {
			t.Fatalf("%s: partial without saying what is missing", s.Name)
		}
		for _, c := range s.Checks {
			if !c.Holds() {
				t.Errorf("%s: %s: %d -> %d, want %s", s.Name, c.What, c.Before, c.After, c.Want)
			}
		}
		for _, ch := range s.Charts {
			if len(ch.Bars) == 0 {
				t.Errorf("%s: chart %q has no bars", s.Name, ch.Title)
			}
		}
	}
	counts := func(name string) map[string]int64 {
		s, ok := byName[name]
		if !ok || s.Status == demo.Skipped {
			return nil
		}
		return s.Counts
	}
	if c := counts("bytes"); c != nil {
		if c["gob.wire_bytes"] <= 0 || c["kura default.wire_bytes"] >= c["gob.wire_bytes"] {
			t.Errorf("bytes: wire bytes gob %d, kura %d", c["gob.wire_bytes"], c["kura default.wire_bytes"])
		}
		if c["kura default.read_db_rows"] != 0 || c["kura default.fill_db_rows"] != int64(demo.SmallSize().Articles) {
			t.Errorf("bytes: database rows %v", c)
		}
		if c["kura default.hits"] != int64(demo.SmallSize().Reads) {
			t.Errorf("bytes: %d hits for %d reads", c["kura default.hits"], demo.SmallSize().Reads)
		}
	}
	if c := counts("login"); c != nil {
		items := int64(demo.SmallSize().Items)
		// Per-key write-back: one round trip per missed row at least.
		if c["cold.per_key.round_trips"] < items || c["cold.index.round_trips"] >= c["cold.per_key.round_trips"]/10 {
			t.Errorf("login: cold round trips per-key %d, index %d (items %d)", c["cold.per_key.round_trips"], c["cold.index.round_trips"], items)
		}
		if c["cold.index.db_queries"] != 2 || c["warm.index.db_queries"] != 0 || c["changed.index.db_rows"] != 1 {
			t.Errorf("login: index queries cold %d warm %d, rows after a change %d",
				c["cold.index.db_queries"], c["warm.index.db_queries"], c["changed.index.db_rows"])
		}
		if c["changed.whole_list.db_rows"] != items {
			t.Errorf("login: whole list re-read %d rows after one change, want %d", c["changed.whole_list.db_rows"], items)
		}
	}
	if c := counts("nodes"); c != nil {
		// A second io-thread is measured only where there are idle cores
		// for it (4 or more); with fewer the card says why it is not.
		if c["io_threads_1.ops"] <= 0 || (runtime.NumCPU() >= 4) != (c["io_threads_2.ops"] > 0) {
			t.Errorf("nodes: sweep counts %v", c)
		}
		// The resize: the naive switch sends the reads to the database,
		// the warm-up serves them from the old servers.
		if n, w := c["resize.naive.db_queries"], c["resize.warm-up.db_queries"]; n == 0 || w >= n || c["resize.warm-up.warm_hits"] == 0 {
			t.Errorf("nodes: resize queries naive %d, warm-up %d, warm-up hits %d", n, w, c["resize.warm-up.warm_hits"])
		}
	}
	if c := counts("health"); c != nil {
		if c["per_request.requests"] <= 0 || c["per_request.pings"] < c["per_request.requests"] {
			t.Errorf("health: %d requests sent %d PINGs, want one each at least", c["per_request.requests"], c["per_request.pings"])
		}
	}
	// Each headline claims only what its own tables hold: the login card
	// names both approaches' cold and warm login times from its trade
	// table, and the health card says its fallback is no database.
	if s, ok := byName["login"]; ok && s.Status != demo.Skipped {
		trade := s.Tables[len(s.Tables)-1]
		for _, row := range trade.Rows {
			for _, cell := range row[2:4] { // warm and cold login
				if !strings.Contains(s.Headline, cell) {
					t.Errorf("login: headline %q leaves out %s's %s from its table", s.Headline, row[0], cell)
				}
			}
		}
		if items := int64(demo.SmallSize().Items); s.Counts["cold.index.db_rows"] == 2*items && !strings.Contains(strings.Join(s.Notes, " "), "the id list") {
			t.Errorf("login: %d database rows for %d items, and no note says why", s.Counts["cold.index.db_rows"], items)
		}
	}
	if s, ok := byName["health"]; ok && s.Status != demo.Skipped {
		if !strings.Contains(s.Headline, "in-process loader, no database") {
			t.Errorf("health: headline %q does not say its fallback is an in-process loader", s.Headline)
		}
		for _, tb := range s.Tables {
			if slices.Contains(tb.Columns, "answered by the database") {
				t.Errorf("health: table %q says \"answered by the database\"; the fallback is an in-process loader", tb.Title)
			}
		}
	}
	if rep.SetupSeconds <= 0 || rep.SetupSeconds >= rep.Seconds {
		t.Errorf("report: setup %.1fs of %.1fs", rep.SetupSeconds, rep.Seconds)
	}
	if c := counts("huge"); c != nil {
		if c["kura.large_value_warnings"] != 1 {
			t.Errorf("huge: %d size-guard warnings, want 1", c["kura.large_value_warnings"])
		}
		if c["scan.found_huge"] != 1 {
			t.Errorf("huge: kura scan did not call out the 1.3 MB value (%d big values)", c["scan.big_values"])
		}
		if c["plain JSON string.bytes_up"] < 1_300_000 {
			t.Errorf("huge: only %d bytes crossed the link for a 1.3 MB value", c["plain JSON string.bytes_up"])
		}
	}
	if c := counts("stale"); c != nil {
		// 50 rows changed behind the cache's back: without cdc all 50 are
		// served stale and the inspector finds them; with cdc none.
		if c["without_cdc.stale_reads"] != 50 || c["without_cdc.stale_reads_1s_later"] != 50 || c["without_cdc.inspector_stale"] != 50 {
			t.Errorf("stale: without cdc %v", c)
		}
		if c["with_cdc.stale_reads"] != 0 || c["with_cdc.inspector_stale"] != 0 || c["with_cdc.inspector_compared"] == 0 || c["with_cdc.lag_max_us"] <= 0 {
			t.Errorf("stale: with cdc %v", c)
		}
		if s := byName["stale"]; !strings.Contains(s.Headline, s.Tables[1].Rows[0][1]) || !strings.Contains(s.Headline, s.Tables[1].Rows[0][2]) {
			t.Errorf("stale: headline %q leaves out the lag its table shows (%v)", s.Headline, s.Tables[1].Rows[0])
		}
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Scenarios {
		if !strings.Contains(text.String(), s.Title) {
			t.Errorf("text output lacks %q", s.Title)
		}
	}
	if strings.Contains(strings.ToLower(text.String()), "seed 0") {
		t.Error("user-facing text names a seed file instead of the problem")
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back demo.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Scenarios) != len(rep.Scenarios) {
		t.Fatalf("JSON does not round-trip: %v", err)
	}

	checkHTML(t, rep)
}

// checkHTML writes the report and loads it in headless Chromium: every
// scenario's section and every chart must be in the DOM the browser built.
func checkHTML(t *testing.T, rep *demo.Report) {
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dom := browsertest.New(t).DOM(t, browsertest.FileURL(path))
	charts := 0
	for _, s := range rep.Scenarios {
		if !strings.Contains(dom, `<section id="`+s.Name+`"`) {
			t.Errorf("the browser's DOM has no section for %s", s.Name)
		}
		charts += len(s.Charts)
	}
	if got := strings.Count(dom, `<svg`); got != charts {
		t.Errorf("the browser's DOM has %d charts, want %d", got, charts)
	}
	if !strings.Contains(dom, rep.Machine.CPU) {
		t.Error("the report does not say which machine it ran on")
	}
	checkLayout(t, rep)
}

// timedLog logs each progress line with the time since the start, so a
// slow step shows in -v output.
type timedLog struct {
	t     *testing.T
	start time.Time
}

func (l *timedLog) Write(p []byte) (int, error) {
	l.t.Logf("%6.1fs %s", time.Since(l.start).Seconds(), strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestOnlyUnknown(t *testing.T) {
	_, err := demo.Run(context.Background(), demo.Config{Only: []string{"nope"}})
	if err == nil || !strings.Contains(err.Error(), "bytes, login") {
		t.Fatalf("unknown scenario: %v", err)
	}
}
