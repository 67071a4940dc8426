// Package layers holds the test that keeps the module's import graph in
// its written layer order (see layers_test.go for the order, the rules and
// the named exceptions). The package has no code of its own.
package layers
