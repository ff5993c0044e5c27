# tests/nvtx.mk - programs annotated with NVIDIA's NVTX 3 (header-only: the
# CUDA toolkit's include/nvtx3, or the same headers in the nvidia-nvtx wheel
# PyTorch installs), for tests/e2e/test_phases.py.  Each tests/progs/nvtx/X.c
# becomes $(BUILD)/tests/progs/X, linked to the simulated runtime.  Built by
# `make test-bins` only when a header is found ($(NVTX_INC)); nothing is
# vendored, and the tests skip without the programs, saying why.

CUDA_HOME ?= /usr/local/cuda
TORCH_VENV ?= $(or $(CUMEMTRACE_TORCH_VENV),$(HOME)/.cache/cumemtrace/torch-venv)
NVTX_HEADERS := $(wildcard $(CUDA_HOME)/include/nvtx3/nvToolsExt.h \
    $(TORCH_VENV)/lib/python3*/site-packages/nvidia/cu*/include/nvtx3/nvToolsExt.h)
NVTX_INC ?= $(patsubst %/nvtx3/nvToolsExt.h,%,$(firstword $(NVTX_HEADERS)))

ifneq ($(NVTX_INC),)
NVTX_PROGS := $(patsubst tests/progs/nvtx/%.c,$(BUILD)/tests/progs/%,$(wildcard tests/progs/nvtx/*.c))
# -isystem: NVIDIA's header is not ours to hold to -Wextra
$(NVTX_PROGS): $(BUILD)/tests/progs/%: tests/progs/nvtx/%.c $(SIMRT)
	@mkdir -p $(dir $@)
	$(CC) $(PROG_CFLAGS) -Itests/progs -isystem $(NVTX_INC) -o $@ $< \
	    -L$(BUILD)/sim -lcudart -ldl -lpthread
test-bins test-progs: $(NVTX_PROGS)
endif

# `make bench`: what NVTX ranges cost under the tracer (scripts/bench_phases.py,
# results in docs/performance.md, "Phases").
.PHONY: bench-phases
ifneq ($(NVTX_INC),)
$(BUILD)/tests/bench/bench_nvtx: tests/bench/bench_nvtx.c $(SIMRT)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g -Wall -Wextra -Werror -Isrc/common -isystem $(NVTX_INC) -o $@ $< \
	    -L$(BUILD)/sim -lcudart -ldl -lpthread
bench-phases: all $(BUILD)/tests/bench/bench_nvtx
	$(PYTHON) scripts/bench_phases.py --build $(BUILD) --write docs/performance.md
else
bench-phases:
	@echo "cumemtrace: bench: no NVTX 3 header (CUDA toolkit or the PyTorch venv's nvidia-nvtx); the phases rows are skipped"
endif
bench: bench-phases
