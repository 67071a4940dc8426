package benchreport

// The page's sections: what each runs at `make bench-report`'s small
// sizes, the rows it keeps and the ratios it reports. Each Go run is a
// test binary built once (go test -c) and run with -test.bench; rounds
// are the benchmark's own interleaved rounds ("round2/kura") or, for a
// benchmark without them, one process per round (-test.count 1, run
// Rounds times), so every round runs each contender once, in the
// benchmark's order, and rounds are paired by position. (-test.count N
// in one process would run one contender's N samples back to back.)

// goRun is one invocation of a package's test binary.
type goRun struct {
	Pkg       string // "./store/memcache"
	Bench     string // -test.bench
	Benchtime string
	Rounds    int
	Env       []string
}

// rowSpec picks a contender's figure from the runs' output.
type rowSpec struct {
	ID     string // row id within the section
	Name   string // shown on the page
	Bench  string // benchmark name without "Benchmark", round and -GOMAXPROCS ("ReadPath/kura")
	Metric string
	Better string
	Kura   bool
	// Target bounds the row's own median, for a figure with no peer
	// (Row.Target); Analysis links where a miss is analysed.
	Target   float64
	Analysis string
}

// ratioSpec is kura against a peer.
type ratioSpec struct {
	Peer, Kura, Label, Kind string
	Target                  float64
	Headline                bool
	Analysis                string
}

// spec is one section of the page.
type spec struct {
	ID, Title, Question, Command string
	Go                           []goRun
	// Custom runs something other than a Go benchmark (redis-benchmark,
	// Node, Ruby, the change stream's tests) and returns rows' samples by
	// row id.
	Custom func(e *env) (map[string][]float64, error)
	Rows   []rowSpec
	Ratios []ratioSpec
}

