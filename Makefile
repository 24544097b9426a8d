# SPDX-License-Identifier: Apache-2.0
GO        ?= go
PKGS      ?= ./...
BIN       ?= bin/macake
PREFIX    ?= /usr/local
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := bin/staticcheck
ACTIONLINT_VERSION ?= v1.7.12
ACTIONLINT := bin/actionlint
## PLATFORMS: every OS/ARCH macake is built for, by `make cross` and
## `make dist` alike (and by anything else that builds for several):
## linux/arm is ARMv7 with hardware floating point (GOARM=7: Raspberry Pi
## OS's armhf, most ARM routers), linux/mipsle is soft-float (GOMIPS=
## softfloat: OpenWrt's ramips routers, whose MIPS cores have no FPU).
PLATFORMS := darwin/arm64 darwin/amd64 linux/amd64 linux/arm64 linux/arm linux/mipsle
# platform_env,OS/ARCH is the go build environment of one platform.
platform_env = GOOS=$(word 1,$(subst /, ,$1)) GOARCH=$(word 2,$(subst /, ,$1))$(if $(filter linux/arm,$1), GOARM=7)$(if $(filter linux/mipsle,$1), GOMIPS=softfloat)
# build_for,OS/ARCH,OUT builds macake for one platform, as `make build` does.
build_for = CGO_ENABLED=0 $(call platform_env,$1) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $2 ./cmd/macake
TRACES    ?= $(firstword $(wildcard ../shared/traces ../../shared/traces) ../shared/traces)

.PHONY: all build test vet race darwin cake test-cake cakevm-setup record-cake lint fmt demo bench bench-daemon e2e e2e-scenarios e2e-honest calibrate fairness-lab e2e-cake cross dist deb deb-check install clean tools man completions

all: vet lint test build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/macake

## test: what CI runs: vet, the race-enabled tests, the darwin cross-build
## and vet, and the CAKE suites in a QEMU guest where it is set up.
test: vet race darwin cake

vet:
	$(GO) vet $(PKGS)

# One package at a time (as -p 1 would): the real-kernel tests (cmd/macake's
# namespaces, e2e's shaped TCP) measure rates and queueing delay; run beside
# each other on two cores they starve one another. .ci/test-packages names
# each package as it starts and ends with the slowest ones, so a long run
# shows where it is.
race:
	GO='$(GO)' PKGS='$(PKGS)' .ci/test-packages -race -count=1 -timeout 25m

darwin:
	@echo ">> darwin/arm64 build and vet (with the real-Mac suite's tag)"
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build $(PKGS)
	GOOS=darwin GOARCH=arm64 $(GO) vet $(PKGS)
	GOOS=darwin GOARCH=arm64 $(GO) vet -tags realmac $(PKGS)
	GOOS=darwin GOARCH=amd64 $(GO) vet $(PKGS)

## cake: what `make test` runs of the CAKE suites: test-cake where a
## cakevm guest can run (QEMU and Debian's kernel set up), else one loud
## line saying they were skipped and why.
CAKEVM := internal/cakevm
cake:
	@if why=$$($(CAKEVM)/setup.sh --check); then $(MAKE) --no-print-directory test-cake; \
	else echo "!! SKIPPED the CAKE suites (backend/tc on a real sch_cake in a QEMU guest): $$why"; fi

## test-cake: the Linux backend's kernel tests on a real sch_cake. Our
## machines' kernels have none, so `go test ./backend/tc` there runs the
## htb fallback; this compiles the same tests and runs the kernel ones in
## a throw-away QEMU guest booting Debian's stock kernel, with the host's
## root read-only underneath (internal/cakevm; `make cakevm-setup` first,
## as root). -tc.shapes=cake: the host covers htb.
CAKE_TESTS ?= ^TestKernel
test-cake:
	GO='$(GO)' $(CAKEVM)/gotest ./backend/tc -test.run '$(CAKE_TESTS)' -test.timeout 20m -tc.shapes=cake

## fairness-lab: the host-fairness lab of issue 25 in a cakevm guest: the
## tutorial's office (two PCs, one with 1 connection and one with 8, behind
## a gateway; routed, then masqueraded with nftables), the gateway's WAN
## shaped by the real `macake apply` from a policy file per case; asserts
## the relations (default isolation: the 8-connection PC takes most;
## dual-srchost/dual-dsthost: each PC within 15 % of an equal share; behind
## NAT only with nat = true) and writes the table beside the tutorial's
## figures to $(FAIRNESS_REPORT). The tutorial's 20 s per case; about
## 5 minutes. Root; `make cakevm-setup` first; nft on the host (nftables).
FAIRNESS_LENGTH ?= 20s
FAIRNESS_REPORT ?= bin/fairness-lab.md
fairness-lab: build
	@mkdir -p bin/cakevm/fairness && rm -f bin/cakevm/fairness/report.md
	@echo "load before: $$(uptime)"
	GO='$(GO)' CAKEVM_XCHG=bin/cakevm/fairness $(CAKEVM)/gotest ./e2e -test.run '^TestFairnessLab$$' -test.timeout 20m \
	  -e2e.macake=$(abspath $(BIN)) -e2e.fairness -e2e.fairness-length=$(FAIRNESS_LENGTH) -e2e.report=/xchg/report.md
	@echo "load after: $$(uptime)"
	@cp bin/cakevm/fairness/report.md $(FAIRNESS_REPORT) && echo && cat $(FAIRNESS_REPORT)

