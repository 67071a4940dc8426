package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kuracache/kura/internal/units"
)

// Report is what a demo run showed, scenario by scenario.
type Report struct {
	// Command is how the run was started ("kura demo").
	Command string  `json:"command"`
	Machine Machine `json:"machine"`
	// Servers lists the private servers the run used, and those that
	// could not be started with the reason.
	Servers []string  `json:"servers"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	// SetupSeconds is the part of Seconds spent starting the servers and
	// loading the data set. Building kura and `make servers`, before the
	// command starts, are in neither.
	SetupSeconds float64  `json:"setup_seconds"`
	Scenarios    []Result `json:"scenarios"`
}

// Machine describes the computer the numbers were measured on.
type Machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	OS        string  `json:"os"`
	Kernel    string  `json:"kernel,omitempty"`
	MemoryGiB float64 `json:"memory_gib,omitempty"`
	Go        string  `json:"go"`
}

func (m Machine) String() string {
	s := fmt.Sprintf("%s, %d cores", m.CPU, m.Cores)
	if m.MemoryGiB > 0 {
		s += fmt.Sprintf(", %.1f GiB RAM", m.MemoryGiB)
	}
	s += ", " + m.OS
	if m.Kernel != "" {
		s += " " + m.Kernel
	}
	return s + ", " + m.Go
}

func describeMachine() Machine {
	m := Machine{CPU: "unknown CPU", Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			m.MemoryGiB = kb / (1 << 20)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`) + " " + runtime.GOARCH
			}
		}
	}
	return m
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the terminal summary: one block and table per scenario.
func (r *Report) WriteText(w io.Writer) error {
	for _, s := range r.Scenarios {
		fmt.Fprintf(w, "\n== %s [%s]\n", s.Title, s.Status)
		fmt.Fprintf(w, "problem: %s\n", s.Problem)
		if s.Status == Skipped || s.Status == NotBuilt {
			fmt.Fprintf(w, "%s: %s\n", s.Status, s.Reason)
			if len(s.Tables) == 0 {
				continue
			}
		}
		fmt.Fprintf(w, "kura:    %s\n", s.Answer)
		for _, t := range s.Tables {
			fmt.Fprintln(w)
			if t.Title != "" {
				fmt.Fprintln(w, t.Title)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, strings.Join(t.Columns, "\t")+"\t")
			for _, row := range t.Rows {
				fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if len(s.Checks) > 0 {
			fmt.Fprintln(w)
			for _, c := range s.Checks {
				mark := "ok"
				if !c.Holds() {
					mark = "NOT AS EXPECTED"
				}
				fmt.Fprintf(w, "  %-3s %s: %d -> %d\n", mark, c.What, c.Before, c.After)
			}
		}
		for _, m := range s.Missing {
			fmt.Fprintf(w, "  not built yet: %s\n", m)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
		if len(s.Commands) > 0 {
			fmt.Fprintf(w, "  reproduce: %s\n", strings.Join(s.Commands, "\n             "))
		}
	}
	fmt.Fprintln(w, "\n== Summary")
	for _, s := range r.Scenarios {
		line := s.Headline
		if line == "" {
			line = s.Reason
		}
		fmt.Fprintf(w, "  %-34s %-14s %s\n", s.Title, "["+string(s.Status)+"]", line)
	}
	_, err := fmt.Fprintf(w, "\nran in %.0fs on %s: %.0fs starting the servers and loading the data, %.0fs in the scenarios (building kura and installing servers before the command started are not counted)\n",
		r.Seconds, r.Machine, r.SetupSeconds, r.Seconds-r.SetupSeconds)
	return err
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// human prints a size with the one byte formatter every kura command
// uses (decimal units: 1.3 MB), so a size in the prose and in the tables
// reads the same.
func human(n int64) string { return units.FormatBytes(float64(n)) }

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}
