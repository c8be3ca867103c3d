# extenddb — developer targets. See README.md.
SHELL := /bin/bash
GO ?= go
BIN := bin/extenddb

.PHONY: run build test test-go test-wire test-all lint bench clean fuzz

FUZZTIME ?= 5s

run: ## run the server on embedded SQLite at 127.0.0.1:8000
	$(GO) run ./cmd/extenddb serve

build:
	$(GO) build -o $(BIN) ./cmd/extenddb

## test: everything that needs only this repository (SQLite, fs store,
## in-process S3, wire suite against a server it starts itself).
test: lint test-go fuzz test-wire

test-go:
	scripts/go-test.sh

## fuzz: the denial-of-service fuzz targets (expression parsing stays
## linear), FUZZTIME each; test-all runs them longer.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

test-wire: build
	EXTENDDB_BIN=$(abspath $(BIN)) tests/wire/run.sh -q

## test-all: adds the server-backed layers (moto S3, ...); scripts/ install
## and start each server.
test-all:
	scripts/test-all.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.venv/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: build
	scripts/bench-compare.sh

clean:
	rm -rf bin .venv