## e2e-cake: make e2e's drift-controlled phases with CAKE as the client's
## shaper: the same testbed in a cakevm guest, every trace's rates scaled
## by $(E2E_CAKE_SCALE) for the emulated machine (0.4: the constant trace's
## 50/10 Mbit/s become 20/4); off / upstream law / ours / oracle / off
## again, each with the honest score and the ping's and the call's loss,
## in $(E2E_CAKE_REPORT). Measured, not asserted (-e2e.measure-only: no
## delay is asserted in a guest whose CPU is 20-35× slower). About 4
## minutes a scenario. Root; `make cakevm-setup` first.
E2E_CAKE_TRACES ?= constant,steps,wobble,lte,wobble:up2
E2E_CAKE_SCALE  ?= 0.4
E2E_CAKE_REPORT ?= bin/e2e-cake-report.md
e2e-cake: build
	@mkdir -p bin/cakevm/e2e-cake && rm -f bin/cakevm/e2e-cake/report.md
	@echo "load before: $$(uptime)"
	GO='$(GO)' CAKEVM_XCHG=bin/cakevm/e2e-cake CAKEVM_TIMEOUT=7200 MACAKE_TRACES=$(abspath $(TRACES)) \
	  $(CAKEVM)/gotest ./e2e -test.run '^TestOffOnOff$$' -test.timeout 110m \
	  -e2e.macake=$(abspath $(BIN)) -e2e.phase=$(E2E_PHASE) -e2e.traces=$(E2E_CAKE_TRACES) \
	  -e2e.rate-scale=$(E2E_CAKE_SCALE) -e2e.measure-only -e2e.report=/xchg/report.md
	@echo "load after: $$(uptime)"
	@cp bin/cakevm/e2e-cake/report.md $(E2E_CAKE_REPORT) && echo && cat $(E2E_CAKE_REPORT)

## cakevm-setup: install QEMU, busybox-static and kmod from Debian when
## missing (root), fetch the kernel linux-image-amd64 points at today and
## unpack it beside them (never installed), build the guest's initramfs.
cakevm-setup:
	$(CAKEVM)/setup.sh

## record-cake: re-record backend/tc's cake-* golden cases on a real
## sch_cake in a guest, then replan them (-update).
record-cake:
	@rm -rf bin/cakevm/record && mkdir -p bin/cakevm/record
	GO='$(GO)' CAKEVM_XCHG=bin/cakevm/record MACAKE_TC_RECORD_DIR=/xchg/diff \
	  $(CAKEVM)/gotest ./backend/tc -test.run '^TestRecordCakeGoldensFromKernel$$' -record
	cp -r bin/cakevm/record/diff/. backend/tc/testdata/diff/
	$(GO) test ./backend/tc -run '^TestDiffGolden$$' -update

$(STATICCHECK):
	GOBIN=$(CURDIR)/bin GOOS= GOARCH= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(ACTIONLINT):
	GOBIN=$(CURDIR)/bin GOOS= GOARCH= $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

tools: $(STATICCHECK) $(ACTIONLINT)

## lint: staticcheck (Linux and darwin) and actionlint on .github/workflows.
## The tools are built from the Go module proxy on first use.
lint: $(STATICCHECK) $(ACTIONLINT)
	$(STATICCHECK) $(PKGS)
	GOOS=darwin GOARCH=arm64 $(STATICCHECK) $(PKGS)
	$(ACTIONLINT)

fmt:
	gofmt -l -w .

## e2e: the real-kernel proof (root, Linux): on every scenario (constant,
## steps, a Starlink-like wobble, two recorded cellular traces from
## $(TRACES), both directions loaded) the drift-controlled off / upstream / ours / oracle /
## off again, with longer phases than CI, then the actuation benchmark;
## prints the tables docs/MEASUREMENTS.md quotes and writes every phase's
## measures to $(E2E_JSON) for `make calibrate`; then the ISP that
## prioritises ICMP (ICMP-only control against auto reflectors), then the
## actuation benchmark. `make test` runs the short version.
E2E_PHASE  ?= 30s
E2E_TRACES ?= constant,steps,wobble,lte,train,wobble:up2
E2E_REPORT ?= bin/e2e-report.md
E2E_JSON   ?= bin/e2e-measures.jsonl
e2e: e2e-scenarios
	for isp in prio honest; do $(GO) test -count=1 -timeout 30m -run '^TestICMPPriority$$' ./e2e -args \
	  -e2e.phase=$(E2E_PHASE) -e2e.isp=$$isp -e2e.report=$(abspath $(E2E_REPORT)) || exit 1; done
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkSetRateKernel$$' -benchtime 200x -benchmem ./e2e
	@echo; cat $(E2E_REPORT)

