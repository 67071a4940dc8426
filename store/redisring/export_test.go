package redisring

// NoSends makes s read every batch with a goroutine per shard sending one
// MGET (the way before send.go), for benchmarks that compare both ways in
// one run.
func NoSends(s *Store) { s.noSends = true }

// Workers makes s read with the MGET path (NoSends) and run its per-shard
// reads on n long-lived goroutines instead of one new goroutine each, for
// benchmarks comparing the ways in one run. stop ends the workers; call
// it once s is no longer used.
func Workers(s *Store, n int) (stop func()) {
	s.noSends = true
	s.jobs = make(chan func())
	for range n {
		go func() {
			for j := range s.jobs {
				j()
			}
		}()
	}
	return func() { close(s.jobs) }
}
