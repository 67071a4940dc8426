package redisring

// NoWorkers makes s run each shard's part of a batch on a new goroutine
// (the way before workers.go), for benchmarks that compare both ways in
// one run.
func NoWorkers(s *Store) {
	s.w.stop()
	s.w = nil
}
