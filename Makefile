# cumemtrace - top-level build.  `make` builds everything into $(BUILD)/;
# `make test` runs the whole suite; `make demo` shows real PyTorch's
# post-mortem on the simulated GPU.  Variables: CC, BUILD, SAN (e.g. SAN=address,undefined builds
# an instrumented tree in build-san/ unless BUILD is given), PREFIX, PYTHON.

CC      ?= cc
PREFIX  ?= /usr/local
SAN     ?=
ifeq ($(SAN),)
BUILD   ?= build
SANFLAGS :=
else
BUILD   ?= build-san
SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all \
            -DCUMEMTRACE_DEBUG
endif
PYTHON  ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
# The release's one version: include/cumemtrace.h's CUMEMTRACE_VERSION_*, which
# the library and the CLI compile in and setup.py reads (`make version`).
VERSION := $(shell sed -n 's/^.define CUMEMTRACE_VERSION_[A-Z]* *\([0-9]*\)$$/\1/p' \
             include/cumemtrace.h | paste -sd. -)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CSTD    := -std=c11 -D_GNU_SOURCE
OPT     ?= -O2 -g
CFLAGS_ALL = $(CSTD) $(OPT) $(WARN) $(SANFLAGS) -fPIC -Isrc/common -I$(BUILD)/gen -Iinclude $(CFLAGS)
# format.h's list of OOM causes (causes.h) is the first two columns of the
# rows in src/cli/text/oom_causes.c (scripts/causes.awk): made while this
# file is read, so it exists before anything compiles, and replaced only
# when the list changes (the objects that include it depend on it).
CAUSES_H := $(BUILD)/gen/causes.h
# Each make writes its own temporary file: CI runs two makes on one tree.
CAUSES_OK := $(shell mkdir -p $(BUILD)/gen && \
    t=$$(mktemp $(CAUSES_H).XXXXXX) && \
    { awk -f scripts/causes.awk src/cli/text/oom_causes.c > $$t || { rm -f $$t; exit 1; }; } && \
    { cmp -s $$t $(CAUSES_H) || mv $$t $(CAUSES_H); } && \
    rm -f $$t && echo ok)
ifneq ($(CAUSES_OK),ok)
$(error cannot make $(CAUSES_H) from src/cli/text/oom_causes.c (scripts/causes.awk said why above))
endif
# Made again when a goal before the compiles removed it (make clean all).
$(CAUSES_H):
	@mkdir -p $(dir $@)
	awk -f scripts/causes.awk src/cli/text/oom_causes.c > $@
LDFLAGS_ALL = $(SANFLAGS) $(LDFLAGS)

