# Makefile - one build of ringside: CPU-only where nvcc/NCCL are absent (CUDA=0), CUDA + NCCL + cuBLAS where present
#
#   make              build build/ringside (CUDA=auto: CUDA when nvcc and NCCL are found)
#   make CUDA=0       CPU-only build
#   make deps         install missing Debian packages (apt-get; idempotent)
#   make deps-slurm   install Slurm and munge for the one-node Slurm test (make test runs it)
#   make demo         deps, build, run the main job
#   make test         deps, build both variants, run the whole suite
#   make asan         build with ASan + UBSan and run the suite

CUDA      ?= auto
BUILD     ?= build
CC        ?= gcc
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)),/usr/local/cuda)
DEB_PKGS  := pkg-config libzmq3-dev libcjson-dev libopenblas-dev zlib1g-dev python3-matplotlib \
             openmpi-bin libopenmpi-dev tcpdump valgrind
SLURM_DEB := slurm-wlm munge
SAN       ?=
# the builds that demo, test, asan and tsan make use every core, unless make was given -j itself
JOBS      ?= $(shell nproc 2>/dev/null || echo 1)
PAR       := $(if $(findstring -j,$(MAKEFLAGS)),,-j$(JOBS))

# ---- dependencies -------------------------------------------------------------------------
PKGS      := libzmq libcjson openblas zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

NCCL_H    := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h))
NCCL_LIB  := $(firstword $(wildcard $(CUDA_HOME)/lib64/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so /usr/local/lib/libnccl.so))

ifeq ($(CUDA),auto)
  ifneq ($(and $(NVCC),$(NCCL_H),$(NCCL_LIB)),)
    USE_CUDA := 1
  else
    USE_CUDA := 0
  endif
else
  USE_CUDA := $(CUDA)
endif

WARN      := -Wall -Wextra -Wshadow -Wno-unused-parameter
OPT       ?= -O2 -g
CFLAGS    += $(OPT) -std=gnu11 $(WARN) -pthread -MMD -MP $(PKG_CFLAGS) $(SAN) -I. \
             -DRS_GIT='"$(shell git describe --always --dirty 2>/dev/null || echo unknown)"'
LDFLAGS   += -pthread $(SAN)
LDLIBS    := $(PKG_LIBS) -lm -ldl

