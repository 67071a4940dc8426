// Package plan sizes a Redis-compatible cache: for each node type of a
// catalog it works out how many nodes the data needs by memory, the
// traffic by CPU and by network (baseline bandwidth, burst shown), which
// of the three binds, what the nodes cost per month, and how much headroom
// the other two keep. It answers what-if questions (a codec that changes
// the bytes, a value-size guard that cuts the tail, a different thread
// count) and checks the largest value against each node's link: how long
// one transfer takes and how many per second saturate it.
//
// The package does no I/O: inputs come as numbers (from flags, or from
// `kura bench --json` through ReadBench), the catalog as a parsed value
// (DefaultCatalog, or ParseCatalog over a user's file), and the results
// are plain values that package plan/report prints as text or HTML.
//
// The catalog holds facts only. A figure that was not found in a public
// source is zero, and the plan says which constraint it could not check
// for that reason instead of guessing.
package plan
