# gpushim: `make` builds the shim and the test programs, `make test` runs the tests, `make demo` runs a
# sample CUDA program through gpushim on the emulator.
PYTHON ?= python3
# nvcc 13: /usr/local/cuda, else the PATH's, else one assembled from PyPI wheels by tools/install_nvcc.sh
CUDA_HOME ?= $(shell if [ -x /usr/local/cuda/bin/nvcc ]; then echo /usr/local/cuda; \
	elif command -v nvcc >/dev/null 2>&1; then dirname "$$(dirname "$$(command -v nvcc)")"; \
	else echo "$$HOME/.cache/gpushim/cuda-13"; fi)
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC ?= cc
CFLAGS ?= -O2 -g
SHIM_CFLAGS = -std=c11 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -pthread $(CFLAGS)
SHIM_SRC = $(wildcard shim/*.c shim/*.h)
ADAPTER_DATA = $(wildcard adapters/cudart/*/*.json adapters/cudart/*/exports.txt)
SHIM_LIB = gpushim/lib/libgpushim.so
CUDA_LIB = $(if $(wildcard $(CUDA_HOME)/lib64),$(CUDA_HOME)/lib64,$(CUDA_HOME)/lib)
PROGRAMS = $(patsubst tests/programs/%.cu,tests/programs/bin/%,$(wildcard tests/programs/*.cu))

.PHONY: all shim programs test demo lint bench gpu-check clean install deps fuzz

all: shim programs

shim: $(SHIM_LIB)

shim/gen/exports.c shim/gen/libgpushim.map: shim/generate.py gpushim/protocol.py $(ADAPTER_DATA) $(wildcard shim/*.c)
	$(PYTHON) shim/generate.py

$(SHIM_LIB): shim/gen/exports.c shim/gen/libgpushim.map $(SHIM_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(SHIM_CFLAGS) -shared -o $@ shim/gen/exports.c -Wl,--version-script=shim/gen/libgpushim.map \
		-Wl,-z,defs -ldl
	@! ldd $@ | grep -q libpython || (echo "libgpushim.so must not link libpython" && false)

programs: $(PROGRAMS)

$(NVCC):
	bash tools/install_nvcc.sh

# Test programs link libcudart dynamically (-cudart shared): a shim can only intercept those.
tests/programs/bin/%: tests/programs/%.cu tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -o $@ $< -Xlinker -rpath,$(CUDA_LIB)

install:
	$(PYTHON) -m pip install -e '.[test]'

# On a fresh machine the first `make demo` / `make test` installs the Python dependencies (editable).
deps:
	@$(PYTHON) -c "import msgpack, click, numpy, rich, elftools, zstandard, pytest, cffi, gpushim.adapters" \
		2>/dev/null || $(PYTHON) -m pip install --quiet -e '.[test]'

test: deps all
	$(PYTHON) -m pytest -q tests

demo: deps all
	$(PYTHON) -m gpushim run -- tests/programs/bin/demo

bench: all
	$(PYTHON) bench/run.py

# On a machine with an NVIDIA GPU: installs what it needs, builds, runs tests/e2e against the cuda backend
# and prints sync latency, launch cost and copy bandwidth through gpushim beside the native numbers.
gpu-check:
	PYTHON=$(PYTHON) bash tools/gpu_check.sh

# The protocol fuzzer of tests/server for 10 minutes (the test suite runs it for 20 s); FUZZ_SEED picks the run.
fuzz: deps all
	GPUSHIM_FUZZ_SECONDS=$${FUZZ_SECONDS:-600} GPUSHIM_FUZZ_SEED=$${FUZZ_SEED:-$$(date +%s)} \
		$(PYTHON) -m pytest -q -s tests/server/test_protocol_fuzz.py

lint:
	ruff check gpushim adapters tests bench shim/generate.py

clean:
	rm -rf shim/gen gpushim/lib tests/programs/bin build *.egg-info