## e2e-scenarios: make e2e's first step alone: the drift-controlled phases
## of every scenario, their tables in $(E2E_REPORT) and measures in
## $(E2E_JSON).
e2e-scenarios:
	@mkdir -p $(dir $(E2E_REPORT)) $(dir $(E2E_JSON)) && rm -f $(E2E_REPORT) $(E2E_JSON)
	@echo "load before: $$(uptime)"
	MACAKE_TRACES=$(abspath $(TRACES)) $(GO) test -count=1 -timeout 90m -run '^TestOffOnOff$$' ./e2e -args \
	  -e2e.phase=$(E2E_PHASE) -e2e.traces=$(E2E_TRACES) -e2e.report=$(abspath $(E2E_REPORT)) -e2e.json=$(abspath $(E2E_JSON))
	@echo "load after: $$(uptime)"

## e2e-honest: issue 24's kernel comparison (root, Linux; run it on a quiet
## machine): every scenario's drift-controlled phases on the kernel, then
## the simulator's twin beside them: per scenario ours/upstream and
## ours/oracle on the honest score, and the ping's and the call's loss on
## the kernel and in the twin (bin/e2e-report.md, bin/calibration.md).
e2e-honest: e2e-scenarios
	$(MAKE) --no-print-directory calibrate E2E_JSON=$(E2E_JSON) E2E_PHASE=$(E2E_PHASE) E2E_TRACES=$(E2E_TRACES) TRACES=$(TRACES)
	@echo; cat $(E2E_REPORT)

## calibrate: the simulator's twin of every e2e scenario (no root), side by
## side with the kernel's measures of the last `make e2e` ($(E2E_JSON), when
## there), and the simulator's disagreement on ours/upstream and ours/oracle.
CALIBRATION ?= bin/calibration.md
calibrate:
	@mkdir -p $(dir $(CALIBRATION))
	MACAKE_TRACES=$(abspath $(TRACES)) $(GO) test -count=1 -run '^TestCalibration$$' ./e2e -args -e2e.calibrate \
	  -e2e.phase=$(E2E_PHASE) -e2e.traces=$(E2E_TRACES) -e2e.calibration=$(abspath $(CALIBRATION)) \
	  $(if $(wildcard $(E2E_JSON)),-e2e.kernel=$(abspath $(E2E_JSON)))
	@cat $(CALIBRATION)

## bench-daemon: what `macake watch` costs (root, Linux): a real link in
## namespaces (50/10 Mbit/s, 1 s buffer), idle then under 4 down + 2 up
## CUBIC flows: CPU of the whole process tree and of the daemon, context
## switches, RSS, processes started (every tc and ip through a logging
## wrapper) and policy-save-to-live latency, beside a bare 20 Hz Go ticker
## (a program of its own, GOMAXPROCS=1) measured in the same windows, and the same watch with a tc process per
## rate change (MACAKE_NETLINK=off). docs/MEASUREMENTS.md quotes it.
BENCH_WINDOW ?= 30s
BENCH_SAVES  ?= 10
BENCH_REPORT ?= bin/bench-daemon.md
bench-daemon:
	@mkdir -p $(dir $(BENCH_REPORT)) && rm -f $(BENCH_REPORT)
	$(GO) test -count=1 -timeout 20m -run '^TestBenchDaemon$$' ./e2e -args \
	  -e2e.bench-daemon -e2e.bench-window=$(BENCH_WINDOW) -e2e.bench-saves=$(BENCH_SAVES) -e2e.report=$(abspath $(BENCH_REPORT))
	@echo; cat $(BENCH_REPORT)

## demo: the first thing to run on a fresh clone: check the example
## policies, then race the controllers on the built-in Starlink model and
## draw them (needs no trace files).
demo: build
	@if [ -d examples/links.d ]; then $(BIN) validate --config-dir examples/links.d; fi
	$(BIN) sim --link starlink --svg bin/demo-starlink.svg

## bench: every capacity trace in $(TRACES) (not in the repository), every
## controller, several seeds and offsets; one table, and the
## leave-one-source-out estimate of the tuning grid macake's law was chosen
## from (36 variants; about 10 minutes on 2 cores).
bench: build
	@if [ -d "$(TRACES)" ]; then $(BIN) sim --traces $(TRACES); \
	else echo "bench: no traces at $(TRACES) (set TRACES=DIR); nothing to run"; fi

