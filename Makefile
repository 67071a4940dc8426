# kura: `make demo` and `make test` do everything on a fresh Debian machine.
GO        ?= go
STATICCHECK_VERSION ?= v0.8.2
TEST_TIMEOUT ?= 25m
BENCH     ?= .
BENCHTIME ?= 1s

.PHONY: all demo test test-node test-short soak lint bench servers build fuzz

all: lint test

## servers: install redis-server, memcached and PostgreSQL when missing (root)
servers:
	@bash scripts/install-servers.sh

build:
	$(GO) build ./...

## demo: replay the field reports on this machine
demo: servers
	$(GO) run ./cmd/kura demo

## test: install the servers, then run every test (race detector on) against them
test: servers
	KURA_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) test-node

## test-node: the Node package (js/): npm ci, then the Node test runner on private servers, with Go <-> Node checks
test-node:
	$(GO) build -o js/.build/nodeinterop ./internal/nodeinterop
	cd js && npm ci --no-audit --no-fund && KURA_REQUIRE_SERVERS=1 npm test

## soak: the full-size race, fault and soak runs (results in BENCHMARKS.md)
soak: servers
	KURA_SOAK=1 KURA_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout 90m ./...

test-short:
	$(GO) test -short -count=1 ./...

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l . 2>&1); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

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
