# bracket: the two commands a fresh Debian machine needs are `make demo` and `make test`.
# Each installs the Debian packages it lacks first (apt-get, through sudo when not root).

BUILD ?= build
CMAKE_FLAGS ?=
NP ?= 4
PLAN ?=
DEB_PKGS := build-essential cmake ninja-build pkg-config openmpi-bin libopenmpi-dev \
            hwloc libhwloc-dev libzmq3-dev libmsgpack-dev libjansson-dev libcmocka-dev \
            python3 iproute2 procps util-linux
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-run-as-root)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps build demo test test-sanitize bench fuzz clean

all: build

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "bracket: installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps
	@[ -f $(BUILD)/CMakeCache.txt ] || cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $$(nproc)

# A real B -> C -> B' bracket on this machine: the cuda backend where a GPU and a
# CUDA build are present, the cpu backend otherwise.
demo: build
	@./tests/run-demo.sh $(BUILD) $(NP) $(PLAN)

# Skipped tests (GPU tests without a GPU, Slurm without root) say why: printed after the run.
test: build
	@cd $(BUILD) && { ctest --output-on-failure --timeout 900; rc=$$?; \
	  $(CURDIR)/scripts/list-skips.sh Testing/Temporary/LastTest.log | sed 's/^/skipped: /'; \
	  exit $$rc; }

# The same suite (gpu tests left out, and the Slurm test: srun's plumbing, run again by CI's
# real Slurm job) on a build of the C code with AddressSanitizer and UndefinedBehaviorSanitizer,
# cpu backend only, in $(BUILD)-sanitize; CI runs it after `test`.
test-sanitize: deps
	@[ -f $(BUILD)-sanitize/CMakeCache.txt ] || cmake -S . -B $(BUILD)-sanitize $(GENERATOR) \
	  -DBK_SANITIZE=ON -DBK_CUDA=OFF -DBK_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD)-sanitize -j $$(nproc)
	@cd $(BUILD)-sanitize && ctest --output-on-failure --timeout 900 -LE gpu -E '^it_test_slurm$$'

bench: build
	@./tests/bench/run-all.sh $(BUILD)

# The libFuzzer harnesses of tests/fuzz, FUZZ_S seconds each, on a clang build with ASan and
# UBSan in $(BUILD)-fuzz (needs clang, which the build itself does not: tests/fuzz/README.md).
FUZZ_S ?= 60
fuzz: deps
	@./tests/fuzz/run.sh $(FUZZ_S) $(BUILD)-fuzz

clean:
	rm -rf $(BUILD)