## cross: dist/macake-OS-ARCH for every platform of PLATFORMS, then their
## sizes.
cross:
	@set -e; $(foreach p,$(PLATFORMS),echo ">> building $p"; $(call build_for,$p,dist/macake-$(subst /,-,$p));)
	@ls -l $(foreach p,$(PLATFORMS),dist/macake-$(subst /,-,$p)) | awk '{ printf "%10d bytes  %5.1f MiB  %s\n", $$5, $$5 / 1048576, $$NF }'

## dist: the release files in dist/release: an archive per platform
## (macake-VERSION-OS-ARCH.tar.gz: the binary, the manual page, the
## completions, LICENSE, README.md, the example policies and the systemd
## units or launchd plists), a .deb per Linux platform, and SHA256SUMS.
## Reproducible for one commit (SOURCE_DATE_EPOCH).
DIST      ?= dist/release
DIST_VERSION = $(patsubst v%,%,$(VERSION))
dist: man completions
	@rm -rf $(DIST) && mkdir -p $(DIST)/bin
	@set -e; $(foreach p,$(PLATFORMS),echo ">> $p"; \
	  $(call build_for,$p,$(DIST)/bin/$(subst /,-,$p)/macake); \
	  packaging/archive.sh $p $(DIST)/bin/$(subst /,-,$p)/macake $(DIST_VERSION) $(DIST); \
	  $(if $(filter linux/%,$p),packaging/deb/build.sh $(DIST)/bin/$(subst /,-,$p)/macake $(word 2,$(subst /, ,$p)) $(VERSION) $(DIST);))
	@rm -rf $(DIST)/bin
	cd $(DIST) && sha256sum *.tar.gz *.deb > SHA256SUMS && cat SHA256SUMS

## deb: this machine's .deb (dist/macake_VERSION_ARCH.deb), from `make
## build`; DEB_ARCH=arm64 (or arm, mipsle) builds another's.
DEB_ARCH ?= $(shell $(GO) env GOARCH)
deb: build
	@mkdir -p dist && rm -f dist/macake_*_*.deb
	@$(call build_for,linux/$(DEB_ARCH),dist/macake-linux-$(DEB_ARCH)-deb)
	packaging/deb/build.sh dist/macake-linux-$(DEB_ARCH)-deb $(DEB_ARCH) $(VERSION) dist
	@rm -f dist/macake-linux-$(DEB_ARCH)-deb

## deb-check: install this machine's .deb with dpkg, check it (the
## version, every file, the unit, systemd-analyze verify), run `macake
## watch` as the unit would on a link in a network namespace until it
## shapes, remove it (prerm takes the shaping away) and purge it, and
## check that nothing is left (root, Linux; CI runs it).
deb-check: deb
	packaging/deb/check.sh dist/macake_*_$(DEB_ARCH).deb

## man: the manual page macake(1), generated from the command table
## (bin/man/macake.1, dated by the last commit so it is reproducible);
## linted with mandoc where it is installed.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
export SOURCE_DATE_EPOCH
man: build
	@mkdir -p bin/man
	$(BIN) man > bin/man/macake.1
	@if command -v mandoc >/dev/null 2>&1; then mandoc -T lint -W warning bin/man/macake.1 && echo "bin/man/macake.1: mandoc -T lint ok"; \
	else echo "mandoc not installed; not linted (apt-get install mandoc)"; fi

## completions: the bash, zsh and fish completion scripts, generated from
## the command table, in bin/completions.
completions: build
	@mkdir -p bin/completions
	$(BIN) completion bash > bin/completions/macake.bash
	$(BIN) completion zsh > bin/completions/_macake
	$(BIN) completion fish > bin/completions/macake.fish

## install: copies what `make build man completions` made, run as yourself
## first: install builds nothing, so `sudo make install` needs no Go in
## root's PATH (sudo resets it) and leaves no root-owned file in bin/.
INSTALL_FILES := $(BIN) bin/man/macake.1 bin/completions/macake.bash bin/completions/_macake bin/completions/macake.fish
install:
	@for f in $(INSTALL_FILES); do [ -f "$$f" ] || { echo "install: $$f is missing: run 'make build man completions' first, as yourself (install only copies)" >&2; exit 1; }; done
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/macake
	install -m 0644 bin/man/macake.1 $(DESTDIR)$(PREFIX)/share/man/man1/macake.1
	install -m 0644 bin/completions/macake.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/macake
	install -m 0644 bin/completions/_macake $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_macake
	install -m 0644 bin/completions/macake.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/macake.fish

clean:
	rm -rf bin dist
