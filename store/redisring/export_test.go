package redisring

// NoSends makes s read every batch with a goroutine per shard sending one
// MGET (the way before send.go), for benchmarks that compare both ways in
// one run.
func NoSends(s *Store) { s.noSends = true }
