package redisring

// NoSends makes s read every batch with one MGET per shard, all shards at
// once (on its workers), instead of sending every shard its GETs from the
// caller (send.go), for benchmarks that compare the ways in one run.
func NoSends(s *Store) { s.noSends = true }

// NoWorkers is NoSends with a new goroutine for each shard's MGET (the
// way before workers.go).
func NoWorkers(s *Store) {
	s.noSends = true
	s.w.stop()
	s.w = nil
}