func specs() []spec {
	return []spec{
		{
			ID: "warm-hits", Title: "Warm hits without an L1",
			Question: "How fast is a warm read-through hit (a round trip and a decode) against rueidisaside and go-redis/cache?",
			Command: "KURA_BENCH_ROUNDS=3 go test -run '^$' -bench '^BenchmarkReadPath$/round[0-9]+/(kura|rueidisaside-nocache)$' . && " +
				"for i in $(seq 3); do go test -run '^$' -bench '^BenchmarkReadThrough$/(kura|go-redis-cache)$' .; done",
			Go: []goRun{
				{Pkg: ".", Bench: "^BenchmarkReadPath$/round[0-9]+/(kura|rueidisaside-nocache)$", Benchtime: "1s", Rounds: 1, Env: []string{"KURA_BENCH_ROUNDS=3"}},
				{Pkg: ".", Bench: "^BenchmarkReadThrough$/(kura|go-redis-cache)$", Benchtime: "1s", Rounds: 3},
			},
			Rows: []rowSpec{
				{ID: "kura", Name: "kura Fetch, 64 callers (vs rueidisaside)", Bench: "ReadPath/kura", Metric: "ops/s", Better: "higher", Kura: true},
				{ID: "rueidisaside", Name: "rueidisaside@v1.0.78, DisableCache", Bench: "ReadPath/rueidisaside-nocache", Metric: "ops/s", Better: "higher"},
				{ID: "kura-rt", Name: "kura Fetch, 64 callers (vs go-redis/cache)", Bench: "ReadThrough/kura", Metric: "ops/s", Better: "higher", Kura: true},
				{ID: "go-redis-cache", Name: "go-redis/cache v9 Once, no local cache", Bench: "ReadThrough/go-redis-cache", Metric: "ops/s", Better: "higher"},
			},
			Ratios: []ratioSpec{
				{Kura: "kura", Peer: "rueidisaside", Label: "kura / rueidisaside (no client cache)", Kind: "speed", Target: 1.3, Headline: true, Analysis: "docs/benchmarks/read-path.md"},
				{Kura: "kura-rt", Peer: "go-redis-cache", Label: "kura / go-redis/cache Once", Kind: "speed", Target: 2, Headline: true, Analysis: "docs/benchmarks/read-path.md"},
			},
		},
		{
			ID: "warm-hits-l1", Title: "Warm hits with the L1",
			Question: "How fast is a hit served from the process's own memory, against the peers' client-side caches?",
			Command:  "go test -run '^$' -bench '^BenchmarkL1WarmHits$/round[0-9]+/(kura-l1|rueidisaside|go-redis-cache-tinylfu|kura)$' .",
			Go: []goRun{
				{Pkg: ".", Bench: "^BenchmarkL1WarmHits$/round[0-9]+/(kura-l1|rueidisaside|go-redis-cache-tinylfu|kura)$", Benchtime: "1s", Rounds: 1},
			},
			Rows: []rowSpec{
				{ID: "kura-l1", Name: "kura Fetch with the L1", Bench: "L1WarmHits/kura-l1", Metric: "ops/s", Better: "higher", Kura: true},
				{ID: "rueidisaside", Name: "rueidisaside, client-side caching", Bench: "L1WarmHits/rueidisaside", Metric: "ops/s", Better: "higher"},
				{ID: "go-redis-cache-tinylfu", Name: "go-redis/cache Once, TinyLFU", Bench: "L1WarmHits/go-redis-cache-tinylfu", Metric: "ops/s", Better: "higher"},
				{ID: "kura", Name: "kura Fetch without the L1", Bench: "L1WarmHits/kura", Metric: "ops/s", Better: "higher", Kura: true},
			},
			Ratios: []ratioSpec{
				{Kura: "kura-l1", Peer: "rueidisaside", Label: "kura L1 / rueidisaside client cache", Kind: "speed", Target: 1, Headline: true, Analysis: "docs/benchmarks/l1.md"},
				{Kura: "kura-l1", Peer: "go-redis-cache-tinylfu", Label: "kura L1 / go-redis/cache TinyLFU", Kind: "speed", Headline: true},
				{Kura: "kura-l1", Peer: "kura", Label: "kura L1 / kura without L1", Kind: "speed", Target: 20, Analysis: "docs/benchmarks/l1.md"},
			},
		},
		{
			ID: "batched", Title: "Batched reads and write-backs",
			Question: "What does one batched call save over a call per key, and over gomemcache's GetMulti?",
			Command: "for i in $(seq 3); do go test -run '^$' -bench '^BenchmarkGetMany1000$/loopback/' ./store/memcache; done && " +
				"for i in $(seq 3); do go test -run '^$' -bench '^BenchmarkSeedWriteBack$/(loopback|rtt500us)/(a-gomemcache-per-key|d-kura-SetMany)$' -benchtime 1x ./store/memcache; done",
			Go: []goRun{
				{Pkg: "./store/memcache", Bench: "^BenchmarkGetMany1000$/loopback/", Benchtime: "1s", Rounds: 3},
				{Pkg: "./store/memcache", Bench: "^BenchmarkSeedWriteBack$/(loopback|rtt500us)/(a-gomemcache-per-key|d-kura-SetMany)$", Benchtime: "1x", Rounds: 3},
			},
			Rows: []rowSpec{
				{ID: "getmany", Name: "kura GetMany, 1,000 keys, 3 memcached", Bench: "GetMany1000/loopback/kura", Metric: "ns/op", Better: "lower", Kura: true},
				{ID: "getmulti", Name: "gomemcache GetMulti, same keys", Bench: "GetMany1000/loopback/gomemcache", Metric: "ns/op", Better: "lower"},
				{ID: "setmany", Name: "kura SetMany, 5,000 values, loopback", Bench: "SeedWriteBack/loopback/d-kura-SetMany", Metric: "ns/op", Better: "lower", Kura: true},
				{ID: "perkey", Name: "gomemcache Set per key, loopback", Bench: "SeedWriteBack/loopback/a-gomemcache-per-key", Metric: "ns/op", Better: "lower"},
				{ID: "setmany-rtt", Name: "kura SetMany, 0.5 ms round trip", Bench: "SeedWriteBack/rtt500us/d-kura-SetMany", Metric: "ns/op", Better: "lower", Kura: true},
				{ID: "perkey-rtt", Name: "gomemcache Set per key, 0.5 ms round trip", Bench: "SeedWriteBack/rtt500us/a-gomemcache-per-key", Metric: "ns/op", Better: "lower"},
			},
			Ratios: []ratioSpec{
				{Kura: "getmany", Peer: "getmulti", Label: "GetMany / gomemcache GetMulti", Kind: "speed", Target: 1.5, Headline: true, Analysis: "docs/benchmarks/batching.md"},
				{Kura: "setmany", Peer: "perkey", Label: "SetMany / Set per key, loopback", Kind: "speed", Target: 100, Headline: true, Analysis: "docs/benchmarks/batching.md"},
				{Kura: "setmany-rtt", Peer: "perkey-rtt", Label: "SetMany / Set per key, 0.5 ms RTT", Kind: "speed", Target: 100, Headline: true},
			},
		},
		{
			ID: "stampedes", Title: "Stampedes and invalidations",
			Question: "How many loader calls does a storm of invalidations under 16 readers cost, against rueidisaside and go-redis/cache?",
			Command:  "KURA_STORM_ROUNDS=2 go test -run '^$' -bench '^BenchmarkInvalidationStorm$/round[0-9]+/redis/(kura-leases|rueidisaside|go-redis-cache-once)$' ./internal/harness/leaserace",
			Go: []goRun{
				{Pkg: "./internal/harness/leaserace", Bench: "^BenchmarkInvalidationStorm$/round[0-9]+/redis/(kura-leases|rueidisaside|go-redis-cache-once)$", Benchtime: "1x", Rounds: 1, Env: []string{"KURA_STORM_ROUNDS=2"}},
			},
			Rows: []rowSpec{
				{ID: "kura", Name: "kura with leases: loads per invalidation that removed a value", Bench: "InvalidationStorm/redis/kura-leases", Metric: "loads/removing-invalidation", Better: "lower", Kura: true},
				{ID: "rueidisaside", Name: "rueidisaside: loads per invalidation that removed a value", Bench: "InvalidationStorm/redis/rueidisaside", Metric: "loads/removing-invalidation", Better: "lower"},
				{ID: "go-redis-cache", Name: "go-redis/cache Once: loads per invalidation that removed a value", Bench: "InvalidationStorm/redis/go-redis-cache-once", Metric: "loads/removing-invalidation", Better: "lower"},
				{ID: "kura-wait", Name: "kura: a waiting reader's p99 (ms)", Bench: "InvalidationStorm/redis/kura-leases", Metric: "wait-p99-ms", Better: "lower", Kura: true},
				{ID: "rueidisaside-wait", Name: "rueidisaside: a waiting reader's p99 (ms)", Bench: "InvalidationStorm/redis/rueidisaside", Metric: "wait-p99-ms", Better: "lower"},
			},
			Ratios: []ratioSpec{
				{Kura: "kura", Peer: "rueidisaside", Label: "loads: kura / rueidisaside", Kind: "size", Target: 1, Headline: true, Analysis: "docs/benchmarks/stampedes.md"},
				{Kura: "kura", Peer: "go-redis-cache", Label: "loads: kura / go-redis/cache", Kind: "size", Target: 1, Headline: true},
			},
		},
		{
			ID: "bytes", Title: "Bytes per value",
			Question: "How many bytes does a value take in the cache, and at what CPU, against msgpack+snappy and go-redis/cache?",
			Command:  "for i in $(seq 3); do go test -run '^$' -bench '^Benchmark(Encode|Decode)$/(msgpack\\+snappy|go-redis-cache|kura|kura-zstd-dict)$' -benchtime 300x ./codec; done",
			Go: []goRun{
				{Pkg: "./codec", Bench: "^Benchmark(Encode|Decode)$/(msgpack\\+snappy|go-redis-cache|kura|kura-zstd-dict)$", Benchtime: "300x", Rounds: 3},
			},
			Rows: []rowSpec{
				{ID: "kura-bytes", Name: "kura default (msgpack + S2), B/value", Bench: "Encode/kura", Metric: "B/value", Better: "lower", Kura: true},
				{ID: "seed-bytes", Name: "msgpack+snappy, B/value", Bench: "Encode/msgpack+snappy", Metric: "B/value", Better: "lower"},
				{ID: "grc-bytes", Name: "go-redis/cache v9 (msgpack + s2), B/value", Bench: "Encode/go-redis-cache", Metric: "B/value", Better: "lower"},
				{ID: "dict-bytes", Name: "kura zstd + trained dictionary, B/value", Bench: "Encode/kura-zstd-dict", Metric: "B/value", Better: "lower", Kura: true},
				{ID: "kura-enc", Name: "kura default encode, ns/value", Bench: "Encode/kura", Metric: "ns/op", Better: "lower", Kura: true},
				{ID: "seed-enc", Name: "msgpack+snappy encode, ns/value", Bench: "Encode/msgpack+snappy", Metric: "ns/op", Better: "lower"},
				{ID: "kura-dec", Name: "kura default decode, ns/value", Bench: "Decode/kura", Metric: "ns/op", Better: "lower", Kura: true},
				{ID: "seed-dec", Name: "msgpack+snappy decode, ns/value", Bench: "Decode/msgpack+snappy", Metric: "ns/op", Better: "lower"},
			},
			Ratios: []ratioSpec{
				{Kura: "kura-bytes", Peer: "seed-bytes", Label: "bytes: kura / msgpack+snappy", Kind: "size", Target: 1, Headline: true, Analysis: "docs/benchmarks/bytes-per-value.md"},
				{Kura: "dict-bytes", Peer: "seed-bytes", Label: "bytes: zstd+dict / msgpack+snappy", Kind: "size", Target: 0.65, Analysis: "docs/benchmarks/bytes-per-value.md"},
				{Kura: "kura-enc", Peer: "seed-enc", Label: "encode speed: kura / msgpack+snappy", Kind: "speed", Target: 1, Headline: true},
				{Kura: "kura-dec", Peer: "seed-dec", Label: "decode speed: kura / msgpack+snappy", Kind: "speed", Target: 1, Headline: true},
			},
		},
		{
			ID: "loadgen", Title: "The load generator against redis-benchmark",
			Question: "Does `kura bench` find the server's limit rather than its own, as redis-benchmark does?",
			Command:  "kura bench redis://127.0.0.1:PORT -t get -c 50 -d 100 -r 100000 -P 16 -n 1000000 and redis-benchmark -p PORT -t get -c 50 -d 100 -r 100000 -P 16 -n 1000000, alternating, 3 rounds (also -P 1 -n 100000, and SET)",
			Custom:   runLoadgen,
			Rows: []rowSpec{
				{ID: "kura-get-p16", Name: "kura bench GET -P 16", Metric: "ops/s", Better: "higher", Kura: true},
				{ID: "rb-get-p16", Name: "redis-benchmark GET -P 16", Metric: "ops/s", Better: "higher"},
				{ID: "kura-set-p16", Name: "kura bench SET -P 16", Metric: "ops/s", Better: "higher", Kura: true},
				{ID: "rb-set-p16", Name: "redis-benchmark SET -P 16", Metric: "ops/s", Better: "higher"},
				{ID: "kura-get-p1", Name: "kura bench GET -P 1", Metric: "ops/s", Better: "higher", Kura: true},
				{ID: "rb-get-p1", Name: "redis-benchmark GET -P 1", Metric: "ops/s", Better: "higher"},
			},
			Ratios: []ratioSpec{
				{Kura: "kura-get-p16", Peer: "rb-get-p16", Label: "GET -P 16: kura bench / redis-benchmark", Kind: "speed", Target: 0.9, Headline: true, Analysis: "docs/benchmarks/loadgen.md"},
				{Kura: "kura-set-p16", Peer: "rb-set-p16", Label: "SET -P 16: kura bench / redis-benchmark", Kind: "speed", Target: 0.9, Headline: true, Analysis: "docs/benchmarks/loadgen.md"},
				{Kura: "kura-get-p1", Peer: "rb-get-p1", Label: "GET -P 1: kura bench / redis-benchmark", Kind: "speed", Target: 0.9, Headline: true},
			},
		},
		{
			ID: "rings", Title: "Rings against go-redis Ring",
			Question: "How fast is a batched read of 100 warm keys from 3 Redis shards, against a go-redis Ring pipeline?",
			Command:  "for i in $(seq 3); do go test -run '^$' -bench '^BenchmarkGetMany100$/(kura-GetMany|kura-FetchMany|go-redis-Ring-pipeline)$' ./store/redisring; done",
			Go: []goRun{
				{Pkg: "./store/redisring", Bench: "^BenchmarkGetMany100$/(kura-GetMany|kura-FetchMany|go-redis-Ring-pipeline)$", Benchtime: "1s", Rounds: 3},
			},
			Rows: []rowSpec{
				{ID: "getmany", Name: "kura GetMany, 3 shards, 100 keys", Bench: "GetMany100/kura-GetMany", Metric: "ns/op", Better: "lower", Kura: true},
				{ID: "fetchmany", Name: "kura FetchMany (decodes), same keys", Bench: "GetMany100/kura-FetchMany", Metric: "ns/op", Better: "lower", Kura: true},
				{ID: "ring", Name: "go-redis Ring, pipeline of 100 GETs", Bench: "GetMany100/go-redis-Ring-pipeline", Metric: "ns/op", Better: "lower"},
			},
			Ratios: []ratioSpec{
				{Kura: "getmany", Peer: "ring", Label: "GetMany / go-redis Ring pipeline", Kind: "speed", Target: 1.5, Headline: true, Analysis: "docs/benchmarks/rings.md"},
				{Kura: "fetchmany", Peer: "ring", Label: "FetchMany / go-redis Ring pipeline (no decode)", Kind: "speed", Analysis: "docs/benchmarks/rings.md"},
			},
		},
		{
			ID: "health", Title: "Health under a stall",
			Question: "When the Redis server stops answering (SIGSTOP for 2 s), how long do callers wait, with kura's breaker and with a store timeout alone?",
			Command:  "for i in $(seq 2); do go test -run '^$' -bench '^BenchmarkFailOpen$/(kura-breaker|store-timeout-only)$' -benchtime 1x ./store/health; done",
			Go: []goRun{
				{Pkg: "./store/health", Bench: "^BenchmarkFailOpen$/(kura-breaker|store-timeout-only)$", Benchtime: "1x", Rounds: 2},
			},
			Rows: []rowSpec{
				{ID: "kura-p50", Name: "kura breaker: caller p50 during the stall (ms)", Bench: "FailOpen/kura-breaker", Metric: "stall-p50-ms", Better: "lower", Kura: true},
				{ID: "timeout-p50", Name: "store timeout only: caller p50 during the stall (ms)", Bench: "FailOpen/store-timeout-only", Metric: "stall-p50-ms", Better: "lower"},
				{ID: "kura-p99", Name: "kura breaker: caller p99 during the stall (ms)", Bench: "FailOpen/kura-breaker", Metric: "stall-p99-ms", Better: "lower", Kura: true},
				{ID: "timeout-p99", Name: "store timeout only: caller p99 during the stall (ms)", Bench: "FailOpen/store-timeout-only", Metric: "stall-p99-ms", Better: "lower"},
				{ID: "kura-open", Name: "kura breaker: SIGSTOP to first caller served without waiting (ms)", Bench: "FailOpen/kura-breaker", Metric: "sigstop-to-fail-open-ms", Better: "lower", Kura: true},
			},
			Ratios: []ratioSpec{
				{Kura: "kura-p99", Peer: "timeout-p99", Label: "caller p99 in a stall: timeout only / breaker", Kind: "speed", Headline: true, Analysis: "docs/benchmarks/health.md"},
				{Kura: "kura-p50", Peer: "timeout-p50", Label: "caller p50 in a stall: timeout only / breaker", Kind: "speed", Analysis: "docs/benchmarks/health.md"},
			},
		},
		{
			ID: "node", Title: "Node.js",
			Question: "How fast is a warm `fetch` in Node, against a plain ioredis GET + JSON.parse, the field report's snappy, keyv, cache-manager and BentoCache?",
			Command:  "cd js && npm ci && npm run build && ROUNDS=3 ROUND_MS=1000 RESULTS_JSON=out.json node bench/fetch.mjs",
			Custom:   runNode,
			Rows: []rowSpec{
				{ID: "kura", Name: "kura fetch", Metric: "ops/s", Better: "higher", Kura: true},
				{ID: "plain", Name: "plain GET + JSON.parse", Metric: "ops/s", Better: "higher"},
				{ID: "snappy", Name: "GET + snappy + JSON.parse (the field report)", Metric: "ops/s", Better: "higher"},
				{ID: "keyv", Name: "keyv get (@keyv/redis)", Metric: "ops/s", Better: "higher"},
				{ID: "cache-manager", Name: "cache-manager wrap (keyv redis store)", Metric: "ops/s", Better: "higher"},
				{ID: "bentocache", Name: "BentoCache getOrSet (Redis layer, no L1)", Metric: "ops/s", Better: "higher"},
			},
			Ratios: []ratioSpec{
				{Kura: "kura", Peer: "plain", Label: "kura fetch / plain GET + JSON.parse", Kind: "speed", Headline: true, Analysis: "docs/benchmarks/node.md"},
				{Kura: "kura", Peer: "snappy", Label: "kura fetch / GET + snappy (field report)", Kind: "speed"},
				{Kura: "kura", Peer: "keyv", Label: "kura fetch / keyv", Kind: "speed"},
				{Kura: "kura", Peer: "cache-manager", Label: "kura fetch / cache-manager", Kind: "speed"},
				{Kura: "kura", Peer: "bentocache", Label: "kura fetch / BentoCache", Kind: "speed"},
			},
		},
		{
			ID: "ruby", Title: "Ruby",
			Question: "How much faster is the Ruby gem's cold login and warm read_multi than Rails' MemCacheStore (dalli) and RedisCacheStore, and how many bytes does a record take against Rails' default?",
			Command: "go build -o rb/.build/rbinterop ./internal/harness/rbinterop && cd rb && KURA_RB_PREBUILT=1 KURA_BENCH=bytes,login,read KURA_BENCH_PROXY_ONLY=1 " +
				"KURA_BENCH_KEYS=1000 KURA_BENCH_LOGIN_ROUNDS=3 KURA_BENCH_RAILS_ROUNDS=3 KURA_BENCH_PERKEY_ROUNDS=3 KURA_BENCH_READ_ROUNDS=3 RESULTS_JSON=out.json ruby -Ilib -Itest bench/bench.rb",
			Custom: runRuby,
			Rows: []rowSpec{
				{ID: "login", Name: "kura fetch_multi: cold login, 1,000 records, 3 ms a round trip (ms)", Metric: "login-ms", Better: "lower", Kura: true},
				{ID: "memcachestore", Name: "Rails MemCacheStore#fetch_multi (dalli), same login (ms)", Metric: "login-ms", Better: "lower"},
				{ID: "perkey", Name: "a write per record with kura's client (1,000 round trips), same login (ms)", Metric: "login-ms", Better: "lower"},
				{ID: "read-mc", Name: "kura Cache#read_multi, 100 warm records, memcached (ms)", Metric: "read-ms", Better: "lower", Kura: true},
				{ID: "memcachestore-read", Name: "Rails MemCacheStore#read_multi (dalli) (ms)", Metric: "read-ms", Better: "lower"},
				{ID: "read-redis", Name: "kura Cache#read_multi, 100 warm records, Redis (ms)", Metric: "read-ms", Better: "lower", Kura: true},
				{ID: "rediscachestore", Name: "Rails RedisCacheStore#read_multi (ms)", Metric: "read-ms", Better: "lower"},
				{ID: "bytes-kura", Name: "kura, the field report's record as a Cache writes it, B/value", Metric: "B/value", Better: "lower", Kura: true},
				{ID: "bytes-rails", Name: "Rails' default (Marshal of the Entry), B/value", Metric: "B/value", Better: "lower"},
			},
			Ratios: []ratioSpec{
				{Kura: "login", Peer: "memcachestore", Label: "cold login: kura / MemCacheStore#fetch_multi", Kind: "speed", Target: 2, Headline: true, Analysis: "docs/benchmarks/ruby.md"},
				{Kura: "login", Peer: "perkey", Label: "cold login: kura / a write per record", Kind: "speed", Target: 100, Headline: true, Analysis: "docs/benchmarks/ruby.md"},
				{Kura: "read-mc", Peer: "memcachestore-read", Label: "warm read_multi: kura / MemCacheStore", Kind: "speed", Target: 1, Headline: true, Analysis: "docs/benchmarks/ruby.md"},
				{Kura: "read-redis", Peer: "rediscachestore", Label: "warm read_multi: kura / RedisCacheStore", Kind: "speed", Target: 1, Analysis: "docs/benchmarks/ruby.md"},
				{Kura: "bytes-kura", Peer: "bytes-rails", Label: "bytes: kura / Rails' default", Kind: "size", Target: 0.5, Headline: true, Analysis: "docs/benchmarks/ruby.md"},
			},
		},
		{
			ID: "cdc", Title: "The change stream",
			Question: "How fast does `kura cdc` drain PostgreSQL's change stream into Redis and memcached, against pg_recvlogical on the same WAL, and how long from a commit to the invalidation?",
			Command: "KURA_CDC_BENCH=1 KURA_CDC_BENCH_ROWS=200000 KURA_CDC_BENCH_ROUNDS=3 go test -count=1 -run '^TestBenchThroughput$' -v ./cdc/ && " +
				"for i in 1 2; do KURA_CDC_BENCH=1 KURA_CDC_BENCH_SECONDS=5 go test -count=1 -run '^TestBenchLag$' -v ./cdc/; done",
			Custom: runCDC,
			Rows: []rowSpec{
				{ID: "kura", Name: "kura cdc into Redis and memcached, a backlog of 200,000 rows", Metric: "rows/s", Better: "higher", Kura: true},
				{ID: "pg-recvlogical", Name: "pg_recvlogical (pgoutput to /dev/null), the same WAL", Metric: "rows/s", Better: "higher"},
				{ID: "commit-p50", Name: "kura cdc at 1,000 commits/s: commit → applied on both, p50 (ms)", Metric: "p50-ms", Better: "lower", Kura: true},
				{ID: "commit-p99", Name: "kura cdc at 1,000 commits/s: commit → applied on both, p99 (ms)", Metric: "p99-ms", Better: "lower", Kura: true, Target: 50, Analysis: "docs/benchmarks/cdc.md"},
			},
			Ratios: []ratioSpec{
				{Kura: "kura", Peer: "pg-recvlogical", Label: "rows/s: kura cdc / pg_recvlogical", Kind: "speed", Target: 0.8, Headline: true, Analysis: "docs/benchmarks/cdc.md"},
			},
		},
	}
}
