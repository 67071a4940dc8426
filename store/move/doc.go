// Package move moves a cache from one ring of servers to another (servers
// added, removed, or replaced by bigger ones) without emptying it: a
// store.Store over the old ring and the new one that, in phases, makes the
// new owners of the keys warm themselves from the old owners instead of
// sending every moved key to the database at once. mcrouter's WarmUpRoute
// is the model (a miss on the cold pool is served from the warm pool and
// copied over); unlike it, a move keeps both rings consistent with every
// invalidation, so a copy never brings back a value an Invalidate removed.
//
// A deploy switches processes one by one, so a move has phases that a
// fleet passes through in order (docs/resize.md has the procedure):
//
//  1. [PhaseDual]: reads go to the old owner; every write, fill and
//     invalidation reaches both owners (the old one first).
//  2. [PhaseWarm]: reads go to the new owner; a miss there is read from
//     the old owner and, if found, served and copied to the new owner
//     under a lease on the new owner, so that an invalidation that
//     overtakes the copy voids it. Writes and invalidations still reach
//     both owners: processes still in phase 1 read the old one.
//  3. [PhaseNew]: the new ring only; invalidations and deletes still
//     reach the old owner, for the processes still in phase 2.
//
// A phase begins at a time (Options.WarmAt, Options.NewAt), so that one
// deploy carries the whole schedule, or on a call ([Store.SetPhase],
// [Store.End]). A key whose owner is the same server on both rings (a
// store.NodeLocator on both sides says so) is not moved: it goes to its
// one server once.
//
// Leases (store.Leaser) pass through: in phase 1 they are taken on the old
// owner, from phase 2 on the new owner; a lease remembers which side it
// came from, so a process that switches phase between its lease and its
// fill fills the right server. Invalidate voids leases on both owners, the
// old one first, which is what makes copies safe: a copy reads the old
// owner after it took its lease on the new owner, so either it read the
// old owner after the invalidation (and found nothing to copy) or the
// invalidation of the new owner came after its lease and refuses its fill.
//
// The package is a mechanism below the Cache: it moves bytes, and knows of
// kura's value format only enough to never copy a lease placeholder or a
// tombstone, and to copy a value with what is left of its TTL.
package move
