// Package readme runs the README's quick start as a new user would, so the
// first thing a user copies is never stale.
package readme
