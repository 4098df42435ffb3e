# lockd: two commands do all the set-up on a fresh machine with Go installed:
#   make run    build and start a single node on 127.0.0.1:7070
#               (make run LISTEN=127.0.0.1:7171 for another port)
#   make test   run every test (race detector on)

GO      ?= go
# Every build, test and release is made with this Go release, which has
# the standard library's security fixes that the oldest Go able to build
# lockd (go.mod's go line) lacks: the go command fetches it through the
# Go module proxy the first time (about 76 MB). Exported, so that the
# binaries the tests build and the scripts run by make use it too. Give
# another on the command line (make GOTOOLCHAIN=go1.27.4) to move on.
GOTOOLCHAIN := go1.27.3
export GOTOOLCHAIN
BIN     ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Build tags of every build, test and scenario binary (they trim what
# each lockctl run does before its own work):
#   urfave_cli_no_docs  leaves out urfave/cli's man-page and Markdown
#                       generator, which neither command uses, and the
#                       Markdown parser it links (its package init ran on
#                       every start);
#   netgo, osusergo     the pure-Go DNS resolver and user lookup, so no
#                       package needs cgo and the binaries are static: no
#                       dynamic loader and libc to start (DNS still reads
#                       /etc/hosts and /etc/resolv.conf; a user is looked
#                       up in /etc/passwd, and only when $USER is unset).
# A plain go build or go install works without them, starting slower.
TAGS    ?= urfave_cli_no_docs,netgo,osusergo
# The tests build with the same tags as the binaries. (The bugs the
# simulator plants and the crashes the cluster's tests play are mutations
# of the sources, compiled by the tests themselves: no tag, no hook.)
TEST_TAGS = $(TAGS)

# Where make install puts things: $(DESTDIR)$(PREFIX)/bin and the shell
# completion directories under $(DESTDIR)$(PREFIX)/share.
PREFIX  ?= /usr/local
DESTDIR ?=

.PHONY: all build run install uninstall test test-typescript test-rules test-tools vet bench bench-e2e bench-mem fuzz simulate completions dist clean

all: build

build:
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/lockd ./cmd/lockctl

# make run LISTEN=HOST:PORT (or a port alone) starts the node there
# instead of 127.0.0.1:7070, as lockd --listen; so does LOCKD_LISTEN in
# the environment, which lockd reads itself. lockctl then needs
# LOCKD_ADDR (or --addr) set to it, and the hint says so, a port alone
# written as the 127.0.0.1:PORT it means.
LISTEN  ?=
RUN_LISTEN = $(strip $(or $(LISTEN),$(LOCKD_LISTEN)))
RUN_ADDR   = $(if $(RUN_LISTEN),$(if $(findstring :,$(RUN_LISTEN)),,127.0.0.1:)$(RUN_LISTEN))

run: build
	@echo "make run: lockd on $(or $(RUN_ADDR),127.0.0.1:7070); in another terminal: $(if $(RUN_ADDR),LOCKD_ADDR=$(RUN_ADDR) )./$(BIN)/lockctl status"
	@./$(BIN)/lockd $(if $(LISTEN),--listen $(LISTEN)) || { rc=$$?; echo "make run: lockd exited $$rc; if the port is taken, pick a free one: make run LISTEN=127.0.0.1:7171" >&2; exit $$rc; }

# install copies lockd and lockctl to $(PREFIX)/bin (sudo for /usr/local,
# or PREFIX=$$HOME/.local) and their completions where bash, zsh and fish
# look for them.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN)/lockd $(BIN)/lockctl $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 0644 completions/lockd.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/lockd
	install -m 0644 completions/lockctl.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/lockctl
	install -m 0644 completions/_lockd completions/_lockctl $(DESTDIR)$(PREFIX)/share/zsh/site-functions/
	install -m 0644 completions/lockd.fish completions/lockctl.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/lockd $(DESTDIR)$(PREFIX)/bin/lockctl
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/lockd $(DESTDIR)$(PREFIX)/share/bash-completion/completions/lockctl
	rm -f $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_lockd $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_lockctl
	rm -f $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/lockd.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/lockctl.fish

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed on:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

# CONFORMANCE_CLIENTS are the official clients the conformance suite
# (clients/conformance) must run under make test: a driver missing among
# them fails it (clients/README.md says how each is built).
CONFORMANCE_CLIENTS ?= go,python,python-asyncio,typescript

# vet checks the plain build (what go install makes), test the tagged one
# (what make build ships).
test: test-tools vet test-typescript test-rules
	LOCKD_CONFORMANCE_CLIENTS=$(CONFORMANCE_CLIENTS) $(GO) test -tags "$(TEST_TAGS)" -race -count=1 -timeout 8m ./...
	$(GO) test -tags "$(TEST_TAGS)" -count=1 -timeout 5m -run 'TestSimulate$$|TestPlantedBugsAreCaught' ./cluster/core

# test-tools installs, once, the programs the tests drive for real:
# Debian's prometheus (the server and promtool) and chromium (the drill
# report's browser test). scripts/need.sh finds them on PATH, or installs
# them with apt-get (as root, or with sudo -n), or fails saying what to
# install: a test that needs one fails without it, it never skips.
TEST_TOOLS ?= promtool prometheus chromium
test-tools:
	./scripts/need.sh $(TEST_TOOLS)

# test-rules checks the Prometheus alert rules (deploy/prometheus) and
# runs their unit tests. The end-to-end test on a real Prometheus and a
# real cluster is deploy/prometheus_test.go, under go test.
test-rules:
	./scripts/need.sh promtool
	promtool check rules deploy/prometheus/lockd.rules.yml
	cd deploy/prometheus && promtool test rules lockd.rules.test.yml

# dist makes the release files in DIST: lockd and lockctl for linux
# amd64 and arm64 as archives (with completions, the systemd unit, the
# alert rules and the dashboard), the Python client's wheel and sdist,
# the TypeScript client's npm tarball, and SHA256SUMS. VERSION is the
# tag (git describe); scripts/dist.sh says what each file holds.
# DIST_ARCHES picks the archives' architectures (the test of make dist
# makes the amd64 one alone: each other is a cold cross-build).
DIST ?= dist
DIST_ARCHES ?= amd64 arm64
dist:
	VERSION="$(VERSION)" DIST="$(DIST)" GO="$(GO)" TAGS="$(TAGS)" PYTHON="$(PYTHON)" ARCHES="$(DIST_ARCHES)" ./scripts/dist.sh

# test-typescript builds the TypeScript client (clients/typescript) from
# its package-lock.json, runs its own tests, and leaves its conformance
# driver built (dist/conformance/driver.js) for the suite that make test
# runs next.
test-typescript:
	cd clients/typescript && npm ci && npm run build && npm test

# conformance-table runs every conformance case on CONFORMANCE_CLIENTS and
# writes the table of cases and results into clients/README.md.
.PHONY: conformance-table
conformance-table: test-typescript
	LOCKD_CONFORMANCE_CLIENTS=$(CONFORMANCE_CLIENTS) $(GO) test -tags "$(TAGS)" -count=1 -run 'TestConformance$$' ./clients/conformance -update-table

# simulate runs the deterministic cluster simulator on SEEDS seeds from
# FIRST, on every core, and prints the failing seeds (each replays with
# LOCKD_SIM_FIRST=SEED LOCKD_SIM_SEEDS=1).
SEEDS ?= 100000
FIRST ?= 1
simulate:
	LOCKD_SIM_SEEDS=$(SEEDS) LOCKD_SIM_FIRST=$(FIRST) $(GO) test -tags "$(TEST_TAGS)" -count=1 -timeout 0 -run 'TestSimulate$$' -v ./cluster/core

# test-python runs the Python client's unit tests (standard library only,
# scripted nodes in-process, a few seconds). PYTHON picks the interpreter.
PYTHON ?= python3
.PHONY: test-python
test-python:
	cd clients/python && $(PYTHON) -m unittest discover -s tests -t .

test: test-python typecheck-python

# typecheck-python type-checks the Python client with pyright, a dev tool
# installed from clients/python/typecheck/package-lock.json (npm ci; no
# PyPI needed): every public symbol of the package has a known type, and
# the examples and typecheck/api_types.py check in strict mode with no
# Any or Unknown from the client (clients/python/typecheck/check.py).
.PHONY: typecheck-python
typecheck-python:
	cd clients/python/typecheck && npm ci --no-audit --no-fund && $(PYTHON) check.py

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./engine ./proto ./proto/client
	$(GO) test -run '^$$' -bench 'Apply|Handoff|NodeCycle' -benchmem ./cluster

# bench-compare builds lockd from BASE (default: the previous commit, or
# HEAD when the tree has uncommitted changes) and from the working tree,
# and runs loadgen's side-by-side.sh on both, with Redis if installed:
# cycles/s and server CPU per cycle, old vs new, and their ratios.
# loadgen lives outside the repository: LOADGEN=DIR names its directory
# (default ../shared/loadgen). REPS and DURATION pass through.
.PHONY: bench-compare
BASE    ?=
LOADGEN ?=
bench-compare:
	BASE="$(BASE)" LOADGEN="$(LOADGEN)" ./scripts/bench-compare.sh

# bench-syscalls counts the server's system calls per lock cycle (perf's
# syscalls:sys_enter_* tracepoints) for lockd from BASE and from the
# working tree, on the same three rows; needs perf and loadgen.
.PHONY: bench-syscalls
bench-syscalls:
	BASE="$(or $(BASE),HEAD~1)" LOADGEN="$(LOADGEN)" ./scripts/syscalls-per-cycle.sh

# bench-e2e starts a node on a spare port and runs lockctl bench against it,
# in both client modes, 200 workers.
BENCH_ADDR ?= 127.0.0.1:7199
bench-e2e: build
	@./$(BIN)/lockd --listen $(BENCH_ADDR) --log-level warn & pid=$$!; \
	trap "kill $$pid" EXIT; \
	for i in $$(seq 50); do ./$(BIN)/lockctl --addr $(BENCH_ADDR) status >/dev/null 2>&1 && break; sleep 0.1; done; \
	./$(BIN)/lockctl --addr $(BENCH_ADDR) bench --workers 200 --duration 10s --mode pipelined; \
	./$(BIN)/lockctl --addr $(BENCH_ADDR) bench --workers 200 --duration 10s --mode per-worker

# bench-clients measures the pipelined throughput of the three official
# clients in one run (WORKERS sharing one client, unique keys,
# acquire+release, for DURATION each, one after another) against one lockd
# it starts on a free port, and prints one table: see
# scripts/bench-clients.sh.
.PHONY: bench-clients
bench-clients:
	DURATION="$(or $(DURATION),10s)" WORKERS="$(or $(WORKERS),200)" PYTHON="$(PYTHON)" BIN="$(BIN)" GO="$(GO)" ./scripts/bench-clients.sh

# bench-mem measures lockd's resident memory (memory_test.go): 1M held
# keys, 100k waiters on one key, idle connections, and the fall after a
# mass release, each on a fresh node, for bin/lockd and, if MEM_OLD names
# another lockd binary, for it too in the same run (old vs new).
MEM_OLD ?=
bench-mem: build
	LOCKD_MEM_BINS="$(if $(MEM_OLD),old=$(MEM_OLD) )new=$(BIN)/lockd" $(GO) test -count=1 -run 'TestMemoryRSS$$' -v -timeout 30m .

# fuzz runs every fuzz target for FUZZTIME each, one at a time (go test
# -fuzz takes one target per run, and its pattern is a regexp, so each is
# named exactly). FUZZ_TARGETS lists them as PACKAGE:NAME; a check before
# fuzzing fails when a Fuzz function of the repository is missing from the
# list, or the list names one that is gone, so none is skipped silently.
FUZZTIME ?= 20s
FUZZ_TARGETS := \
	./proto:FuzzParse \
	./proto:FuzzParseAnswer \
	./proto:FuzzParseStatus \
	./proto:FuzzParseQueue \
	./proto:FuzzParseBeat \
	./proto:FuzzParseBeatAnswer \
	./proto:FuzzParseRecord \
	./proto:FuzzParseHandoffAnswer \
	./proto:FuzzAnswerRef \
	./proto/auth:FuzzStep \
	./proto/client:FuzzDispatch \
	./cmd/lockctl:FuzzPrintable \
	./cmd/lockctl:FuzzJSONPrintable \
	./cluster/wal:FuzzWALReplay \
	./cluster/core:FuzzWatchWithdraw
fuzz:
	@found=$$(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's|^\(.*\)/[^/]*:func |\1:|'); \
	found=" "$$(echo $$found)" "; listed=" $(FUZZ_TARGETS) "; bad=; \
	for t in $$found; do case "$$listed" in *" $$t "*) ;; *) echo "make fuzz: $$t is not in FUZZ_TARGETS: add it to the Makefile"; bad=1;; esac; done; \
	for t in $$listed; do case "$$found" in *" $$t "*) ;; *) echo "make fuzz: FUZZ_TARGETS names $$t, which no test file defines"; bad=1;; esac; done; \
	test -z "$$bad"
	@for t in $(FUZZ_TARGETS); do \
		echo "== $${t#*:} ($${t%%:*}), $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*} || exit 1; \
	done

