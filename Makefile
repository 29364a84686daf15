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
ADAPTER_DATA = $(wildcard adapters/cudart/*/*.json adapters/cudart/*/exports.txt adapters/cudadrv/*/*.json adapters/cudadrv/*.json)
SHIM_LIB = gpushim/lib/libgpushim.so
FAST_LIB = gpushim/lib/libgsfast.so
# The driver face: libgpushim.so has the soname libcuda.so.1, and this directory links that name to it, so
# dlopen("libcuda.so.1") and -lcuda find the one loaded object (one session, one connection).
DRIVER_DIR = gpushim/lib/driver
DRIVER_LIB = $(DRIVER_DIR)/libcuda.so.1
# What -lcuda programs link against: the driver's names only (as the toolkit's stubs/libcuda.so), so their
# libcudart stays a dependency of their own.
DRIVER_STUB = $(DRIVER_DIR)/stubs/libcuda.so
CUDA_LIB = $(if $(wildcard $(CUDA_HOME)/lib64),$(CUDA_HOME)/lib64,$(CUDA_HOME)/lib)
PROGRAMS = $(patsubst tests/programs/%.cu,tests/programs/bin/%,$(wildcard tests/programs/*.cu)) \
	$(patsubst tests/programs/%.c,tests/programs/bin/%,$(wildcard tests/programs/drv_*.c)) \
	$(patsubst tests/programs/drv_kernels/%.cu,tests/programs/bin/drv_kernels/%.ptx,$(wildcard tests/programs/drv_kernels/*.cu)) \
	tests/programs/bin/drv_kernels/vecadd.fatbin tests/programs/bin/drv_kernels/vecadd.cubin
# Per-thread default stream builds (nvcc --default-stream per-thread) of the programs that test stream semantics
PTDS_PROGRAMS = tests/programs/bin/sync_ptds
# nvcc's default builds (the CUDA runtime linked statically) of a representative subset: they reach gpushim
# through its libcuda.so.1 and the driver's private tables (shim/drv_export*.c)
STATIC_PROGRAMS = $(addprefix tests/programs/bin/static/,device_query memory streams sync kernels)
# Relocatable device code (tests/programs/rdc/, rules below)
RDC_PROGRAMS = tests/programs/bin/rdc_whole tests/programs/bin/rdc_separate tests/programs/bin/rdc_noptx \
	tests/programs/bin/static/rdc_whole tests/programs/bin/static/dynpar
RDC_SOURCES = tests/programs/rdc/main.cu tests/programs/rdc/lib.cu

.PHONY: all shim programs test demo lint bench gpu-check clean install deps soak fuzz

all: shim programs

shim: $(SHIM_LIB) $(DRIVER_LIB) $(DRIVER_STUB) $(FAST_LIB)

SHIM_GEN = shim/gen/exports.c shim/gen/libgpushim.map shim/gen/ops.h shim/gen/errors.h shim/gen/layouts.c \
	shim/gen/drv_table.c shim/gen/drv_errors.h shim/gen/libcuda_stub.c shim/gen/drv_export_tables.h
# generate.py rewrites only the files whose content changes, so a stamp records that it ran
SHIM_STAMP = shim/gen/.stamp
# The list of shim sources, rewritten only when it changes: a file removed (which leaves every other one older
# than the library) still regenerates gen/exports.c and rebuilds the library.
SHIM_LIST = shim/gen/.sources
$(SHIM_LIST): FORCE
	@mkdir -p $(dir $@)
	@echo '$(sort $(SHIM_SRC))' | cmp -s - $@ || echo '$(sort $(SHIM_SRC))' > $@
FORCE:
.PHONY: FORCE

$(SHIM_STAMP): shim/generate.py gpushim/protocol.py $(ADAPTER_DATA) $(wildcard shim/*.c) $(SHIM_LIST)
	$(PYTHON) shim/generate.py
	@touch $@
$(SHIM_GEN): $(SHIM_STAMP) ;

# Libraries are linked to a temporary file and renamed into place: running clients and servers keep the file
# they mapped (writing over it in place gives them "file too short" or worse).
$(SHIM_LIB): $(SHIM_STAMP) $(SHIM_SRC) $(SHIM_LIST)
	@mkdir -p $(dir $@)
	$(CC) $(SHIM_CFLAGS) -shared -o $@.tmp shim/gen/exports.c -Wl,--version-script=shim/gen/libgpushim.map \
		-Wl,-soname,libcuda.so.1 -Wl,-z,defs -ldl
	@! ldd $@.tmp | grep -q libpython || (echo "libgpushim.so must not link libpython" && rm -f $@.tmp && false)
	mv -f $@.tmp $@

# The session worker's fast path (gpushim/server/fastpath.py loads it with ctypes; without it the worker runs
# its Python path)
$(FAST_LIB): gpushim/server/fastpath.c
	@mkdir -p $(dir $@)
	$(CC) $(SHIM_CFLAGS) -shared -o $@.tmp $<
	mv -f $@.tmp $@

$(DRIVER_LIB): $(SHIM_LIB)
	@mkdir -p $(DRIVER_DIR)
	ln -sfn ../libgpushim.so $(DRIVER_LIB)
	ln -sfn libcuda.so.1 $(DRIVER_DIR)/libcuda.so

$(DRIVER_STUB): shim/gen/libcuda_stub.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -o $@ $< -Wl,-soname,libcuda.so.1

programs: $(PROGRAMS) $(PTDS_PROGRAMS) $(STATIC_PROGRAMS) $(RDC_PROGRAMS)

$(NVCC):
	bash tools/install_nvcc.sh

# Test programs link libcudart dynamically (-cudart shared): a shim can only intercept those.
tests/programs/bin/%: tests/programs/%.cu tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -o $@ $< -Xlinker -rpath,$(CUDA_LIB)

# Tensor cores (wmma for bf16/tf32/f64, mma.m16n8k16, ldmatrix) need sm_80: -arch=sm_80 embeds sm_80 code and
# compute_80 PTX, which the emulator runs.
tests/programs/bin/tensor_cores: tests/programs/tensor_cores.cu tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -arch=sm_80 -o $@ $< -Xlinker -rpath,$(CUDA_LIB)
# Programs whose kernels need sm_80+/sm_90 PTX (redux with member masks, mbarrier, cp.async, griddepcontrol):
# built for sm_90 (the fat binary carries compute_90 PTX, which the emulator runs)
SM90_PROGRAMS = $(addprefix tests/programs/bin/,labeled_reduce async_barrier warp_reduce fp8)
$(SM90_PROGRAMS): tests/programs/bin/%: tests/programs/%.cu tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -arch=sm_90 -o $@ $< -Xlinker -rpath,$(CUDA_LIB)

tests/programs/bin/%_ptds: tests/programs/%.cu tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared --default-stream per-thread -o $@ $< -Xlinker -rpath,$(CUDA_LIB)

# Relocatable device code (tests/programs/rdc/): linked by nvcc in one step, compiled separately (-dc) and
# device-linked (-dlink) before a host link, and built without PTX (which the emulator must refuse, naming why).
# dynpar.cu launches kernels from kernels: -rdc=true and libcudadevrt.

tests/programs/bin/dynpar: tests/programs/dynpar.cu tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -rdc=true -o $@ $< -lcudadevrt -Xlinker -rpath,$(CUDA_LIB)

tests/programs/bin/rdc_whole: $(RDC_SOURCES) tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -rdc=true -o $@ $(RDC_SOURCES) -Xlinker -rpath,$(CUDA_LIB)

tests/programs/bin/static/dynpar: tests/programs/dynpar.cu tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -rdc=true -o $@ $< -lcudadevrt

tests/programs/bin/static/rdc_whole: $(RDC_SOURCES) tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -rdc=true -o $@ $(RDC_SOURCES)

tests/programs/bin/rdc_separate: $(RDC_SOURCES) tests/programs/common.h | $(NVCC)
	@mkdir -p $@.o.d
	$(NVCC) -dc -o $@.o.d/main.o tests/programs/rdc/main.cu
	$(NVCC) -dc -o $@.o.d/lib.o tests/programs/rdc/lib.cu
	$(NVCC) -dlink -o $@.o.d/dlink.o $@.o.d/main.o $@.o.d/lib.o
	$(CXX) -o $@ $@.o.d/main.o $@.o.d/lib.o $@.o.d/dlink.o -L$(CUDA_LIB) -lcudart -Wl,-rpath,$(CUDA_LIB)

tests/programs/bin/rdc_noptx: $(RDC_SOURCES) tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -rdc=true -gencode arch=compute_75,code=sm_75 -o $@ $(RDC_SOURCES) \
		-Xlinker -rpath,$(CUDA_LIB)

tests/programs/bin/static/kernels: tests/programs/kernels/main.cu tests/programs/kernels/tu2.cu | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -o $@ $^

tests/programs/bin/static/%: tests/programs/%.cu tests/programs/common.h | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -o $@ $<

# Driver-API test programs: C host code linked with -lcuda (gpushim's libcuda.so.1); their kernels are PTX,
# a fat binary and a cubin built from tests/programs/drv_kernels/.
tests/programs/bin/drv_%: tests/programs/drv_%.c tests/programs/drv_common.h $(DRIVER_STUB)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror -I$(CUDA_HOME)/include -o $@ $< -L$(dir $(DRIVER_STUB)) -lcuda -lm -ldl

# Runtime and driver API in one program: -cudart shared like the others, and gpushim's libcuda.
tests/programs/bin/mixed_drv: tests/programs/mixed_drv.cu tests/programs/common.h $(DRIVER_STUB) | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -o $@ $< -Xlinker -rpath,$(CUDA_LIB) -L$(dir $(DRIVER_STUB)) -lcuda
tests/programs/bin/bad_handles: tests/programs/bad_handles.cu tests/programs/common.h tests/programs/drv_common.h \
		$(DRIVER_STUB) | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cudart shared -o $@ $< -Xlinker -rpath,$(CUDA_LIB) -L$(dir $(DRIVER_STUB)) -lcuda

tests/programs/bin/drv_kernels/%.ptx: tests/programs/drv_kernels/%.cu | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -ptx -rdc=true -arch=compute_75 -o $@ $<

tests/programs/bin/drv_kernels/%.fatbin: tests/programs/drv_kernels/%.cu | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -fatbin -gencode arch=compute_75,code=compute_75 -gencode arch=compute_90,code=sm_90 -o $@ $<

tests/programs/bin/drv_kernels/%.cubin: tests/programs/drv_kernels/%.cu | $(NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) -cubin -arch=sm_90 -o $@ $<

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

# Clients killed at random moments for 5 minutes; nothing may be left behind (tests/e2e/test_soak.py).
soak: deps all
	GPUSHIM_SOAK_SECONDS=$${GPUSHIM_SOAK_SECONDS:-300} $(PYTHON) -m pytest -q tests/e2e/test_soak.py

bench: all
	$(PYTHON) bench/run.py
	$(PYTHON) bench/sched_bench.py

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
