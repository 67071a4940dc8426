package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReportFilesPrivate: reports and dictionaries are created 0600,
// never through a link planted at their name, and the default sweep
// report gets a fresh name.
func TestReportFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "kura-sweep.html")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := writePrivate(link, []byte("report")); err == nil {
		t.Fatal("wrote through a planted symbolic link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the link's target was changed: %q", b)
	}
	if err := checkWritable(link); err == nil {
		t.Fatal("checkWritable accepted a planted symbolic link")
	}
	loose := filepath.Join(dir, "articles.dict")
	if err := os.WriteFile(loose, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{loose, filepath.Join(dir, "new.dict")} {
		if err := writePrivate(p, []byte("dictionary text")); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	t.Setenv("TMPDIR", dir)
	a, err := createPrivateTemp("kura-sweep-*.html")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := createPrivateTemp("kura-sweep-*.html")
	defer a.Close()
	defer b.Close()
	if a.Name() == b.Name() || filepath.Dir(a.Name()) != dir {
		t.Errorf("default reports %s and %s", a.Name(), b.Name())
	}
	if st, _ := os.Stat(a.Name()); st.Mode().Perm() != 0o600 {
		t.Errorf("default report mode %v", st.Mode().Perm())
	}
}