completions:
	$(GO) run -tags "$(TAGS)" ./cmd/lockctl completion bash > completions/lockctl.bash
	$(GO) run -tags "$(TAGS)" ./cmd/lockctl completion zsh  > completions/_lockctl
	$(GO) run -tags "$(TAGS)" ./cmd/lockctl completion fish > completions/lockctl.fish
	$(GO) run -tags "$(TAGS)" ./cmd/lockd completion bash > completions/lockd.bash
	$(GO) run -tags "$(TAGS)" ./cmd/lockd completion zsh  > completions/_lockd
	$(GO) run -tags "$(TAGS)" ./cmd/lockd completion fish > completions/lockd.fish

clean:
	rm -rf $(BIN)

# help lists the targets a user or a contributor runs.
.PHONY: help
help:
	@echo 'make build            bin/lockd and bin/lockctl'
	@echo 'make run              build, then start one node on 127.0.0.1:7070 (LISTEN=HOST:PORT for another)'
	@echo 'make install          lockd, lockctl and the completions into PREFIX (/usr/local)'
	@echo 'make uninstall        remove what make install put there'
	@echo 'make test             every test: vet, the clients own tests, -race Go tests, scenarios, simulator'
	@echo 'make test-python      the Python client tests alone'
	@echo 'make test-typescript  build the TypeScript client and run its tests'
	@echo 'make test-rules       check the Prometheus alert rules and run their unit tests'
	@echo 'make simulate         the cluster simulator on SEEDS seeds from FIRST'
	@echo 'make fuzz             every fuzz target for FUZZTIME each'
	@echo 'make bench            go test -bench for the engine, the parser, the client and the node'
	@echo 'make bench-compare    lockd of BASE against the working tree and Redis, side by side'
	@echo 'make bench-syscalls   the server system calls per lock cycle, BASE against the working tree'
	@echo 'make bench-clients    pipelined throughput of the Go, Python and TypeScript clients'
	@echo 'make bench-e2e        start a node on 127.0.0.1:7199 and run lockctl bench in both client modes'
	@echo 'make bench-mem        lockd resident memory with 1M keys, 100k waiters, idle connections'
	@echo 'make dist             release archives, client packages and SHA256SUMS in DIST (dist)'
	@echo 'make completions      regenerate completions/'
	@echo 'make clean            remove bin/'
