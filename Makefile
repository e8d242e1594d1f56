# SPDX-License-Identifier: MIT
#
#   make                 build build/asynctraced and build/sample-executor
#   make test            unit tests, then the root integration tests
#   make demo            trace the sample executor's "noisy" scenario
#   make bench           overhead against the floor (and on every tokio build of the matrix),
#                        convert speed, every scenario (root)
#   make fuzz            fuzz the capture reader and every parser of target files
#   make stress          every scenario's alerts, N times in both modes (root; STRESS_N=50)
#   make soak            two tracers attached for an hour, watched for leaks (root; SOAK_S=3600)
#   make install         the binary, asynctraced(8), the systemd unit, its options file and
#                        bash completion (PREFIX=/usr/local, DESTDIR=); make uninstall
#   make V=1             show full commands;  make BUILD=dir  build elsewhere
#   make VMLINUX_H=path  compile the BPF code against another vmlinux.h

BUILD     ?= build
ARCH      ?= $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
VMLINUX_H ?= vmlinux/$(ARCH)/vmlinux.h

CC        ?= cc
CLANG     ?= clang
BPFTOOL   ?= bpftool
PYTHON    ?= python3
SCDOC     ?= scdoc

# make install: where each piece goes (DESTDIR is prepended to every one)
PREFIX         ?= /usr/local
SBINDIR        ?= $(PREFIX)/sbin
MANDIR         ?= $(PREFIX)/share/man
SYSCONFDIR     ?= /etc
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR    ?= $(PREFIX)/share/bash-completion/completions
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
# Debian's Rust toolchain, whatever else is on PATH: it builds against the
# tokio sources Debian packages (librust-tokio-dev), offline.
CARGO     ?= /usr/bin/cargo
RUSTC     ?= /usr/bin/rustc

CFLAGS    ?= -O2 -g
CFLAGS    += -std=gnu11 -Wall -Wextra -Wshadow -Wno-unused-parameter \
	     -Wmissing-prototypes -Wstrict-prototypes -D_GNU_SOURCE
CPPFLAGS  += -Iinclude -I$(BUILD)
DEPFLAGS   = -MMD -MP
LDLIBS_TRACER = -lbpf -ldw -lelf -lz -ldeflate -lm -liberty -lcapstone -lcap -lseccomp -lmicrohttpd -ljson-c -pthread
LDLIBS_EXEC   = -pthread

# libbpf's usdt.bpf.h includes <asm/errno.h>, which lives under the multiarch dir.
# -mcpu=v3: atomic fetch-and-add, whose result we use (kernels >= 5.12).
MULTIARCH := $(shell $(CC) -dumpmachine)
BPF_CFLAGS = -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall \
	     -Iinclude -I$(dir $(VMLINUX_H)) -I/usr/include/$(MULTIARCH)

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# The tracer's layers, a folder each (docs/architecture.md); a header is
# included by its folder and name ("pipeline/detect.h"), from src/.
SRC_DIRS    := src/cmd src/session src/targets src/targets/usdt src/targets/tokio src/targets/go \
	       src/analyser src/source src/pipeline src/sinks src/capture src/stacks src/gate src/lib \
	       src/tasks
