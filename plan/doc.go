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
// Costs come from the catalog's prices, chosen per plan by Pricing: the
// region of each provider, the engine (Redis OSS or Valkey), and discounts
// (a committed-use term of the catalog, or the user's own fraction). Every
// price names its source and the date of its data; a month is
// HoursPerMonth (730) hours. Rows are ranked by monthly cost among the
// priced ones; a row without a price says why and is never ranked on cost.
// A what-if plan carries the plan as asked (Plan.Before) and prices the
// change; Compare prices both fleets of "24 of these or 6 of those".
//
// The catalog holds facts only. A figure that was not found in a public
// source is zero, and the plan says which constraint it could not check
// for that reason instead of guessing.
package plan