# src/<component>/<concern>/: each component's folders are its include path
# (docs/design.md has the map).
COMMON_SRC  := $(wildcard src/common/*.c)
PRELOAD_SRC := $(wildcard src/preload/*/*.c)
PRELOAD_ASM := $(wildcard src/preload/*/*.S)
CLI_SRC     := $(wildcard src/cli/*.c src/cli/*/*.c)
PRELOAD_INC := $(patsubst %/,-I%,$(sort $(dir $(wildcard src/preload/*/*.h))))
CLI_INC     := -Isrc/cli $(patsubst %/,-I%,$(sort $(dir $(wildcard src/cli/*/*.h))))
# the object of a source stem, wherever its folder: $(call preload_obj,record)
preload_obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(filter %/$(1).c,$(PRELOAD_SRC)))
# The CLI alone links libdw (debug information) and libstdc++ (demangling),
# and protobuf-c + zlib (export --format pprof).
CLI_LIBS    := -ldw -lelf -lstdc++ -lm -lprotobuf-c -lz
# The simulated device (src/simgpu/): each folder one library, common/ shared.
SIMGPU_INC  := -Isrc/simgpu/common
SIMCOMMON_OBJ := $(BUILD)/obj/src/simgpu/common/sim_common.o $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
SIMDRV_SRC  := $(wildcard src/simgpu/driver/*.c)
SIMRT_SRC   := $(wildcard src/simgpu/runtime/*.c)

PRELOAD_OBJ := $(PRELOAD_SRC:%.c=$(BUILD)/obj/%.o) $(PRELOAD_ASM:%.S=$(BUILD)/obj/%.o) \
               $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ     := $(CLI_SRC:%.c=$(BUILD)/obj/%.o) $(COMMON_SRC:%.c=$(BUILD)/obj/%.o) \
               $(BUILD)/obj/gen/profile.pb-c.o
SIMDRV_OBJ  := $(SIMDRV_SRC:%.c=$(BUILD)/obj/%.o) $(SIMCOMMON_OBJ)
SIMRT_OBJ   := $(SIMRT_SRC:%.c=$(BUILD)/obj/%.o) $(SIMCOMMON_OBJ)

LIB     := $(BUILD)/libcumemtrace.so
CLI     := $(BUILD)/cumemtrace
SIMDRV  := $(BUILD)/sim/libcuda.so.1
SIMRT   := $(BUILD)/sim/libcudart.so.13
SIMRTA  := $(BUILD)/sim/libcudart_static.a
SIMNVML := $(BUILD)/sim/libnvidia-ml.so.1
# Stand-ins for the NVIDIA libraries PyTorch links (src/simgpu/blas, ...).
SIMBLAS := $(BUILD)/sim/libcublas.so.13
SIMBLASLT := $(BUILD)/sim/libcublasLt.so.13
SIMDNN  := $(BUILD)/sim/libcudnn.so.9
SIMNCCL := $(BUILD)/sim/libnccl.so.2
SIMSTANDINS := $(SIMBLAS) $(SIMBLASLT) $(SIMDNN) $(SIMNCCL)

.PHONY: all lib cli sim test test-quick test-unit test-e2e test-san demo demo-c install uninstall \
        clean bench fuzz deps check-deps wheel version
all: lib cli sim
version:
	@echo $(VERSION)
TORCHBOOT := $(patsubst src/torchboot/%,$(BUILD)/share/cumemtrace/torchboot/%,$(wildcard src/torchboot/*.py src/torchboot/layer/*.py))
lib: $(LIB) $(TORCHBOOT)
cli: $(CLI)
sim: $(SIMDRV) $(SIMRT) $(SIMRTA) $(SIMNVML) $(SIMSTANDINS)

# ---- objects ----
$(BUILD)/obj/src/preload/%.o: src/preload/%.c | $(CAUSES_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -fvisibility=hidden -MMD -MP -c $< -o $@
# The files that compile the steady state's fast path into their wrappers
# (interpose/hooks_fast.h): without SLP vectorisation, whose paired 16-byte
# loads and stores of the tracker's counters and event rows took more
# instructions than the scalar adds they replace (~9 of the ~414 a traced
# pair with no stack added; docs/performance.md, "Fixed cost").
$(call preload_obj,hooks_runtime) $(call preload_obj,hooks_driver): \
    private CFLAGS_ALL += -fno-tree-slp-vectorize
$(BUILD)/obj/src/preload/%.o: src/preload/%.S
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(SANFLAGS) -fPIC -c $< -o $@
$(BUILD)/obj/src/common/%.o: src/common/%.c | $(CAUSES_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fvisibility=hidden -MMD -MP -c $< -o $@
$(BUILD)/obj/src/simgpu/%.o: src/simgpu/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SIMGPU_INC) -MMD -MP -c $< -o $@
$(BUILD)/obj/src/cli/%.o: src/cli/%.c | $(CAUSES_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(CLI_INC) -MMD -MP -c $< -o $@
$(BUILD)/obj/%.o: %.c | $(CAUSES_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# ---- the preloaded library ----
# The version script: the wrapped entry points expanded from hooks_table.h
# (src/preload/exports.map.in says what else is exported).
$(BUILD)/gen/exports.map: src/preload/exports.map.in src/preload/interpose/hooks_table.h
	@mkdir -p $(dir $@)
	$(CC) -E -P -x c -Isrc/preload/interpose $< -o $@
$(LIB): $(PRELOAD_OBJ) $(BUILD)/gen/exports.map
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(PRELOAD_OBJ) $(LDFLAGS_ALL) \
	    -Wl,--version-script=$(BUILD)/gen/exports.map -Wl,-soname,libcumemtrace.so \
	    -Wl,-z,now -Wl,-z,relro -Wl,-z,nodelete -ldl -lpthread

# ---- the PyTorch layer: Python files `cumemtrace run` puts on PYTHONPATH ----
$(BUILD)/share/cumemtrace/torchboot/%.py: src/torchboot/%.py
	@mkdir -p $(dir $@)
	cp $< $@

# ---- the command-line tool (may link libstdc++ for __cxa_demangle) ----
$(CLI): $(CLI_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(CLI_OBJ) $(LDFLAGS_ALL) $(CLI_LIBS)

# ---- the HTML page's assets, compiled into the CLI (src/cli/views/html_page.c) ----
# The script is one closure written in several files by concern, joined in
# this fixed order (common.js opens the closure, page.js closes it).
HTML_JS := $(addprefix src/cli/views/html/,common.js timeline.js flame.js sites.js tensors.js postmortem.js roles.js page.js)
$(BUILD)/gen/report.js: $(HTML_JS)
	@mkdir -p $(dir $@)
	cat $(HTML_JS) > $@
HTML_ASSETS := src/cli/views/html/report.html src/cli/views/html/report.css $(BUILD)/gen/report.js
$(BUILD)/gen/html_assets.h: $(HTML_ASSETS) scripts/embed.awk
	@mkdir -p $(dir $@)
	awk -v names="html_template html_style html_script" -f scripts/embed.awk $(HTML_ASSETS) > $@
$(BUILD)/obj/src/cli/views/html_page.o: $(BUILD)/gen/html_assets.h

# ---- pprof's profile.proto compiled with protoc-c (CLI only) ----
$(BUILD)/gen/profile.pb-c.c $(BUILD)/gen/profile.pb-c.h &: src/cli/views/pprof/profile.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --proto_path=src/cli/views/pprof --c_out=$(BUILD)/gen $<
$(BUILD)/obj/gen/profile.pb-c.o: $(BUILD)/gen/profile.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(OPT) $(SANFLAGS) -fPIC -I$(BUILD)/gen -c $< -o $@
$(BUILD)/obj/src/cli/views/export_pprof.o: $(BUILD)/gen/profile.pb-c.h

# ---- the simulated device (src/simgpu/): installed privately, loaded only by simgpu ----
$(BUILD)/gen/cudart_lookups.h: tests/data/cudart-13.0-getprocaddress.tsv
	@mkdir -p $(dir $@)
	awk -F'\t' 'BEGIN{print "/* generated from $< - do not edit */"} {printf "{\"%s\", %d, %d},\n", $$1, $$2, $$3}' $< > $@
$(BUILD)/obj/src/simgpu/runtime/runtime.o: $(BUILD)/gen/cudart_lookups.h
# RUNTIME_SYMBOLS (runtime.h): the runtime's entry points, from their definitions.
$(BUILD)/gen/runtime_symbols.h: $(SIMRT_SRC) Makefile
	@mkdir -p $(dir $@)
	sed -n -E 's/^ *RUNTIME_(ENTER|CALL)\(([A-Za-z0-9_]+).*/\2/p; s/^RUNTIME_REFUSED\([A-Z_]+, ([A-Za-z0-9_]+).*/\1/p' \
	    $(SIMRT_SRC) | awk 'BEGIN { print "/* generated from the runtime sources by the Makefile - do not edit */"; \
	    printf "#define RUNTIME_SYMBOLS(X)" } { printf " \\\n    X(%s)", $$1 } END { print "" }' > $@
$(SIMRT_SRC:%.c=$(BUILD)/obj/%.o): $(BUILD)/gen/runtime_symbols.h
# -Bsymbolic-functions: cuGetProcAddress hands out the library's own
# functions even where an LD_PRELOAD interposes the same names.
$(SIMDRV): $(SIMDRV_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(SIMDRV_OBJ) $(LDFLAGS_ALL) -Wl,-soname,libcuda.so.1 \
	    -Wl,-Bsymbolic-functions -lpthread
	ln -sf libcuda.so.1 $(BUILD)/sim/libcuda.so
$(SIMRT): $(SIMRT_OBJ) src/simgpu/runtime/libcudart.map
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(SIMRT_OBJ) $(LDFLAGS_ALL) -Wl,-soname,libcudart.so.13 \
	    -Wl,--version-script=src/simgpu/runtime/libcudart.map -ldl -lpthread
	ln -sf libcudart.so.13 $(BUILD)/sim/libcudart.so
$(SIMRTA): $(SIMRT_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(SIMRT_OBJ)
# The simulated NVML: PyTorch's expandable segments call NVML without
# checking that it loaded, so the simulated GPU has one.
$(SIMNVML): $(BUILD)/obj/src/simgpu/nvml/nvml.o $(SIMCOMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ $(LDFLAGS_ALL) -Wl,-soname,libnvidia-ml.so.1

# A stand-in library: hand-written entry points (src/simgpu/<dir>/*.c) over
# weak no-ops generated from its symbol list, exporting exactly that list
# under NVIDIA's soname and version node.  NVIDIA's headers are not used, so
# the entry points have no prototypes: the version script is the contract.
# $(call simgpu_standin,TARGET,DIR,STEM,SONAME,VERSION-NODE,OBJECTS[,LIBS[,NOOP-OPTIONS]])
# (NOOP-OPTIONS: noops.awk's -v handle=... -v plain=...)
define simgpu_standin
$(BUILD)/gen/simgpu/$(3)_noops.c: src/simgpu/$(2)/$(3).syms src/simgpu/noops.awk Makefile
	@mkdir -p $$(dir $$@)
	awk -v what=c -v src=$$< $(8) -f src/simgpu/noops.awk $$< > $$@
$(BUILD)/gen/simgpu/$(3).map: src/simgpu/$(2)/$(3).syms src/simgpu/noops.awk
	@mkdir -p $$(dir $$@)
	awk -v what=map -v node=$(5) -v src=$$< -f src/simgpu/noops.awk $$< > $$@
$(BUILD)/obj/gen/simgpu/$(3)_noops.o: $(BUILD)/gen/simgpu/$(3)_noops.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CSTD) $$(OPT) $$(SANFLAGS) -fPIC -c $$< -o $$@
$(1): $(6) $(BUILD)/obj/gen/simgpu/$(3)_noops.o $(BUILD)/gen/simgpu/$(3).map
	@mkdir -p $$(dir $$@)
	$$(CC) -shared -o $$@ $$(filter %.o,$$^) $$(LDFLAGS_ALL) -Wl,-soname,$(4) \
	    -Wl,--version-script=$(BUILD)/gen/simgpu/$(3).map $(7) -lpthread
endef
$(BUILD)/obj/src/simgpu/blas/%.o $(BUILD)/obj/src/simgpu/dnn/%.o $(BUILD)/obj/src/simgpu/nccl/%.o \
    $(BUILD)/obj/src/simgpu/nvml/%.o: private CFLAGS_ALL += -Wno-missing-prototypes
# Every cuBLAS entry point but the host-side copies (Get/Set Matrix/Vector
# Async) takes the handle first, and NVIDIA's refuses a NULL or destroyed one.
$(eval $(call simgpu_standin,$(SIMBLAS),blas,cublas,libcublas.so.13,libcublas.so.13,\
    $(BUILD)/obj/src/simgpu/blas/cublas.o,,-v handle=sim_cublas_handle_status -v plain=Async$$$$))
$(eval $(call simgpu_standin,$(SIMBLASLT),blas,cublasLt,libcublasLt.so.13,libcublasLt.so.13,\
    $(BUILD)/obj/src/simgpu/blas/cublasLt.o))
$(eval $(call simgpu_standin,$(SIMDNN),dnn,cudnn,libcudnn.so.9,libcudnn.so.9,\
    $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/simgpu/dnn/*.c)) $(SIMCOMMON_OBJ)))
# NCCL is unversioned (no node); it copies and maps device memory through
# the simulated runtime, which it links as NVIDIA's links its own.
$(eval $(call simgpu_standin,$(SIMNCCL),nccl,nccl,libnccl.so.2,,\
    $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/simgpu/nccl/*.c)) $(SIMCOMMON_OBJ) $(SIMRT),\
    -L$(BUILD)/sim -l:libcudart.so.13))

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

include tests/tests.mk
-include $(filter-out tests/tests.mk,$(wildcard tests/*.mk))

# ---- demo, install, clean ----
# `make demo`: real PyTorch (examples/train_torch.py) on a simulated 24 GiB
# GPU under the tracer (scripts/demo.sh); its first run creates the PyTorch
# venv (scripts/torch-env.sh: several GB, once).  `make demo-c`: the same
# story told by a C program with no PyTorch (examples/train_sim.c).
demo: check-deps all
	@scripts/install-deps.sh --torch
	@py=$$(scripts/torch-env.sh) && scripts/demo.sh $(BUILD) $$py
demo-c: check-deps all $(BUILD)/examples/train_sim
	@scripts/demo-c.sh $(BUILD)

$(BUILD)/examples/%: examples/%.c $(SIMRT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -rdynamic -o $@ $< -L$(BUILD)/sim -lcudart $(LDFLAGS_ALL)

# PREFIX/lib/cumemtrace/ is private: the simulated GPU (src/simgpu) goes to
# its simgpu/ (the script, and its libraries in sim/), never on the system
# library path; nothing loads them unless simgpu (or `fit`) is run.
PRIVATE = $(DESTDIR)$(PREFIX)/lib/cumemtrace
SIMGPU_DIR = $(PRIVATE)/simgpu
install: lib cli sim
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libcumemtrace.so
	install -m 0755 $(CLI) $(DESTDIR)$(PREFIX)/bin/cumemtrace
	install -m 0644 include/cumemtrace.h $(DESTDIR)$(PREFIX)/include/cumemtrace.h
	install -d $(DESTDIR)$(PREFIX)/share/cumemtrace/torchboot
	install -m 0644 src/torchboot/*.py $(DESTDIR)$(PREFIX)/share/cumemtrace/torchboot/
	install -d $(DESTDIR)$(PREFIX)/share/cumemtrace/torchboot/layer
	install -m 0644 src/torchboot/layer/*.py $(DESTDIR)$(PREFIX)/share/cumemtrace/torchboot/layer/
	install -d $(SIMGPU_DIR)/sim
	install -m 0755 scripts/simgpu $(SIMGPU_DIR)/simgpu
	install -m 0755 $(BUILD)/sim/*.so.* $(SIMGPU_DIR)/sim/   # every versioned library `sim` built
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libcumemtrace.so $(DESTDIR)$(PREFIX)/bin/cumemtrace \
	      $(DESTDIR)$(PREFIX)/include/cumemtrace.h
	rm -rf $(DESTDIR)$(PREFIX)/share/cumemtrace $(PRIVATE)

# `make wheel`: the sdist and a binary wheel that carries its libraries
# (auditwheel repair), in $(BUILD)/dist; `make test-pip` checks both.
wheel:
	@scripts/wheel.sh $(BUILD)/dist

check-deps:
	@scripts/install-deps.sh --check-or-install

clean:
	rm -rf build build-san build-tsan build-clang
