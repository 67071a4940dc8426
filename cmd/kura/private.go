package main

import (
	"fmt"
	"os"
	"syscall"
)

// createPrivate opens path for a report or a dictionary (both may embed
// cached text or a command line): created 0600, truncated if it exists,
// never through a symbolic link planted at its name, and made 0600 if it
// existed with looser permissions.
func createPrivate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// createPrivateTemp creates a new file in the temporary directory named
// after pattern ("kura-sweep-*.html"): exclusive (a name nobody could
// plant a link at in advance) and 0600.
func createPrivateTemp(pattern string) (*os.File, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, fmt.Errorf("cannot create a report in %s: %w", os.TempDir(), err)
	}
	return f, nil
}

// writePrivate writes data to path as createPrivate opens it.
func writePrivate(path string, data []byte) error {
	f, err := createPrivate(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
