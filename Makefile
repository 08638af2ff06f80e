# Caddy Gateway. The two commands that matter:
#   make run   build bin/caddy and run the gateway with ./Caddyfile (SQLite under ./data)
#   make test  all tests
GO        ?= go
BIN       := bin/caddy
export CGO_ENABLED := 1

.PHONY: all build run test test-deps test-short vet bench bench-router bench-mutation bench-proxy clean

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

# What the tests need beyond Go: PostgreSQL's server binaries (Debian's
# package; the test starts its own throw-away cluster on 127.0.0.1).
test-deps:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		echo "installing postgresql (Debian) for the PostgreSQL store test"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null || \
		echo "could not install postgresql: the PostgreSQL store test will be skipped (outside CI)"; }

test-short:
	$(GO) test -count=1 -short ./...

# Benchmarks (see bench/README.md). bench-proxy installs wrk from Debian's
# packages when missing and compares the gateway with plain Caddy.
bench: bench-router bench-mutation bench-proxy

bench-router:
	$(GO) test -run '^$$' -bench Match -benchmem ./modules/router/

bench-mutation:
	$(GO) test -run '^$$' -bench MutationToLive -benchtime 20x ./adminext/tests/

bench-proxy: build
	bash bench/proxy.sh

clean:
	rm -rf bin