# ---- sources ------------------------------------------------------------------------------
# the floors, bottom up (tests/floors.py: nothing includes a floor above its own)
FLOORS    := base kernels data model net engine allreduce ps
LIB_C     := $(foreach f,$(FLOORS),$(wildcard $(f)/*.c)) \
             $(filter-out experiments/main.c,$(wildcard experiments/*.c))
NOCUDA_C  := kernels/nocuda.c allreduce/nccl_none.c   # the CPU-only build's stand-ins for the .cu files
LIB_C     := $(filter-out $(NOCUDA_C),$(LIB_C))
CU_SRC    := $(foreach f,$(FLOORS),$(wildcard $(f)/*.cu))

ifeq ($(USE_CUDA),1)
  VARIANT   := cuda
  CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
  NVFLAGS   := -O2 -g -std=c++17 $(CUDA_ARCH) -I. $(PKG_CFLAGS) -Xcompiler "-Wall -Wextra -Wno-unused-parameter -fPIC" -MMD -MP
  CFLAGS    += -I$(CUDA_HOME)/include
  LDLIBS    += -L$(CUDA_HOME)/lib64 -L$(dir $(NCCL_LIB)) -lnccl -lcudart_static -ldl -lrt -lstdc++ \
               -Wl,-rpath,$(CUDA_HOME)/lib64
  LIB_OBJ   := $(LIB_C:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
else
  VARIANT   := cpu
  LIB_OBJ   := $(LIB_C:%.c=$(BUILD)/obj/%.o) $(NOCUDA_C:%.c=$(BUILD)/obj/%.o)
endif

BIN       := $(BUILD)/ringside
LIB       := $(BUILD)/libringside.a
TEST_C    := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_C:tests/%.c=$(BUILD)/tests/%)
ifeq ($(USE_CUDA),1)   # CUDA-only probes (tests/test_*.cu), built with nvcc, in CUDA builds only
  TEST_BIN += $(patsubst tests/%.cu,$(BUILD)/tests/%,$(wildcard tests/test_*.cu))
endif

# ---- targets ------------------------------------------------------------------------------
.PHONY: all deps deps-slurm demo test test-unit asan asan-quick clean info-build

BENCH_BIN := $(BUILD)/bench/rest_alone
all: info-build $(BIN) $(TEST_BIN) $(BENCH_BIN)

info-build:
	@printf '# ringside build (%s) in %s\n' "$(VARIANT)" "$(BUILD)"
	@for p in $(PKGS); do if pkg-config --exists $$p; then echo "#   ✓ $$p $$(pkg-config --modversion $$p)"; else echo "#   ✗ $$p (run: make deps)"; fi; done
	@if [ -n "$(NVCC)" ]; then echo "#   ✓ nvcc $(NVCC)"; else echo "#   ✗ nvcc (CPU-only build)"; fi
	@if [ -n "$(NCCL_H)" ] && [ -n "$(NCCL_LIB)" ]; then echo "#   ✓ nccl $(NCCL_LIB)"; else echo "#   ✗ nccl"; fi
	@echo "#   → CUDA=$(USE_CUDA)"

$(BIN): $(BUILD)/obj/experiments/main.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The CPU kernels' and the wire codec's loops vectorized (GCC's -O2 cost model leaves every one of them scalar; a
# compiler without these options, clang, vectorizes at -O2 already); no -ffast-math, so no sum is
# reordered and the bits stay the same
VEC_CFLAGS := $(shell $(CC) -ftree-vectorize -fvect-cost-model=cheap -x c -c -o /dev/null /dev/null \
                2>/dev/null && echo -ftree-vectorize -fvect-cost-model=cheap)
# -fno-trapping-math lets a float select (a clamp, x < c ? c : x) become a vector blend instead of a
# branch, so that the loops around ops_expf vectorize, and -fno-math-errno lets sqrtf be the
# instruction, so that AdamW's loop does; neither changes a value (no reassociation, NaN and signed
# zeros kept; sqrt is correctly rounded either way, and no kernel reads errno)
NOTRAP_CFLAGS := $(shell $(CC) -fno-trapping-math -fno-math-errno -x c -c -o /dev/null /dev/null 2>/dev/null && echo -fno-trapping-math -fno-math-errno)
# SIMD=auto (default): the CPU kernels for AVX2 where the building machine has it and the compiler
# takes -mavx2, else x86-64's baseline (SSE2); SIMD=avx2 or SIMD=sse2 to choose (make clean
# first: the object is not rebuilt on a change of SIMD alone). -mno-fma: AVX2 and SSE2 builds
# make the same operations, so the same bits, 8 floats a vector instead of 4 (gpt's step 16%
# shorter). A build for AVX2 refuses to open a device on a CPU without it (kernels/device.c).
SIMD ?= auto
ifeq ($(SIMD),auto)
SIMD := $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && $(CC) -mavx2 -mno-fma -x c -c -o /dev/null /dev/null \
          2>/dev/null && echo avx2 || echo sse2)
endif
ifeq ($(SIMD),avx2)
SIMD_CFLAGS := -mavx2 -mno-fma
else ifneq ($(SIMD),sse2)
$(error SIMD=$(SIMD): expected auto, avx2 or sse2)
endif
$(BUILD)/obj/kernels/ops_cpu.o: CFLAGS += $(VEC_CFLAGS) $(NOTRAP_CFLAGS) $(SIMD_CFLAGS)
# the wire's codec decodes and adds in two roundings everywhere (no fused multiply-add where the
# target has one), so that decode_add gives the bits of decode then add; -fno-trapping-math lets
# its branch-free FP8 encoder vectorise (2.2x; no value changes: nothing reads the FP flags), and
# that encoder picks AVX2 or the baseline at load time (target_clones) rather than by SIMD=
NOFMA_CFLAGS := $(shell $(CC) -ffp-contract=off -x c -c -o /dev/null /dev/null 2>/dev/null && echo -ffp-contract=off)
$(BUILD)/obj/base/codec.o: CFLAGS += $(VEC_CFLAGS) $(NOFMA_CFLAGS) $(NOTRAP_CFLAGS)

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.cu.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# the benchmark programs that use the library (experiments/benchmarks/NAME.c; the others there are
# built by their scripts)
$(BUILD)/bench/%: experiments/benchmarks/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# $(call apt_install,PACKAGES,NAME,FAIL): installs the missing ones of PACKAGES with apt-get (as root;
# otherwise prints the sudo line), saying which; FAIL is the exit status when that cannot be done
apt_install = missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "\# $(2): all Debian packages present ($(strip $(1)))"; \
	elif [ "$$(id -u)" = 0 ]; then echo "\# $(2): installing$$missing"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null 2>&1 || (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null)) \
	  && echo "\# $(2): installed$$missing" || { echo "ringside: $(if $(filter 0,$(3)),note,error): apt-get install$$missing failed" >&2; exit $(3); }; \
	else echo "ringside: $(if $(filter 0,$(3)),note,error): missing Debian packages:$$missing" >&2; \
	  echo "  run: sudo apt-get install -y$$missing" >&2; exit $(3); fi

deps:
	@$(call apt_install,$(DEB_PKGS),deps,1)

# Slurm for tests/integration/slurm.sh only (not the demo): without it that test SKIPs, so a
# failure here is said and not fatal
deps-slurm:
	@$(call apt_install,$(SLURM_DEB),deps-slurm,0)

demo: deps
	@$(MAKE) --no-print-directory $(PAR) all
	@bash experiments/demo.sh $(BIN)

# plots DIR=FOLDER [PLOT_ARGS='--x bucket-mb ...']: the figures of a result folder, drawn by a python3
# that imports matplotlib wherever it is (plots/find_python.sh: $PYTHON, PATH's, the distribution's)
.PHONY: plots
plots:
	@test -n "$(DIR)" || { echo "usage: make plots DIR=FOLDER [PLOT_ARGS='--x AXIS --facet AXIS --filter KEY=VALUE']" >&2; exit 2; }
	@PY=$$(bash plots/find_python.sh) && "$$PY" plots/plot.py "$(DIR)" $(PLOT_ARGS)

# the suite, then the bounded sanitizer checks: ThreadSanitizer's whole check, and ASan + UBSan over
# the unit tests and the multi-rank scripts where threads, servers and the launcher live
ASAN_QUICK = async_copies bench dataparallel equivalence launcher predict ps secure tree
test: deps deps-slurm
	@$(MAKE) --no-print-directory $(PAR) all
	@$(MAKE) --no-print-directory $(PAR) BUILD=build/nocuda CUDA=0 all
	@bash tests/run.sh $(BUILD)
	@$(MAKE) --no-print-directory tsan
	@$(MAKE) --no-print-directory asan-quick

test-unit: all
	@bash tests/run.sh $(BUILD) unit

ASAN_BUILD = $(MAKE) --no-print-directory $(PAR) BUILD=build/asan CUDA=0 OPT="-O1 -g -fno-omit-frame-pointer" \
	SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" all
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
asan:
	@$(ASAN_BUILD)
	@$(ASAN_ENV) bash tests/run.sh build/asan
# test_ctrl waits out its peers' timeouts (15 s) and runs plain and under TSan; its parsers are fuzzed under ASan
asan-quick:
	@$(ASAN_BUILD)
	@$(ASAN_ENV) UNIT_SKIP=test_ctrl bash tests/run.sh build/asan $(ASAN_QUICK)

clean:
	rm -rf build

# ==== reliability: fuzz, tsan (docs/reliability.md) ===========================================
#   make fuzz         every libFuzzer harness in tests/fuzz for FUZZ_RUNS (10^6) executions
#   make fuzz-short   every harness for FUZZ_SECONDS (20 s) each: what the test suite runs
#   make tsan         ThreadSanitizer build (CUDA=0): the threaded unit tests and colocated runs
# The fuzz targets need clang with libFuzzer (make fuzz-deps installs clang and libclang-rt-14-dev);
# `make test` does not.
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build/fuzz
FUZZ_RUNS    ?= 1000000
FUZZ_SECONDS ?= 20
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_DEB     := clang libclang-rt-14-dev

.PHONY: fuzz fuzz-short fuzz-build fuzz-deps fuzz-harnesses tsan

fuzz-deps:
	@if bash tests/fuzz/run.sh --check "$(FUZZ_CC)" >/dev/null 2>&1; then echo "# fuzz-deps: $(FUZZ_CC) with libFuzzer present"; \
	elif [ "$$(id -u)" = 0 ]; then echo "# fuzz-deps: installing $(FUZZ_DEB)"; \
	  (apt-get install -y -q $(FUZZ_DEB) >/dev/null 2>&1 || (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(FUZZ_DEB) >/dev/null)) \
	  || { echo "ringside: error: apt-get install $(FUZZ_DEB) failed" >&2; exit 1; }; \
	else echo "ringside: error: no $(FUZZ_CC) with libFuzzer; run: sudo apt-get install -y $(FUZZ_DEB)" >&2; exit 1; fi

# The library instrumented for coverage (fuzzer-no-link) with ASan + UBSan, then one binary per harness.
fuzz-build: fuzz-deps
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CUDA=0 CC=$(FUZZ_CC) OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" fuzz-harnesses

fuzz-harnesses: $(FUZZ_NAMES:%=$(BUILD)/fuzz_%)

# A harness that includes a module's .c (to reach its static handler) defines that module's
# symbols itself, so the archive's copy is not linked.
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(LIB)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

fuzz: fuzz-build
	@bash tests/fuzz/run.sh $(FUZZ_BUILD) -runs=$(FUZZ_RUNS)

fuzz-short: fuzz-build
	@bash tests/fuzz/run.sh $(FUZZ_BUILD) -max_total_time=$(FUZZ_SECONDS)

tsan:
	@$(MAKE) --no-print-directory $(PAR) BUILD=build/tsan CUDA=0 OPT="-O1 -g -fno-omit-frame-pointer" SAN="-fsanitize=thread" all
	@bash tests/tsan/run.sh build/tsan
# ==== end of reliability ==========================================================================

.PRECIOUS: $(BUILD)/obj/%.cu.o
-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
