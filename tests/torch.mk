# tests/torch.mk - `make test-torch`: real PyTorch (the PyPI CUDA wheel) on
# the simulated GPU, under the tracer (tests/torch/).  The venv comes from
# scripts/torch-env.sh (created on first use: several GB, once; location
# $CUMEMTRACE_TORCH_VENV, default ~/.cache/cumemtrace/torch-venv).  Not part
# of `make test`, which must stay fast and needs no network; CI runs both.

.PHONY: test-torch
test-torch: all
	@py=$$(scripts/torch-env.sh) && \
	    CUMEMTRACE_BUILD=$(abspath $(BUILD)) $$py -m pytest -q -p no:cacheprovider tests/torch \
	    --ignore=tests/torch/models

# `make test-models`: real models (MLP, transformer, CNN, GPT-2, Llama-shaped)
# on the simulated GPU's stand-in libraries (tests/torch/models/); the venv
# also holds transformers (scripts/torch-env.sh).  CI runs it after test-torch.
.PHONY: test-models
test-models: all
	@py=$$(scripts/torch-env.sh) && \
	    CUMEMTRACE_BUILD=$(abspath $(BUILD)) $$py -m pytest -q -p no:cacheprovider tests/torch/models

# `make bench`'s PyTorch phases row (scripts/bench_torch_phases.py): the
# global module and optimizer hooks' cost on a small real model's step.
# cg_requests.c (its rule in tests.mk) needs valgrind's callgrind.h; without
# it only the wall clock is measured.
ifneq ($(wildcard /usr/include/valgrind/callgrind.h),)
bench-torch-phases: $(BUILD)/tests/bench/libcg_requests.so
endif
.PHONY: bench-torch-phases
bench-torch-phases: all
	$(PYTHON) scripts/bench_torch_phases.py --build $(BUILD) --write docs/performance.md
bench: bench-torch-phases
