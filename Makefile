# Caddy Gateway. The two commands that matter:
#   make run   build bin/caddy and run the gateway with ./Caddyfile (SQLite under ./data)
#   make test  all tests
GO        ?= go
BIN       := bin/caddy
export CGO_ENABLED := 1

.PHONY: all build run test test-deps test-short test-race fuzz-short vet docs bench bench-router bench-mutation bench-memory bench-proxy bench-scale clean wasm-fixtures

all: build

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/caddy

run: build
	mkdir -p data
	./$(BIN) run --config Caddyfile --adapter caddyfile

vet:
	$(GO) vet ./...

# Go tests of every package (unit, integration against real upstreams on
# 127.0.0.1, the in-process gateway, the built binary, a PostgreSQL store).
test: test-deps vet build
	$(GO) test -count=1 -timeout 20m ./...
	$(MAKE) test-race
	$(MAKE) fuzz-short

# The race detector over the packages where goroutines meet a config
# reload: the router and service proxy, stream routes, health checks,
# rate-limit counters, cluster sync, and the certificate events Caddy's tls
# app emits from certmagic's goroutines (a race there was only seen with
# -race; the whole module under -race takes over 15 minutes on 2 cores).
RACE_PKGS = ./app/certs ./app/tests/acmedns ./app/cluster ./modules/router/... \
	./modules/gwproxy ./internal/streams/... ./internal/health/... ./modules/plugins/ratelimit/...
test-race:
	$(GO) test -race -count=1 -timeout 10m $(RACE_PKGS)

# A short native fuzzing run of every fuzz target of the module, found by
# name (router, placeholders, WAT assembler, admin API input …; seeds are
# under each package's testdata/fuzz and run as plain tests too): each
# target for FUZZTIME, a number of inputs (a duration shorter than a
# worker's setup, such as starting a gateway, fails with "context deadline
# exceeded"). Longer: make fuzz-short FUZZTIME=10m.
FUZZTIME ?= 500x
fuzz-short:
	@set -e; for f in $$(grep -rlE '^func Fuzz[A-Za-z0-9_]+\(' --include='*_test.go' . | sort); do \
		for t in $$(grep -hoE '^func Fuzz[A-Za-z0-9_]+' $$f | cut -c6-); do \
			echo "fuzz ./$$(dirname $$f) $$t"; \
			out=$$($(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f) 2>&1) || \
				{ echo "$$out" | grep -v '^{' | tail -40; exit 1; }; \
			echo "$$out" | grep -v '^{' | tail -1; \
		done; \
	done

# What the tests need beyond Go, from Debian's packages: PostgreSQL's server
# binaries (the test starts its own throw-away cluster on 127.0.0.1),
# redis-server (likewise: the rate limits shared on Redis), Chromium (the
# dashboard's browser test), wabt (wat2wasm: the WAT assembler's
# differential test) and prometheus (promtool: the /metrics exposition is
# checked with `promtool check metrics`). Outside CI a missing one only
# skips its test.
TEST_PACKAGES := $(if $(wildcard /usr/lib/postgresql/*/bin/initdb),,postgresql) $(if $(wildcard /usr/bin/redis-server),,redis-server) $(if $(wildcard /usr/bin/chromium),,chromium) $(if $(wildcard /usr/bin/wat2wasm),,wabt) $(if $(wildcard /usr/bin/promtool),,prometheus)
test-deps:
	@if [ -n "$(strip $(TEST_PACKAGES))" ]; then \
		echo "installing $(strip $(TEST_PACKAGES)) (Debian) for the tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(TEST_PACKAGES)) >/dev/null || \
		echo "could not install $(strip $(TEST_PACKAGES)): their tests are skipped (and fail on CI)"; \
	fi

# Regenerates docs/plugins.md and docs/endpoints.md from the declarations (a test in
# docs/gen fails while the committed file is stale).
docs:
	$(GO) run ./docs/gen -dir docs

test-short:
	$(GO) test -count=1 -short ./...

# Benchmarks (see bench/README.md). bench-proxy installs wrk from Debian's
# packages when missing and compares the gateway with plain Caddy.
bench: bench-router bench-mutation bench-memory bench-proxy bench-scale

bench-router:
	$(GO) test -run '^$$' -bench 'Match|TableHeap' -benchmem ./modules/router/

bench-mutation:
	$(GO) test -run '^$$' -bench MutationToLive -benchtime 20x ./app/tests/

# Heap growth across 2,000 configuration changes (goal: under 20 MB).
bench-memory:
	$(GO) test -run '^$$' -bench HeapAcrossChanges -benchtime 2000x ./app/tests/

# The scale table (bench/README.md) on the built binary: import time, change p50 per
# kind and RSS at 1, 10,000 and 50,000 routes.
bench-scale: build
	bash bench/scale.sh

bench-proxy: build
	bash bench/proxy.sh

# Rebuilds the AssemblyScript proxy-wasm test fixture (needs Node.js and the
# npm registry; not part of `make test`, which uses the committed .wasm).
AS_FILTER := app/tests/testdata/wasm/as-filter
wasm-fixtures:
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r $(AS_FILTER)/package.json $(AS_FILTER)/package-lock.json $(AS_FILTER)/assembly "$$tmp"/; \
	(cd "$$tmp" && npm ci --no-audit --no-fund && npm run build); \
	cp "$$tmp"/as-filter.wasm $(AS_FILTER)/as-filter.wasm

clean:
	rm -rf bin