TRACER_SRCS := $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c))
TRACER_OBJS := $(patsubst src/%.c,$(BUILD)/src/%.o,$(TRACER_SRCS))
SRC_INC     := -Isrc
EXEC_SRCS   := $(wildcard executor/*.c)
EXEC_OBJS   := $(patsubst executor/%.c,$(BUILD)/executor/%.o,$(EXEC_SRCS))
# The same runtime as a shared library: a target whose probes live in a
# mapped library rather than in its executable, inlined at every call site.
EXEC_SO_OBJS := $(patsubst executor/%.c,$(BUILD)/executor-pic/%.o,\
		  $(filter-out executor/main.c,$(EXEC_SRCS)))
# The same with frame pointers in every function, leaves too: --stacks then
# takes the kernel's frame-pointer walk (tests/integration/test_stacks.py).
EXEC_FP_OBJS := $(patsubst executor/%.c,$(BUILD)/executor-fp/%.o,$(EXEC_SRCS))
# ... and a deliberately slowed build, every poll 1 ms longer: what the CI gate must catch
EXEC_SLOW_OBJS := $(patsubst executor/%.c,$(BUILD)/executor-slow/%.o,$(EXEC_SRCS))
BPF_SRCS    := $(wildcard bpf/*.bpf.c)
BPF_SKELS   := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))

UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
UNIT_BINS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
# Every tracer object but main.o, for linking unit tests against the real code.
LIB_OBJS    := $(filter-out $(BUILD)/src/cmd/main.o,$(TRACER_OBJS))

# The fuzzer: the same sources again, with libFuzzer's coverage and sanitizers.
FUZZ_FLAGS  := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
	       -fno-sanitize-recover=undefined
FUZZ_OBJS   := $(patsubst src/%.c,$(BUILD)/fuzz/src/%.o,$(filter-out src/cmd/main.c,$(TRACER_SRCS)))
FUZZ_TIME   ?= 60
# One target a parser (tests/fuzz/fuzz_<target>.c), each with its corpus,
# tests/fuzz/<target>/ (the capture's is tests/fuzz/corpus), and the largest
# input it mutates (docs/testing.md says why these).
FUZZ_TARGETS ?= capture elf_image usdt_notes usdt_args tokio_names placement golang func_index \
		proc ksyms plan goroutines tokio_tasks
FUZZ_BINS    := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))
fuzz_corpus   = $(if $(filter capture,$(1)),tests/fuzz/corpus,tests/fuzz/$(1))
# capture: the corpus holds a whole real capture of some 280 KB (several
# chunks, four workers, a full snapshot); libFuzzer still grows new inputs
# from small ones first.
FUZZ_MAX_LEN_capture     := 393216
FUZZ_MAX_LEN_elf_image   := 65536
FUZZ_MAX_LEN_usdt_notes  := 65536
FUZZ_MAX_LEN_usdt_args   := 256
FUZZ_MAX_LEN_tokio_names := 65536
FUZZ_MAX_LEN_placement   := 65536
FUZZ_MAX_LEN_golang      := 65536
FUZZ_MAX_LEN_func_index  := 65536
FUZZ_MAX_LEN_proc        := 16384
FUZZ_MAX_LEN_ksyms       := 16384
# tokio_tasks: a whole snapshot of tokio-parked's tasks is some 20 KB
FUZZ_MAX_LEN_tokio_tasks := 65536
FUZZ_MAX_LEN_plan        := 65536
FUZZ_MAX_LEN_goroutines  := 32768

.PHONY: all clean test test-unit test-integration ci-gate demo setup bench tokio tokio-matrix go \
	go-versions fuzz \
	fuzz-regress stress \
	soak install uninstall man
.DELETE_ON_ERROR:
# Keep BPF objects: they are worth inspecting with bpftool and llvm-objdump.
.SECONDARY:

all: $(BUILD)/asynctraced $(BUILD)/sample-executor $(BUILD)/sample-executor-shared \
	$(BUILD)/sample-executor-fp $(BUILD)/sample-executor-slow

$(BUILD)/asynctraced: $(TRACER_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS_TRACER) -o $@

$(BUILD)/sample-executor: $(EXEC_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS_EXEC) -o $@

$(BUILD)/sample-executor-fp: $(EXEC_FP_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS_EXEC) -o $@

$(BUILD)/sample-executor-slow: $(EXEC_SLOW_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS_EXEC) -o $@

$(BUILD)/libsample-executor.so: $(EXEC_SO_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared $^ $(LDLIBS_EXEC) -o $@

$(BUILD)/sample-executor-shared: $(BUILD)/executor/main.o $(BUILD)/libsample-executor.so
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $< -L$(BUILD) -lsample-executor \
		-Wl,-rpath,'$$ORIGIN' $(LDLIBS_EXEC) -o $@

# A program taken for tokio whose probes the kernel refuses (tests/refused).
$(BUILD)/refused-probe: tests/refused/refused.c | $(BUILD)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@

# Two untraced processes switching on one CPU (tests/bench/switches.py).
$(BUILD)/pingpong: tests/bench/pingpong.c | $(BUILD)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@

# The Go test program (tests/go; issue 17), built offline by Debian's
# golang-go: with its DWARF; stripped of it and of .symtab (-s -w: what is
# left is .gopclntab and .go.buildinfo); and position-independent (PIE, as
# hardened distributions build Go).
GO_ENV  := GOCACHE=$(abspath $(BUILD))/go-cache GOPATH=$(abspath $(BUILD))/gopath \
	   GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
GO_SRCS := tests/go/go.mod $(wildcard tests/go/cmd/*/*.go tests/go/internal/*/*.go)
GO_APPS := $(BUILD)/go-app $(BUILD)/go-app-stripped $(BUILD)/go-app-pie

go: $(GO_APPS)

$(BUILD)/go-app: $(GO_SRCS)
	$(call msg,GO,$@)
	$(Q)cd tests/go && $(GO_ENV) go build -o $(abspath $@) ./cmd/go-app

$(BUILD)/go-app-stripped: $(GO_SRCS)
	$(call msg,GO,$@)
	$(Q)cd tests/go && $(GO_ENV) go build -ldflags='-s -w' -o $(abspath $@) ./cmd/go-app

$(BUILD)/go-app-pie: $(GO_SRCS)
	$(call msg,GO,$@)
	$(Q)cd tests/go && $(GO_ENV) go build -buildmode=pie -o $(abspath $@) ./cmd/go-app

# The HTTP server of the sample-mode benchmark (make bench; tests/bench/sample_mode.py).
$(BUILD)/go-http: $(GO_SRCS)
	$(call msg,GO,$@)
	$(Q)cd tests/go && $(GO_ENV) go build -o $(abspath $@) ./cmd/go-http

# The same program built by each Go Debian ships beyond bookworm's 1.19
# (bookworm-backports, trixie, trixie-backports: the last three releases
# among them), with its DWARF and stripped: the version table is checked
# against their DWARF (tests/unit/test_golang.c) and the tracer runs them
# (tests/integration/test_go.py). scripts/go-toolchains.sh fetches them
# through apt-get into $(BUILD)/go-toolchains; nothing is installed.
GO_VERSIONS   := 1.21 1.22 1.23 1.24 1.25 1.26 1.27
GO_TOOLCHAINS := $(BUILD)/go-toolchains
GO_VERSION_APPS := $(foreach v,$(GO_VERSIONS),$(BUILD)/go-versions/go-app-$(v) \
			$(BUILD)/go-versions/go-app-$(v)-stripped)

go-versions: $(GO_VERSION_APPS)

$(GO_TOOLCHAINS)/stamp: scripts/go-toolchains.sh scripts/apt-private.sh
	$(Q)scripts/go-toolchains.sh $(GO_TOOLCHAINS) $(GO_VERSIONS)
	$(Q)touch $@

$(BUILD)/go-versions/go-app-%-stripped: $(GO_SRCS) $(GO_TOOLCHAINS)/stamp
	$(call msg,GO,$@)
	$(Q)cd tests/go && GOROOT=$(abspath $(GO_TOOLCHAINS))/usr/lib/go-$* $(GO_ENV) \
		$(abspath $(GO_TOOLCHAINS))/usr/lib/go-$*/bin/go build -ldflags='-s -w' \
		-o $(abspath $@) ./cmd/go-app

$(BUILD)/go-versions/go-app-%: $(GO_SRCS) $(GO_TOOLCHAINS)/stamp
	$(call msg,GO,$@)
	$(Q)cd tests/go && GOROOT=$(abspath $(GO_TOOLCHAINS))/usr/lib/go-$* $(GO_ENV) \
		$(abspath $(GO_TOOLCHAINS))/usr/lib/go-$*/bin/go build -o $(abspath $@) ./cmd/go-app

# The tokio test program (tests/tokio), built three ways: the default release
# profile (legacy symbol mangling), fat LTO (steal_into inlined away), and v0
# mangling (future types in the symbols); plus a stripped copy.
TOKIO_DIR  := tests/tokio
TOKIO_SRCS := $(wildcard $(TOKIO_DIR)/src/*.rs $(TOKIO_DIR)/src/bin/*.rs) $(TOKIO_DIR)/Cargo.toml $(TOKIO_DIR)/Cargo.lock
TOKIO_APPS := $(BUILD)/tokio-app $(BUILD)/tokio-app-lto $(BUILD)/tokio-app-v0 \
	      $(BUILD)/tokio-app-stripped $(BUILD)/tokio-many $(BUILD)/tokio-spin \
	      $(BUILD)/tokio-app-cet $(BUILD)/tokio-spin-cet $(BUILD)/tokio-neighbour \
	      $(BUILD)/tokio-paths $(BUILD)/tokio-paths-lto $(BUILD)/tokio-neighbour-lto
# tokio-parked's builds (below): named before the rule that needs them
TOKIO_PARKED := $(BUILD)/tokio-parked $(BUILD)/tokio-parked-web $(BUILD)/tokio-parked-lto \
		$(BUILD)/tokio-parked-nodebug $(BUILD)/tokio-parked-split \
		$(BUILD)/tokio-neighbour-debug2
CARGO_BUILD = cd $(TOKIO_DIR) && RUSTC=$(RUSTC) RUSTFLAGS="$(TOKIO_RUSTFLAGS)" $(TOKIO_ENV) \
	      $(CARGO) build --offline --quiet

tokio: $(TOKIO_APPS) $(TOKIO_PARKED)

$(BUILD)/tokio-app: $(TOKIO_SRCS) $(wildcard $(TOKIO_DIR)/src/bin/*.rs)
	$(call msg,CARGO,$@)
	$(Q)$(CARGO_BUILD) --release --bins --target-dir $(abspath $(BUILD))/cargo/legacy
	$(Q)cp $(BUILD)/cargo/legacy/release/tokio-app $@

# 200 future types, 400 raw::poll instances: built with tokio-app.
$(BUILD)/tokio-many: $(BUILD)/tokio-app
	$(Q)cp $(BUILD)/cargo/legacy/release/tokio-many $@

# A noisy neighbour and the task it keeps waiting: built with tokio-app.
$(BUILD)/tokio-neighbour: $(BUILD)/tokio-app
	$(Q)cp $(BUILD)/cargo/legacy/release/tokio-neighbour $@

# tokio's everyday paths (yield_now, mpsc, timers, Notify, JoinHandle), for
# make bench and the tests: built with tokio-app, and with fat LTO.
$(BUILD)/tokio-paths: $(BUILD)/tokio-app
	$(Q)cp $(BUILD)/cargo/legacy/release/tokio-paths $@

# The benchmark workload (make bench): built with tokio-app.
$(BUILD)/tokio-spin: $(BUILD)/tokio-app
	$(Q)cp $(BUILD)/cargo/legacy/release/tokio-spin $@

# The tokio HTTP server of the sample-mode benchmark (make bench): built with tokio-app.
$(BUILD)/tokio-http: $(BUILD)/tokio-app
	$(Q)cp $(BUILD)/cargo/legacy/release/tokio-http $@

$(BUILD)/tokio-app-lto: $(TOKIO_SRCS) $(TOKIO_DIR)/src/bin/tokio-paths.rs \
			   $(TOKIO_DIR)/src/bin/tokio-neighbour.rs
	$(call msg,CARGO,$@)
	$(Q)$(CARGO_BUILD) --profile fat-lto --bin tokio-app --bin tokio-paths --bin tokio-neighbour \
		--target-dir $(abspath $(BUILD))/cargo/lto
	$(Q)cp $(BUILD)/cargo/lto/fat-lto/tokio-app $@

$(BUILD)/tokio-paths-lto: $(BUILD)/tokio-app-lto
	$(Q)cp $(BUILD)/cargo/lto/fat-lto/tokio-paths $@

$(BUILD)/tokio-neighbour-lto: $(BUILD)/tokio-app-lto
	$(Q)cp $(BUILD)/cargo/lto/fat-lto/tokio-neighbour $@

$(BUILD)/tokio-app-v0: TOKIO_RUSTFLAGS = -C symbol-mangling-version=v0
$(BUILD)/tokio-app-v0: $(TOKIO_SRCS)
	$(call msg,CARGO,$@)
	$(Q)$(CARGO_BUILD) --release --bin tokio-app --target-dir $(abspath $(BUILD))/cargo/v0
	$(Q)cp $(BUILD)/cargo/v0/release/tokio-app $@

# CET: every function starts with endbr64, which the kernel single-steps under
# a uprobe: the build that probe placement (src/targets/placement.c) is tested on.
# -Z flags need RUSTC_BOOTSTRAP with Debian's stable rustc.
$(BUILD)/tokio-app-cet: TOKIO_RUSTFLAGS = -Z cf-protection=full
$(BUILD)/tokio-app-cet: TOKIO_ENV = RUSTC_BOOTSTRAP=1
$(BUILD)/tokio-app-cet: $(TOKIO_SRCS) $(wildcard $(TOKIO_DIR)/src/bin/*.rs)
	$(call msg,CARGO,$@)
	$(Q)$(CARGO_BUILD) --release --bins --target-dir $(abspath $(BUILD))/cargo/cet
	$(Q)cp $(BUILD)/cargo/cet/release/tokio-app $@

$(BUILD)/tokio-spin-cet: $(BUILD)/tokio-app-cet
	$(Q)cp $(BUILD)/cargo/cet/release/tokio-spin $@

# tokio-parked (asynctraced tasks: tasks awaiting at known lines), with type
# debug info (profile debug2: debug = 2) by each Debian compiler, with fat
# LTO, without its DWARF (strip --strip-debug: what is said then), and with
# it in a separate file (objcopy --only-keep-debug, as Debian's -dbgsym
# packages ship it), named by a debug link; the test puts it under its build
# id's path too. tokio-neighbour with the same profile: where a long poll's
# victim waited.
RUST_WEB      = $(BUILD)/rust-web

$(BUILD)/tokio-parked: $(TOKIO_SRCS)
	$(call msg,CARGO,$@)
	$(Q)$(CARGO_BUILD) --profile debug2 --bin tokio-parked --bin tokio-neighbour \
		--target-dir $(abspath $(BUILD))/cargo/debug2
	$(Q)cp $(BUILD)/cargo/debug2/debug2/tokio-parked $@

$(BUILD)/tokio-neighbour-debug2: $(BUILD)/tokio-parked
	$(Q)cp $(BUILD)/cargo/debug2/debug2/tokio-neighbour $@

$(BUILD)/tokio-parked-lto: $(TOKIO_SRCS)
	$(call msg,CARGO,$@)
	$(Q)$(CARGO_BUILD) --profile debug2-lto --bin tokio-parked \
		--target-dir $(abspath $(BUILD))/cargo/debug2-lto
	$(Q)cp $(BUILD)/cargo/debug2-lto/debug2-lto/tokio-parked $@

$(BUILD)/tokio-parked-web: $(TOKIO_SRCS) scripts/rust-web.sh scripts/apt-private.sh
	$(call msg,CARGO,$@)
	$(Q)scripts/rust-web.sh $(RUST_WEB) >/dev/null
	$(Q)cd $(TOKIO_DIR) && LD_LIBRARY_PATH=$(abspath $(RUST_WEB))/usr/lib/x86_64-linux-gnu \
		RUSTC=$(abspath $(RUST_WEB))/usr/bin/rustc $(abspath $(RUST_WEB))/usr/bin/cargo \
		build --offline --locked --quiet --profile debug2 --bin tokio-parked \
		--target-dir $(abspath $(BUILD))/cargo/debug2-web
	$(Q)cp $(BUILD)/cargo/debug2-web/debug2/tokio-parked $@

$(BUILD)/tokio-parked-nodebug: $(BUILD)/tokio-parked
	$(call msg,STRIP,$@)
	$(Q)strip --strip-debug -o $@ $<

$(BUILD)/tokio-parked-split: $(BUILD)/tokio-parked
	$(call msg,SPLIT,$@)
	$(Q)objcopy --only-keep-debug $< $@.debug
	$(Q)strip --strip-debug -o $@.tmp $<
	$(Q)objcopy --add-gnu-debuglink=$@.debug $@.tmp $@
	$(Q)rm -f $@.tmp

$(BUILD)/tokio-app-stripped: $(BUILD)/tokio-app
	$(call msg,STRIP,$@)
	$(Q)strip -o $@ $<

# The tokio build matrix (scripts/tokio-matrix.sh: its table; docs/tokio.md):
# tokio-app and tokio-paths built the ways users build theirs, by rustc 1.63
# and by rustc-web, which scripts/rust-web.sh fetches into $(BUILD)/rust-web.
# Three builds of the matrix are the ones above (release, fat LTO, CET).
TOKIO_MATRIX      := $(shell scripts/tokio-matrix.sh --list | cut -d' ' -f1)
TOKIO_MATRIX_BINS := $(foreach b,$(TOKIO_MATRIX),$(BUILD)/matrix/$(b)/tokio-paths)

tokio-matrix: $(TOKIO_MATRIX_BINS) $(BUILD)/tokio-paths-cet

$(BUILD)/matrix/%/tokio-paths: $(TOKIO_SRCS) $(wildcard $(TOKIO_DIR)/src/bin/*.rs) \
			       scripts/tokio-matrix.sh scripts/rust-web.sh scripts/apt-private.sh
	$(Q)scripts/tokio-matrix.sh $(BUILD) $*

$(BUILD)/tokio-paths-cet: $(BUILD)/tokio-app-cet
	$(Q)cp $(BUILD)/cargo/cet/release/tokio-paths $@

# Userspace objects include the generated skeletons, so those come first.
$(TRACER_OBJS): | $(BPF_SKELS)

$(BUILD)/src/%.o: src/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(SRC_INC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/executor/%.o: executor/%.c | $(BUILD)/executor
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) -pthread -c $< -o $@

$(BUILD)/executor-fp/%.o: executor/%.c | $(BUILD)/executor-fp
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
		$(DEPFLAGS) -pthread -c $< -o $@

$(BUILD)/executor-slow/%.o: executor/%.c | $(BUILD)/executor-slow
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -DSLOW_POLL_NS=1000000 $(DEPFLAGS) -pthread -c $< -o $@

$(BUILD)/executor-pic/%.o: executor/%.c | $(BUILD)/executor-pic
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) -DSAMPLE_EXECUTOR_INLINE_PROBES -fPIC -pthread \
		-c $< -o $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(VMLINUX_H) | $(BUILD)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(DEPFLAGS) -MT $@ -MF $(@:.o=.d) -c $< -o $@.tmp
	$(Q)$(BPFTOOL) gen object $@ $@.tmp
	$(Q)rm -f $@.tmp

$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJS) | $(BUILD)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(SRC_INC) $(CFLAGS) $(DEPFLAGS) $< $(LIB_OBJS) \
		$(LDLIBS_TRACER) -lcmocka -o $@

# The unwinder's test unwinds its own stack, built as release code is: without
# frame pointers, so that only the call-frame information can be followed.
$(BUILD)/tests/test_unwind: CFLAGS += -fomit-frame-pointer

# The BPF programs compiled as userspace C, against the simulated kernel in
# tests/unit/bpf_shim (found before anything else of the same name).
$(BUILD)/tests/test_bpf_logic: CPPFLAGS := -Itests/unit/bpf_shim -Ibpf $(CPPFLAGS)
$(BUILD)/tests/test_bpf_logic: bpf/asynctraced.bpf.c bpf/core.bpf.h

$(FUZZ_OBJS): | $(BPF_SKELS)

$(BUILD)/fuzz/src/%.o: src/%.c
	$(call msg,CC-FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(CPPFLAGS) $(SRC_INC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -std=gnu11 \
		-D_GNU_SOURCE $(DEPFLAGS) -c $< -o $@

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS) | $(BUILD)/fuzz/src
	$(call msg,CC-FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS) $(SRC_INC) $(FUZZ_FLAGS) -fsanitize=fuzzer -std=gnu11 \
		-D_GNU_SOURCE $(DEPFLAGS) -MT $@ -MF $(BUILD)/fuzz/fuzz_$*.d $< $(FUZZ_OBJS) \
		$(LDLIBS_TRACER) -o $@

$(BUILD)/src $(BUILD)/executor $(BUILD)/executor-pic $(BUILD)/executor-fp $(BUILD)/executor-slow $(BUILD)/bpf $(BUILD)/tests $(BUILD)/fuzz/src:
	$(Q)mkdir -p $@

# The two entry points of the README: each installs what is missing first.
test: setup
	$(Q)$(MAKE) --no-print-directory test-unit test-integration ci-gate

# The project's own CI gate on its sample executor, as users write theirs
# (asynctraced run; docs/cli.md): JUnit files in $(BUILD)/gate.
ci-gate: all tokio
	$(Q)scripts/ci-gate.sh $(BUILD)

demo: setup
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/demo.sh $(BUILD)

# Unit tests need no root: they feed synthetic events to the real code. The
# trace they write is then held to Perfetto's import rules.
test-unit: $(UNIT_BINS) $(BUILD)/sample-executor $(BUILD)/asynctraced fuzz-regress go go-versions tokio
	$(Q)set -e; for t in $(UNIT_BINS); do echo "== $$t"; \
		BUILD=$(BUILD) GO_VERSIONS="$(GO_VERSIONS)" $$t; done
	$(Q)$(PYTHON) tests/integration/trace_check.py $(BUILD)/tests/synthetic.json
	$(Q)$(PYTHON) tests/integration/trace_check.py $(BUILD)/tests/waits.json
	$(Q)$(PYTHON) tests/integration/pftrace_check.py $(BUILD)/tests/synthetic.pftrace
	$(Q)BUILD=$(BUILD) $(PYTHON) -m unittest discover -s tests/offline -t . -v

# Every input the fuzzers ever kept (seeds, crashes, hangs), once more.
# tokio_tasks reads with tokio-parked's DWARF (FUZZ_TOKIO_EXE).
fuzz-regress: $(FUZZ_BINS) $(BUILD)/tokio-parked
	$(Q)set -e; $(foreach t,$(FUZZ_TARGETS),\
		echo "== fuzz corpus $(t): $$(ls $(call fuzz_corpus,$(t)) | wc -l) inputs"; \
		FUZZ_TOKIO_EXE=$(BUILD)/tokio-parked \
		$(BUILD)/fuzz/fuzz_$(t) -runs=0 $(call fuzz_corpus,$(t));)

# New inputs that reach new code land in each corpus: commit them. One
# target at a time, FUZZ_TIME seconds each; FUZZ_TARGETS=placement for one.
fuzz: $(FUZZ_BINS) $(BUILD)/tokio-parked
	$(Q)mkdir -p $(BUILD)/fuzz/artifacts
	$(Q)set -e; $(foreach t,$(FUZZ_TARGETS),\
		echo "== fuzz $(t) for $(FUZZ_TIME) s"; \
		FUZZ_TOKIO_EXE=$(BUILD)/tokio-parked $(BUILD)/fuzz/fuzz_$(t) -max_total_time=$(FUZZ_TIME) \
			-max_len=$(FUZZ_MAX_LEN_$(t)) -timeout=10 \
			-artifact_prefix=$(BUILD)/fuzz/artifacts/$(t)- $(call fuzz_corpus,$(t));)

# Integration tests need root: they load BPF and trace real executors (go-http:
# test_tasks' net/http connection).
test-integration: all tokio tokio-matrix go go-versions $(BUILD)/refused-probe $(BUILD)/go-http
	$(Q)BUILD=$(BUILD) GO_VERSIONS="$(GO_VERSIONS)" TOKIO_MATRIX="$(TOKIO_MATRIX)" \
		$(PYTHON) -m unittest discover \
		-s tests/integration -t . -v

# Numbers, not pass/fail: see docs/performance.md.
bench: all tokio tokio-matrix go $(BUILD)/pingpong $(BUILD)/go-http $(BUILD)/tokio-http
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/sample_mode.py
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/sample_mode.py rates
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/sample_mode.py interrupts
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/overhead.py
	$(Q)BUILD=$(BUILD) TOKIO_MATRIX="$(TOKIO_MATRIX)" $(PYTHON) tests/bench/matrix.py
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/switches.py
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/convert.py 3
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/scenarios.py 5
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/tasks_snapshot.py 3
	$(Q)BUILD=$(BUILD) $(PYTHON) tests/bench/waits.py 3

# False and missed alerts, counted over many runs (not in CI: ~16 s a round a scenario).
STRESS_N ?= 50
stress: all
	$(Q)BUILD=$(BUILD) STRESS_N=$(STRESS_N) STRESS_SCENARIOS="$(STRESS_SCENARIOS)" \
		$(PYTHON) tests/stress/alerts.py

# Memory, file descriptors, BPF programs and links of two long attaches,
# minute by minute, and the counts at the end (not in CI: SOAK_S seconds).
SOAK_S ?= 3600
soak: all tokio
	$(Q)BUILD=$(BUILD) SOAK_S=$(SOAK_S) $(PYTHON) tests/soak/soak.py

setup:
	$(Q)scripts/setup.sh

# The man page, from its scdoc source (docs/asynctraced.8.scd).
man: $(BUILD)/asynctraced.8

$(BUILD)/asynctraced.8: docs/asynctraced.8.scd
	$(call msg,SCDOC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(SCDOC) < $< > $@

# The service's files, with the paths this install uses.
$(BUILD)/asynctraced.service: dist/asynctraced.service Makefile
	$(Q)mkdir -p $(@D)
	$(Q)sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' $< > $@

install: $(BUILD)/asynctraced $(BUILD)/asynctraced.8 $(BUILD)/asynctraced.service
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)install -D -m 0755 $(BUILD)/asynctraced $(DESTDIR)$(SBINDIR)/asynctraced
	$(Q)install -D -m 0644 $(BUILD)/asynctraced.8 $(DESTDIR)$(MANDIR)/man8/asynctraced.8
	$(Q)install -D -m 0644 $(BUILD)/asynctraced.service \
		$(DESTDIR)$(SYSTEMDUNITDIR)/asynctraced.service
	$(Q)install -D -m 0644 dist/asynctraced.bash-completion $(DESTDIR)$(BASHCOMPDIR)/asynctraced
	$(Q)install -D -m 0644 dist/asynctraced.sysusers $(DESTDIR)$(SYSUSERSDIR)/asynctraced.conf
	@# the analyser's user, made now on this machine (systemd makes it at boot too)
	$(Q)[ -n "$(DESTDIR)" ] || ! command -v systemd-sysusers >/dev/null || \
		systemd-sysusers $(SYSUSERSDIR)/asynctraced.conf
	@# the options file is the administrator's once installed: never overwritten
	$(Q)[ -e $(DESTDIR)$(SYSCONFDIR)/default/asynctraced ] || \
		install -D -m 0644 dist/asynctraced.default $(DESTDIR)$(SYSCONFDIR)/default/asynctraced

uninstall:
	$(call msg,UNINSTALL,$(DESTDIR)$(PREFIX))
	$(Q)rm -f $(DESTDIR)$(SBINDIR)/asynctraced $(DESTDIR)$(MANDIR)/man8/asynctraced.8 \
		$(DESTDIR)$(SYSTEMDUNITDIR)/asynctraced.service $(DESTDIR)$(BASHCOMPDIR)/asynctraced \
		$(DESTDIR)$(SYSUSERSDIR)/asynctraced.conf
	@# the options file goes only if it is still the one installed
	$(Q)! cmp -s dist/asynctraced.default $(DESTDIR)$(SYSCONFDIR)/default/asynctraced || \
		rm -f $(DESTDIR)$(SYSCONFDIR)/default/asynctraced

clean:
	$(call msg,CLEAN,$(BUILD))
	$(Q)rm -rf $(BUILD)

-include $(wildcard $(BUILD)/src/*.d $(BUILD)/src/*/*.d $(BUILD)/src/*/*/*.d $(BUILD)/fuzz/*.d \
	$(BUILD)/fuzz/src/*.d $(BUILD)/fuzz/src/*/*.d $(BUILD)/fuzz/src/*/*/*.d $(BUILD)/executor/*.d \
	$(BUILD)/executor-pic/*.d $(BUILD)/executor-fp/*.d $(BUILD)/bpf/*.d $(BUILD)/tests/*.d)
