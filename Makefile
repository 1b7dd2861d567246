# verifierd — the targets a newcomer guesses. Every target installs what it
# needs (scripts/*.sh are idempotent), so `make run` and `make test` work on
# a fresh machine with Go at /usr/local/go.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
GO ?= go
BIN := .cache/bin
PLUGINS := .cache/plugins

# The repository holds five Go modules: the daemon's (the root); the SDK
# adapters are built against (sdk/, github.com/verifierd/verifierd/sdk);
# and what a runtime client takes without the daemon's dependencies: the
# Go client (client/), the public API's generated code (proto/, the
# package proto/verifierd/verifier/v1) and the receipt checker (receipt/),
# each github.com/verifierd/verifierd/<folder>. `go test ./...` in one never
# enters another, so test, vet and golangci-lint run in each of MODULES.
MODULES := . sdk proto receipt client

# First-party binaries: the daemon, the CLI, the built-in adapters (found by
# the daemon beside its own binary) and the demo's system of record. Every
# folder under cmd/plugins is a built-in adapter, verifier-adapter-<kind>;
# internal/builtin is the table of them, and its test keeps the two the same.
BINARIES := \
	$(BIN)/verifierd=./cmd/verifierd \
	$(BIN)/verifyctl=./cmd/verifyctl \
	$(foreach d,$(wildcard cmd/plugins/*),$(BIN)/verifier-adapter-$(notdir $(d))=./$(d)) \
	$(BIN)/clinic=./examples/demo/clinic

.PHONY: release release-test release-images release-snapshot bench-check bench-baseline check-api check-modules update-api openapi-breaking
.PHONY: all build build-deps deps run demo demo-writeset test test-thirdparty python-test node-test lint vet fmt-check check-sdk check-sdk-api check-structure generate check-generated buf-lint buf-breaking golangci-lint bench soak fuzz image image-test clean

all: build

# build needs Tesseract's library headers for the onscreen plugin (cgo);
# `scripts/deps.sh build` installs only those, when missing.
build: build-deps
	@mkdir -p $(BIN) $(PLUGINS)
	@for b in $(BINARIES); do echo "go build $${b#*=}"; $(GO) build -o $${b%%=*} $${b#*=} || exit 1; done
	$(GO) build -o $(PLUGINS)/verifier-adapter-csv-ledger ./examples/csv-ledger

# build-deps: what compiling the whole module needs (vet and the linter
# compile it too).
build-deps:
	@bash scripts/deps.sh build

# run: the daemon with the demo's daemon config: the registered deployment
# `clinic` (a small SQLite clinic) and workflow `triage`. Try it from another
# shell with the commands in README.md.
run: build
	@mkdir -p .cache/demo
	$(BIN)/clinic init .cache/demo/clinic.db
	$(BIN)/verifierd --listen 127.0.0.1:7443 --data-dir .cache/demo/data \
		--plugin-dir $(PLUGINS) --config examples/demo/daemon.yaml

demo: build
	bash scripts/demo.sh

# demo-writeset: the walk-through with changes: on a PostgreSQL server named
# by DEMO_PG_* (scripts/demo-writeset.sh).
demo-writeset: build
	bash scripts/demo-writeset.sh

# deps: the Debian packages of the real servers the tests start on loopback
# (PostgreSQL, MariaDB, OpenSSH, Chromium) and Tesseract; installs only what
# is missing.
deps:
	bash scripts/deps.sh

# test: every module's tests. The 45-minute bound per package is a backstop
# for a hang, not a speed goal: under heavy load (load average 30-48 on two
# cores) the largest adapter packages took 25-30 minutes.
test: deps vet fmt-check check-sdk
	@for m in $(MODULES); do echo "go test ($$m)"; (cd $$m && $(GO) test -count=1 -timeout 45m ./...) || exit 1; done
	$(MAKE) python-test
	$(MAKE) node-test

# test-thirdparty: the e2e suite against a real third-party application,
# Directus (REST and GraphQL over SQLite; docs/thirdparty-tests.md).
# scripts/thirdparty.sh installs the pinned version under .cache/thirdparty
# once (later runs find it there); VERIFIERD_THIRDPARTY=require makes a
# missing install fail the tests instead of skipping them.
test-thirdparty: build-deps
	bash scripts/thirdparty.sh
	VERIFIERD_THIRDPARTY=require $(GO) test -count=1 -timeout 20m -run '^TestDirectus' ./e2e

# python-test: the Python client (clients/python) against the real daemon,
# which the tests start from the binaries `make build` leaves in $(BIN).
# Standard library only: python3 -m unittest, ending in OK or a non-zero exit.
python-test: build
	VERIFIERD_BIN=$(abspath $(BIN)) python3 -m unittest discover -s clients/python/tests -v

# node-test: the TypeScript client (clients/node) and the Playwright
# example (examples/playwright) against the real daemon, with Node.js's
# own runner (node --test); npm ci installs the pinned dev dependencies
# (typescript, @types/node) and playwright-core, which drives Debian's
# Chromium (no browser download). npm pack checks the package builds.
node-test: build
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error && npm run build && \
		VERIFIERD_BIN=$(abspath $(BIN)) node --test test/ && \
		npm pack --pack-destination "$$(mktemp -d)" --loglevel=error >/dev/null
	cd examples/playwright && npm ci --no-audit --no-fund --loglevel=error && \
		VERIFIERD_BIN=$(abspath $(BIN)) node --test test/

vet: build-deps
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt wants to change:"; echo "$$out"; exit 1; fi

# check-sdk: the SDK module a customer requires must not depend on the
# daemon: no package of the root module among its packages' (and tests')
# dependencies, and no root module in its module graph. The other way round
# is the design: the daemon requires the SDK (replace => ./sdk), and the pure
# judge imports the SDK's grammar leaves, sdk/param, sdk/unstable/jsonnum,
# sdk/unstable/jsondepth and sdk/unstable/strict, which must therefore import only the standard library
# (and sdk/internal/typename, a leaf of their own that imports nothing else).
SDK_LEAVES := ./param ./unstable/jsonnum ./unstable/jsondepth ./unstable/strict ./refusal
check-sdk:
	@cd sdk; \
	bad=$$($(GO) list -deps -test ./... | grep -E '^github.com/verifierd/verifierd(/|$$)' | grep -vE '^github.com/verifierd/verifierd/sdk([/._ ]|$$)' || true); \
	if [ -n "$$bad" ]; then echo "check-sdk: the SDK imports daemon-side packages:"; echo "$$bad"; exit 1; fi; \
	bad=$$($(GO) list -m all | grep -E '^github.com/verifierd/verifierd( |$$)' || true); \
	if [ -n "$$bad" ]; then echo "check-sdk: the SDK's module graph holds the daemon's module:"; echo "$$bad"; exit 1; fi; \
	bad=$$($(GO) list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' $(SDK_LEAVES) | grep -vxE 'github.com/verifierd/verifierd/sdk/(param|unstable/jsonnum|unstable/jsondepth|unstable/strict|refusal|internal/typename)' || true); \
	if [ -n "$$bad" ]; then echo "check-sdk: the SDK leaves the judge imports (sdk/param, sdk/unstable/jsonnum, sdk/unstable/jsondepth, sdk/unstable/strict, sdk/refusal) must use only the standard library, not:"; echo "$$bad"; exit 1; fi; \
	echo "check-sdk: the SDK module holds nothing of the daemon; its leaves import only the standard library"

# check-modules: the modules a runtime client takes (client, proto,
# receipt) hold nothing of the daemon's: neither the root module nor the
# SDK in their module graphs; receipt imports only the standard library.
# (make release-test checks the same of a consumer built from dist/.)
CLIENT_MODULES := client proto receipt
check-modules:
	@for m in $(CLIENT_MODULES); do \
		bad=$$(cd $$m && $(GO) list -m all | grep -E '^github.com/verifierd/verifierd(/sdk)?( |$$)' || true); \
		if [ -n "$$bad" ]; then echo "check-modules: $$m's module graph holds the daemon's modules:"; echo "$$bad"; exit 1; fi; \
	done
	@bad=$$(cd receipt && $(GO) list -deps -test -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... | grep -vE '^github.com/verifierd/verifierd/receipt([ .]|$$)' || true); \
	if [ -n "$$bad" ]; then echo "check-modules: receipt must import only the standard library, not:"; echo "$$bad"; exit 1; fi
	@echo "check-modules: client, proto and receipt hold nothing of the daemon's; receipt imports only the standard library"

# check-api: the exported API of every public package (the SDK module,
# client, receipt, proto's generated package, judge) against the snapshots committed under api/; a
# change fails unless the snapshot is updated in the same commit with a
# CHANGES.md entry (sdk/CHANGES.md for api/sdk.txt). update-api rewrites
# the snapshots. See scripts/check-api.sh and docs/releasing.md.
check-api:
	bash scripts/check-api.sh check

update-api:
	bash scripts/check-api.sh update

# check-structure: the structure limits of issue #36: session.Manager has at
# most 35 methods, no non-test, non-generated Go file over 800 lines, no
# function over 100 lines, in both modules (scripts/structure.sh, counting
# with go/ast in scripts/structure/main.go). Prints the numbers; fails
# naming each offender.
check-structure:
	GO=$(GO) bash scripts/structure.sh

# check-sdk-api: what apidiff calls incompatible in the SDK since a git ref
# (SDK_API_AGAINST=<ref>, else the newest sdk/v* tag; it passes, saying so,
# when there is none). Tags do not travel with a branch, so make lint
# checks the committed snapshots instead (check-api); this stays for
# comparing with an older commit by hand. See scripts/check-sdk-api.sh.
check-sdk-api:
	bash scripts/check-sdk-api.sh

generate:
	bash scripts/generate.sh

check-generated:
	bash scripts/check-generated.sh

buf-lint:
	bash scripts/tools.sh
	$(BIN)/buf lint
	$(BIN)/buf format -d --exit-code

# buf-breaking: the protos must stay wire-compatible (FILE rules, buf.yaml)
# with the last release, whose image is committed as proto/release.binpb
# (make release-snapshot writes it, with api/openapi.json, when a release
# is cut). A git tag would not travel with the branch; a committed file
# does. BREAKING_AGAINST (a git ref) compares with that commit instead.
#
# An intentional break between releases (a new minor version while v0,
# a new major from v1) is acknowledged in history, never by switching the
# check off: a commit since proto/release.binpb last changed whose message
# carries the trailer
#   Proto-Break-Acknowledged: <what broke and why>
# becomes the baseline, so that commit's break passes and every later
# change is still checked against it; list the break in CHANGES.md. List
# the acknowledged breaks with
#   git log --grep '^Proto-Break-Acknowledged:'
RELEASE_IMAGE := proto/release.binpb
BREAKING_BASE = $$(git log -1 --format=%H -- $(RELEASE_IMAGE))
BREAKING_AGAINST ?= $$(git log -1 --format=%H --grep='^Proto-Break-Acknowledged:' $(BREAKING_BASE)..HEAD)
buf-breaking:
	bash scripts/tools.sh
	@against="$(BREAKING_AGAINST)"; \
	if [ -n "$$against" ]; then echo "buf breaking against $$against"; \
		$(BIN)/buf breaking --against "$$(git rev-parse --path-format=absolute --git-common-dir)#ref=$$against"; \
	else echo "buf breaking against $(RELEASE_IMAGE)"; $(BIN)/buf breaking --against $(RELEASE_IMAGE); fi

# openapi-breaking: the HTTP/JSON API's OpenAPI document must not break a
# client of the last release's, committed as api/openapi.json (routes,
# parameters, definitions and their properties; tools/openapicheck).
OPENAPI_DOC := proto/verifierd/verifier/v1/verifier.swagger.json
openapi-breaking:
	@mkdir -p $(BIN)
	cd tools && $(GO) build -o $(abspath $(BIN))/openapicheck ./openapicheck
	@$(BIN)/openapicheck api/openapi.json $(OPENAPI_DOC) || { echo "openapi-breaking: the OpenAPI document breaks clients of the last release (above); keep the old routes and fields, or make the break a new minor version and run make release-snapshot"; exit 1; }
	@echo "openapi-breaking: compatible with api/openapi.json"

# release-snapshot: when cutting a release, the baselines the next changes
# are checked against: proto/release.binpb (buf-breaking) and
# api/openapi.json (openapi-breaking). Commit them with the release.
release-snapshot:
	bash scripts/tools.sh
	$(BIN)/buf build --exclude-source-info -o $(RELEASE_IMAGE)
	cp $(OPENAPI_DOC) api/openapi.json

golangci-lint: build-deps
	bash scripts/tools.sh
	@for m in $(MODULES); do echo "golangci-lint ($$m)"; (cd $$m && $(abspath $(BIN))/golangci-lint run ./...) || exit 1; done

lint: vet fmt-check check-sdk check-modules check-api check-structure golangci-lint buf-lint buf-breaking openapi-breaking

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./judge/

# bench-check: this tree against the commit bench/baseline.txt names, as
# interleaved pairs on this machine; fails on a Begin+Verify p50 or judge
# ns/record more than 20% worse with p < 0.05 (scripts/bench-check.sh;
# BENCH_PAIRS, default 6; BENCH_AGAINST=<ref>). make release runs it; CI
# does not. bench-baseline writes bench/baseline.txt when cutting a release.
bench-check: build-deps
	bash scripts/bench-check.sh check

bench-baseline: build-deps
	bash scripts/bench-check.sh baseline

# soak: 50 clients for 60 s of Begin/Verify through the daemon binary and the
# sql plugin, with hostile requests alongside; checks the refusal codes and
# the daemon's memory (figures in BENCHMARKS.md). Not part of `make test`.
soak:
	VERIFIERD_SOAK=1 $(GO) test ./e2e -run Soak -v -count=1 -timeout 10m

fuzz:
	$(GO) test ./judge -run '^$$' -fuzz FuzzLoadEffects -fuzztime 30s
	$(GO) test ./sdk/unstable/strict -run '^$$' -fuzz FuzzDecodeJSON -fuzztime 30s
	$(GO) test ./judge -run '^$$' -fuzz FuzzJudge -fuzztime 30s
	$(GO) test ./internal/config -run '^$$' -fuzz FuzzParseDeployment -fuzztime 30s
	$(GO) test ./internal/session -run '^$$' -fuzz FuzzBeginRequest -fuzztime 30s
	$(GO) test ./adapters/sql -run '^$$' -fuzz FuzzCheckReadOnly -fuzztime 30s
	$(GO) test ./adapters/graphql -run '^$$' -fuzz FuzzParseReadQuery -fuzztime 30s
	$(GO) test ./adapters/fhir -run '^$$' -fuzz FuzzFlatten -fuzztime 30s
	$(GO) test ./adapters/email -run '^$$' -fuzz FuzzReadMessage -fuzztime 30s
	cd sdk && $(GO) test ./param -run '^$$' -fuzz FuzzExpandURL -fuzztime 30s
	cd sdk && $(GO) test ./param -run '^$$' -fuzz FuzzFileName -fuzztime 30s
	cd sdk && $(GO) test ./param -run '^$$' -fuzz FuzzParseValue -fuzztime 30s
	cd sdk && $(GO) test ./param -run '^$$' -fuzz FuzzTemplateInURL -fuzztime 30s
	cd sdk && $(GO) test ./unstable/jsonnum -run '^$$' -fuzz FuzzValid -fuzztime 30s
	$(GO) test ./internal/reward -run '^$$' -fuzz FuzzParseDescriptor -fuzztime 30s

# image: the two OCI images of verifierd (docs/container-image.md),
# localhost/verifierd:<version> with every first-party adapter, Chromium and
# Tesseract, and localhost/verifierd:<version>-slim without ui_readback and
# onscreen; offline, from Debian's packages (mmdebstrap, the root
# filesystems cached under .cache/image) and this checkout's Go build.
# scripts/image-deps.sh installs podman, runc, mmdebstrap and kubectl.
image: build-deps
	bash scripts/image.sh

# image-test: renders deploy/kubernetes with kubectl kustomize and decodes
# it strictly into the Kubernetes API types; then, where podman can run
# containers, builds the images and runs two replicas of them on one
# PostgreSQL store on loopback (kill one, verify on the other, receipts,
# metrics, health, ui_readback and onscreen inside the full image). Where
# podman cannot, the container part is skipped, saying why, unless
# VERIFIERD_IMAGE_TEST=require.
image-test: build-deps
	bash scripts/image-test.sh

# release: `make release VERSION=vX.Y.Z` writes dist/ (docs/releasing.md):
# dist/goproxy, a file-system Go module proxy with every public module at
# VERSION (sdk, proto, receipt, client and the root); dist/bin, the daemon, verifyctl and every first-party
# adapter with VERSION stamped; dist/SHA256SUMS. bench-check runs first
# (SKIP_BENCH=1 skips it). The images are tagged by release-images.
DIST := dist
RELEASE_BINARIES := $(filter-out $(BIN)/clinic=%,$(BINARIES))
release: build-deps
	@[ -n "$(VERSION)" ] || { echo "release: give the version: make release VERSION=v0.4.0"; exit 1; }
	@if [ "$(SKIP_BENCH)" != 1 ]; then $(MAKE) bench-check; else echo "release: SKIP_BENCH=1, bench-check not run"; fi
	DIST=$(abspath $(DIST)) bash scripts/release.sh $(VERSION) $(RELEASE_BINARIES)

# release-test: a customer's build outside the repository against dist/
# (run `make release` first): an adapter (sdk/examples/jsonl copied out)
# that passes adaptertest, and a client program requiring only the client
# module (its module graph holds nothing of the daemon's) that runs
# Begin/Verify against dist/bin/verifierd and checks the receipt offline;
# no replace.
release-test: build-deps
	DIST=$(abspath $(DIST)) bash scripts/release-test.sh

# release-images: the two images (make image) tagged VERSION. Slow (podman);
# CI does not run it (image-test builds the images already).
release-images: build-deps
	@[ -n "$(VERSION)" ] || { echo "release-images: give the version: make release-images VERSION=v0.4.0"; exit 1; }
	VERSION=$(VERSION) bash scripts/image.sh

clean:
	rm -rf .cache $(DIST)
