# tests/nvidia.mk - programs built by NVIDIA's nvcc against NVIDIA's real
# CUDA runtime, for tests/e2e/test_nvidia_runtime.py: each tests/nvidia/X.cu
# becomes $(BUILD)/tests/nvidia/X_shared (-cudart shared, needs the real
# libcudart.so at run time) and X_static (-cudart static, the runtime inside
# the program).  Built by `make test-bins` only when nvcc exists ($(NVCC),
# default $(CUDA_HOME)/bin/nvcc); the test skips without them.  No sanitizer
# flags: these programs stand for a user's binary, not for code under test.

CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(CUDA_HOME)/bin/nvcc
NVCC_FLAGS ?= -O1 -g -Xcompiler -Wall,-Wextra -Werror all-warnings
NVCC_FOUND := $(shell command -v "$(NVCC)" 2>/dev/null)

ifneq ($(NVCC_FOUND),)
NVIDIA_SRC    := $(wildcard tests/nvidia/*.cu)
NVIDIA_SHARED := $(NVIDIA_SRC:tests/nvidia/%.cu=$(BUILD)/tests/nvidia/%_shared)
NVIDIA_STATIC := $(NVIDIA_SRC:tests/nvidia/%.cu=$(BUILD)/tests/nvidia/%_static)

# One compile, two links (nvcc's front end is the slow part).
$(BUILD)/tests/nvidia/%.o: tests/nvidia/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@
$(NVIDIA_SHARED): $(BUILD)/tests/nvidia/%_shared: $(BUILD)/tests/nvidia/%.o
	$(NVCC) -cudart shared -o $@ $<
$(NVIDIA_STATIC): $(BUILD)/tests/nvidia/%_static: $(BUILD)/tests/nvidia/%.o
	$(NVCC) -cudart static -o $@ $<

test-bins: $(NVIDIA_SHARED) $(NVIDIA_STATIC)
endif
