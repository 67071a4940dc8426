package redisring

// SetParallelReads switches GetMany and LeaseGet between reading the
// shards at once and one after another with a hedge (readShards), for
// the benchmark that compares the two.
func SetParallelReads(s *Store, on bool) { s.parallelReads = on }
