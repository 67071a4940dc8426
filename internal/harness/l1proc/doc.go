// Package l1proc holds the cross-process tests of kura's L1 tier: one
// process reads keys into its L1 while another writes or deletes them
// through the shared server, and the reader must never return a value
// whose invalidation it has processed. The package has no code of its
// own; its tests run the processes with internal/harness/proctest.
package l1proc
