# kura: `make demo` and `make test` do everything on a fresh Debian machine.
GO        ?= go
STATICCHECK_VERSION ?= v0.8.2
TEST_TIMEOUT ?= 25m
BENCH     ?= .
BENCHTIME ?= 1s

.PHONY: bench-report bench-report-full all demo test test-allocs test-node test-ruby test-short soak lint bench servers build fuzz redis-up redis-down memcached-up memcached-down

all: lint test

## servers: install redis-server, memcached and PostgreSQL when missing (root)
servers:
	@bash scripts/install-servers.sh

build:
	$(GO) build ./...
	cd kuraotel && $(GO) build ./...

## redis-up: start a redis-server for the README's quick start on 127.0.0.1:$(REDIS_PORT)
## (default 6379; no persistence); redis-down stops it
REDIS_PORT ?= 6379
REDIS_PIDFILE = $(or $(TMPDIR),/tmp)/kura-redis-$(REDIS_PORT).pid
redis-up:
	@command -v redis-server >/dev/null || bash scripts/install-servers.sh
	@if [ -f $(REDIS_PIDFILE) ] && kill -0 $$(cat $(REDIS_PIDFILE)) 2>/dev/null; then \
	  echo "redis-server already runs on 127.0.0.1:$(REDIS_PORT) (make redis-down stops it)"; exit 0; fi; \
	redis-server --bind 127.0.0.1 --port $(REDIS_PORT) --save '' --appendonly no \
	  --daemonize yes --pidfile $(REDIS_PIDFILE) --logfile $(or $(TMPDIR),/tmp)/kura-redis-$(REDIS_PORT).log && \
	for i in $$(seq 50); do redis-cli -p $(REDIS_PORT) ping >/dev/null 2>&1 && break; sleep 0.1; done; \
	redis-cli -p $(REDIS_PORT) ping >/dev/null && echo "redis-server runs on 127.0.0.1:$(REDIS_PORT) (make redis-down stops it)"

redis-down:
	@pid=$$(cat $(REDIS_PIDFILE) 2>/dev/null); \
	if [ -n "$$pid" ] && kill $$pid 2>/dev/null; then \
	  for i in $$(seq 50); do kill -0 $$pid 2>/dev/null || break; sleep 0.1; done; \
	  rm -f $(REDIS_PIDFILE); echo "redis-server on 127.0.0.1:$(REDIS_PORT) stopped"; \
	else echo "no redis-server started by make redis-up on port $(REDIS_PORT)"; rm -f $(REDIS_PIDFILE); fi

## memcached-up: start a memcached for the README's CLI lines on 127.0.0.1:$(MEMCACHED_PORT)
## (default 11211); memcached-down stops it
MEMCACHED_PORT ?= 11211
MEMCACHED_PIDFILE = $(or $(TMPDIR),/tmp)/kura-memcached-$(MEMCACHED_PORT).pid
memcached-up:
	@command -v memcached >/dev/null || bash scripts/install-servers.sh
	@if [ -f $(MEMCACHED_PIDFILE) ] && kill -0 $$(cat $(MEMCACHED_PIDFILE)) 2>/dev/null; then \
	  echo "memcached already runs on 127.0.0.1:$(MEMCACHED_PORT) (make memcached-down stops it)"; exit 0; fi; \
	memcached -l 127.0.0.1 -p $(MEMCACHED_PORT) -U 0 -d -P $(MEMCACHED_PIDFILE) $$([ "$$(id -u)" = 0 ] && echo -u nobody) && \
	for i in $$(seq 50); do bash -c "exec 3<>/dev/tcp/127.0.0.1/$(MEMCACHED_PORT)" 2>/dev/null && break; sleep 0.1; done; \
	bash -c "exec 3<>/dev/tcp/127.0.0.1/$(MEMCACHED_PORT)" 2>/dev/null && echo "memcached runs on 127.0.0.1:$(MEMCACHED_PORT) (make memcached-down stops it)"

memcached-down:
	@pid=$$(cat $(MEMCACHED_PIDFILE) 2>/dev/null); \
	if [ -n "$$pid" ] && kill $$pid 2>/dev/null; then \
	  for i in $$(seq 50); do kill -0 $$pid 2>/dev/null || break; sleep 0.1; done; \
	  rm -f $(MEMCACHED_PIDFILE); echo "memcached on 127.0.0.1:$(MEMCACHED_PORT) stopped"; \
	else echo "no memcached started by make memcached-up on port $(MEMCACHED_PORT)"; rm -f $(MEMCACHED_PIDFILE); fi

