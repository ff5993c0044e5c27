# tests/abi.mk - `make test-abi`: our own declaration of the CUDA ABI
# (src/common/cuda_types.h, cuda_api.h and the CUDA prototypes of
# src/preload/interpose/resolve.h) checked against NVIDIA's cuda.h and
# cuda_runtime_api.h: every prototype (compiled as C and as C++), every
# type's layout and every value.  Needs the toolkit's headers in
# $(CUDA_INCLUDE) (default $(CUDA_HOME)/include, CUDA_HOME default
# /usr/local/cuda); says it skipped, and succeeds, without them.  Generated
# files and both probe outputs go to $(BUILD)/tests/abi/.  `make test` runs
# the same check through tests/e2e/test_abi.py.  See tests/abi/check_abi.py.

CUDA_HOME    ?= /usr/local/cuda
CUDA_INCLUDE ?= $(CUDA_HOME)/include

.PHONY: test-abi
test-abi:
	@if [ -f "$(CUDA_INCLUDE)/cuda.h" ] && [ -f "$(CUDA_INCLUDE)/cuda_runtime_api.h" ]; then \
	    $(PYTHON) tests/abi/check_abi.py --cuda-include "$(CUDA_INCLUDE)" \
	        --out "$(BUILD)/tests/abi" --cc "$(CC)" --cxx "$(CXX)"; \
	else \
	    echo "test-abi: skipped: no cuda.h and cuda_runtime_api.h in $(CUDA_INCLUDE) (no CUDA toolkit; set CUDA_HOME or CUDA_INCLUDE)"; \
	fi
