# extenddb — developer targets. See README.md.
SHELL := /bin/bash
GO ?= go
BIN := bin/extenddb

# Version stamping: version, commit and commit date from git (a checkout
# without git, or a tarball, builds as "dev").
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
# Extra `extenddb serve` arguments for make run, e.g.
# make run ARGS="--memory --listen 127.0.0.1:9000".
ARGS ?=
FUZZTIME ?= 5s

.PHONY: run build test test-go test-wire test-scripts test-all test-cassandra test-wire-cassandra lint bench bench-scale clean fuzz hooks

## run: build bin/extenddb, then exec it (embedded SQLite at
## 127.0.0.1:8000). The shell execs the server, so Ctrl-C and SIGTERM reach
## it directly and it shuts down cleanly.
run: build
	exec $(BIN) serve $(ARGS)

## build: bin/extenddb stamped with version, commit and date.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/extenddb

## test: everything that needs only this repository (SQLite, fs store,
## in-process S3, script tests, wire suite on two workers against servers
## it starts itself), Go tests with -short (the crash tests and extra
## configurations run in test-all); lint runs beside the Go tests. Ends
## with one summary line per layer, with its time, and a total
## (docs/testing.md).
test:
	FUZZTIME=$(FUZZTIME) scripts/test.sh

test-go:
	scripts/go-test.sh

## fuzz: the denial-of-service fuzz targets (expression parsing stays
## linear), FUZZTIME each; test-all runs them longer.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

test-wire: build
	EXTENDDB_BIN=$(abspath $(BIN)) tests/wire/run.sh -q

test-scripts: build
	@for t in tests/scripts/*.sh; do $$t || exit 1; done

## test-all: adds the server-backed layers (moto S3, ...); scripts/ install
## and start each server.
test-all:
	scripts/test-all.sh

## test-cassandra: every layer on a real Apache Cassandra 5.0
## (scripts/cassandra.sh starts a private node, jars cached in
## $$EXTENDDB_CACHE): backendtest and the backend's tests, the served
## backend, the wire suite with two servers on one keyspace. make test-all
## runs it too (EXTENDDB_TEST_ALL_CASSANDRA=0 leaves it out).
test-cassandra: build
	scripts/test-cassandra.sh

## test-wire-cassandra: only the wire suite against
## `extenddb serve --backend cassandra`.
test-wire-cassandra: build
	EXTENDDB_BIN=$(abspath $(BIN)) scripts/wire-cassandra.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.venv/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	"$$(scripts/staticcheck.sh)" ./...

## hooks: install the commit-msg check (subject <= 72 characters, a blank
## line before the body) into this clone's .git/hooks.
hooks:
	@hooks=$$(git rev-parse --git-path hooks) && mkdir -p "$$hooks" && \
	  ln -sf "$$(pwd)/scripts/commit-msg.sh" "$$hooks/commit-msg" && echo "installed $$hooks/commit-msg"

bench: build
	scripts/bench-compare.sh

bench-scale: build
	EXTENDDB_BIN=bin/extenddb scripts/bench-scale.sh

clean:
	rm -rf bin .venv