## demo: replay the field reports on this machine
demo: servers
	$(GO) run ./cmd/kura demo

## test: install the servers, then run every test (race detector on) against them, the
## kuraotel module's too (its own module, so the OpenTelemetry SDK is no dependency of kura)
test: servers
	KURA_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd kuraotel && KURA_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) test-allocs
	$(MAKE) test-node
	$(MAKE) test-ruby

## test-allocs: the allocation tests again without the race detector, which drops sync.Pool
## items at random and so changes allocation counts (under -race they skip or only log)
ALLOC_TESTS = TestDecodeBytesOwnedAllocs|TestZstdDecodeKeepsBufferCapacity|TestL1HitAllocatesNothing|TestOwnerDoesNotAllocate|TestBudgetHitAllocsAnyCallerContext|TestRingIndexDoesNotAllocate|TestParseHeaderAllocs|TestGetManyAllocs|TestBudgetCostsNothingOnAHit|TestWarmFetchManyAllocatesOnlyItsMap|TestNoAllocsUnsampled
ALLOC_PKGS = . ./codec ./ring ./store/memcache ./store/memcache/meta ./internal/readthrough
test-allocs:
	KURA_REQUIRE_SERVERS=1 $(GO) test -count=1 -run '^($(ALLOC_TESTS))$$' $(ALLOC_PKGS)
	cd kuraotel && KURA_REQUIRE_SERVERS=1 $(GO) test -count=1 -run '^($(ALLOC_TESTS))$$' .

## test-node: the Node package (js/): npm ci from the committed lockfile (skipped when node_modules
## was installed by npm ci from this very lockfile), then the Node test runner on private servers,
## with Go <-> Node checks, and the change stream's per-read history with Node readers (./cdc/)
test-node:
	$(GO) build -o js/.build/nodeinterop ./internal/harness/nodeinterop
	cd js && if cmp -s package-lock.json node_modules/.kura-npm-ci-lock; then npm run build; \
		else npm ci --no-audit --no-fund && cp package-lock.json node_modules/.kura-npm-ci-lock; fi
	cd js && KURA_REQUIRE_SERVERS=1 npm test
	KURA_REQUIRE_SERVERS=1 KURA_CDC_NODE=1 $(GO) test -race -count=1 -run 'NodeReaders' ./cdc/

## test-ruby: the Ruby gem (rb/): its minitest suites on private servers, with Go <-> Ruby <->
## Node checks (the Go helpers built first; js/dist from test-node, built here when missing), and
## the gem built and installed from the checkout into a fresh directory
test-ruby:
	$(GO) build -o rb/.build/rbinterop ./internal/harness/rbinterop
	$(GO) build -o rb/.build/nodeinterop ./internal/harness/nodeinterop
	@test -f js/dist/index.js || (cd js && npm ci --no-audit --no-fund && npm run build)
	cd rb && KURA_REQUIRE_SERVERS=1 KURA_RB_PREBUILT=1 ruby test/run.rb

## soak: the full-size race, fault and soak runs (the results page's full sizes; notebook in docs/benchmarks/)
soak: servers
	@KURA_SOAK=1 bash scripts/install-servers.sh
	KURA_SOAK=1 KURA_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout 90m ./...
	$(MAKE) bench-report-full

test-short:
	$(GO) test -short -count=1 ./...

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l . 2>&1); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd kuraotel && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## bench-report: the results page's headline benchmarks at small sizes (under 10 minutes on 2 quiet
## cores): docs/benchmarks/results.json, docs/benchmarks/charts/*.svg and BENCHMARKS.md's tables.
## ONLY=rings,loadgen reruns those sections and keeps the others; RENDER=1 only redraws from the file
bench-report: servers
	$(GO) run ./internal/harness/benchreport/cmd/benchreport $(if $(ONLY),-only $(ONLY)) $(if $(RENDER),-render)

## bench-report-full: the same benchmarks at full size (three times the rounds and time), to
## docs/benchmarks/results-full.json; the page keeps quoting the small-size run. Part of make soak
bench-report-full: servers
	$(GO) run ./internal/harness/benchreport/cmd/benchreport -full

## bench: every Go benchmark (see BENCHMARKS.md for the recorded runs)
bench: servers
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./...

## fuzz: a short fuzzing pass over every fuzz target
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 20s $$pkg || exit 1; \
	  done; \
	done
