# tests/tests.mk - test binaries and the `test` targets (included by Makefile).
#
# Unit tests (cmocka), one binary per tests/unit/test_<stem>.c:
#   test_sim_*    exercise the simulated device through its public ABI
#   test_cli_*    link the CLI's objects (all but main.o)
#   test_<stem>   link src/preload/*/<stem>.o and src/common (the pure-C,
#                 CUDA-free parts of the library, e.g. record.c)
# End-to-end tests (pytest, tests/e2e/) run the programs in tests/progs/ under
# LD_PRELOAD against the simulated device.  Program names say how they reach
# CUDA: rt_* link the shared runtime, static_* the static archive, drv_* the
# driver, other names link neither (they dlopen what they need).

# The tracker is track/record.c and its record_*.c siblings (record_impl.h).
# with the thread's hot TLS block, which holds the tracker's thread cache
RECORD_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/preload/track/record*.c)) \
              $(call preload_obj,thread_hot)
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
# test_record_debug is test_record with CUMEMTRACE_DEBUG, which a
# sanitizer build gives every object already (SANFLAGS): one run is enough.
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%) \
             $(if $(SAN),,$(BUILD)/tests/unit/test_record_debug)
PROG_LIBS := $(wildcard tests/progs/lib*.c)
PROG_CXX  := $(wildcard tests/progs/lib*.cpp)
PROG_SRC  := $(filter-out $(PROG_LIBS),$(wildcard tests/progs/*.c))
PROG_BIN  := $(PROG_SRC:tests/progs/%.c=$(BUILD)/tests/progs/%) \
             $(PROG_LIBS:tests/progs/%.c=$(BUILD)/tests/progs/%.so) \
             $(PROG_CXX:tests/progs/%.cpp=$(BUILD)/tests/progs/%.so)
SIMDIR     = $(abspath $(BUILD)/sim)
UNIT_LD    = -lcmocka -ldl -lpthread -lm
CLI_LIBOBJ = $(filter-out $(BUILD)/obj/src/cli/main.o,$(CLI_OBJ))

.SECONDEXPANSION:
$(BUILD)/tests/unit/test_sim_%: tests/unit/test_sim_%.c $(SIMDRV) $(SIMRT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/sim -o $@ $< -L$(BUILD)/sim -lcudart -lcuda \
	    -Wl,-rpath,$(SIMDIR) $(LDFLAGS_ALL) $(UNIT_LD)
# The simulated NCCL's test links the stand-in too.
$(BUILD)/tests/unit/test_sim_nccl: tests/unit/test_sim_nccl.c $(SIMDRV) $(SIMRT) $(SIMNCCL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/sim -o $@ $< -L$(BUILD)/sim -l:libnccl.so.2 -lcudart -lcuda \
	    -Wl,-rpath,$(SIMDIR) $(LDFLAGS_ALL) $(UNIT_LD)
$(BUILD)/tests/unit/test_cli_%: tests/unit/test_cli_%.c $$(CLI_LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(CLI_INC) -o $@ $< $(CLI_LIBOBJ) $(LDFLAGS_ALL) $(UNIT_LD) $(CLI_LIBS)
# python.c times its no-GIL reader with the tracer's clock.
$(BUILD)/tests/unit/test_python: tests/unit/test_python.c \
    $(foreach m,python python_table python_nogil python_walk own_fd clock,$(call preload_obj,$(m))) \
    $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -o $@ $< $(filter %.o,$^) $(LDFLAGS_ALL) $(UNIT_LD)
# unwind.c reads frame rules with cfi.c (log.c: what the objects reference).
$(BUILD)/tests/unit/test_unwind: tests/unit/test_unwind.c \
    $(foreach m,unwind cfi log,$(call preload_obj,$(m))) $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -o $@ $< $(filter %.o,$^) $(LDFLAGS_ALL) $(UNIT_LD)
# output.c places its short-lived descriptors high through own_fd.c.
$(BUILD)/tests/unit/test_output: tests/unit/test_output.c \
    $(foreach m,output own_fd,$(call preload_obj,$(m))) $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -o $@ $< $(filter %.o,$^) $(LDFLAGS_ALL) $(UNIT_LD)
# oom.c keeps its record in oom_ledger.c, asks allocator.c for the caching
# allocator's cause and resolve_names.c for the entry point's name, and
# keeps its chain in the thread's hot TLS block (thread_hot.c); the test
# stands in for the device, the tracker, the writer and the log.
$(BUILD)/tests/unit/test_oom: tests/unit/test_oom.c \
    $(foreach m,oom oom_ledger allocator resolve_names thread_hot,$(call preload_obj,$(m))) \
    $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -o $@ $< $(filter %.o,$^) $(LDFLAGS_ALL) $(UNIT_LD)
# serialise.c writes the tracker's state (record*.c) with its siblings; the
# document goes back through the CLI's reader (serialise_read.c, built with
# the CLI's include path: both sides name the kinds KIND_*).
SERIALISE_OBJ := $(RECORD_OBJ) $(foreach m,serialise serialise_stacks serialise_phases \
    snapshot_json layout oom_ledger allocator allocator_segments allocator_tensors resolve_names event_log \
    phases modules symtab clock log,$(call preload_obj,$(m)))
$(BUILD)/obj/tests/unit/serialise_read.o: tests/unit/serialise_read.c | $(CAUSES_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(CLI_INC) -MMD -MP -c -o $@ $<
$(BUILD)/tests/unit/test_serialise: tests/unit/test_serialise.c \
    $(BUILD)/obj/tests/unit/serialise_read.o $(SERIALISE_OBJ) $$(CLI_LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -o $@ $< $(filter %.o,$^) \
	    $(LDFLAGS_ALL) $(UNIT_LD) $(CLI_LIBS)
# record.c hands its event log to event_log.c.
$(BUILD)/tests/unit/test_record $(BUILD)/tests/unit/test_record_threads: \
    $(BUILD)/tests/unit/test_record%: tests/unit/test_record%.c $(RECORD_OBJ) \
    $(call preload_obj,event_log) $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -o $@ $< $(filter %.o,$^) $(LDFLAGS_ALL) $(UNIT_LD)
# The tracker again, compiled with CUMEMTRACE_DEBUG: every *_locked
# function asserts that its thread holds the tracker's lock.
$(BUILD)/tests/unit/test_record_debug: tests/unit/test_record.c \
    $(wildcard src/preload/track/record*.c) $(filter %/event_log.c %/thread_hot.c,$(PRELOAD_SRC)) \
    $(COMMON_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DCUMEMTRACE_DEBUG -fvisibility=hidden $(PRELOAD_INC) -o $@ \
	    $(filter %.c,$^) $(LDFLAGS_ALL) $(UNIT_LD)
# allocator_tensors.c keeps its reports in allocator_segments.c's store and
# writes them with the snapshot's JSON writer.
$(BUILD)/tests/unit/test_allocator_tensors: \
    $(foreach m,allocator_segments snapshot_json,$(call preload_obj,$(m)))
$(BUILD)/tests/unit/test_%: tests/unit/test_%.c $$(call preload_obj,$$*) $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -o $@ $< $(filter %.o,$^) $(LDFLAGS_ALL) $(UNIT_LD)

# ---- programs the end-to-end tests run ----
PROG_CFLAGS = $(CSTD) -O1 -g -Wall -Wextra -Werror -fPIC -Isrc/common -Iinclude -rdynamic $(SANFLAGS)
$(BUILD)/tests/progs/lib%.so: tests/progs/lib%.c
	@mkdir -p $(dir $@)
	$(CC) $(PROG_CFLAGS) -shared -o $@ $< -ldl
$(BUILD)/tests/progs/lib%.so: tests/progs/lib%.cpp
	@mkdir -p $(dir $@)
	c++ -O1 -g -fPIC -shared $(SANFLAGS) -o $@ $<
$(BUILD)/tests/progs/rt_%: tests/progs/rt_%.c $(SIMRT)
	@mkdir -p $(dir $@)
	$(CC) $(PROG_CFLAGS) -o $@ $< -L$(BUILD)/sim -lcudart -ldl -lpthread
$(BUILD)/tests/progs/static_%: tests/progs/static_%.c $(SIMRTA)
	@mkdir -p $(dir $@)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(SIMRTA) -ldl -lpthread
$(BUILD)/tests/progs/drv_%: tests/progs/drv_%.c $(SIMDRV)
	@mkdir -p $(dir $@)
	$(CC) $(PROG_CFLAGS) -o $@ $< -L$(BUILD)/sim -lcuda -ldl -lpthread
$(BUILD)/tests/progs/%: tests/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(PROG_CFLAGS) -o $@ $< -ldl -lpthread
$(BUILD)/tests/progs/static_workload: tests/progs/rt_workload.c

# bench_alloc: test_hotpath_cost.py counts its loop's instructions; the stand-in
# runtime: test_bench_threads.py runs bench.py's thread part on it.
test-bins: all $(UNIT_BIN) $(PROG_BIN) $(EXTRA_TEST_BINS) $(BUILD)/tests/bench/bench_alloc \
    $(BUILD)/bench/fastrt/libcudart.so.13

# The programs alone: what the TSan run needs beside the two tracker tests.
.PHONY: test-progs
test-progs: all $(PROG_BIN)

test-unit: test-bins
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

test-e2e: test-bins
	CUMEMTRACE_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider \
	    $(E2E_SELECT) tests/e2e

# The whole suite: what the README and CI run.
test: check-deps
	@$(MAKE) --no-print-directory test-unit test-e2e

# The same without the slow set (the instruction counts under callgrind,
# marked `instructions` in tests/e2e/conftest.py), for iterating.
test-quick: check-deps
	@$(MAKE) --no-print-directory test-unit
	CUMEMTRACE_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider \
	    -m "not instructions" tests/e2e

# Sanitizer variants (CI runs both): the whole suite under ASan+UBSan but
# the tests that run none of our C (marked no_c in tests/e2e/conftest.py),
# and the threaded and fork tests under TSan.
test-san: check-deps
	@$(MAKE) --no-print-directory SAN=address,undefined test-unit test-e2e \
	    E2E_SELECT='-m "not no_c"'
# TSan's tree at -O1: its compile is most of the stage's CPU besides the
# tests, and what the stage looks for is races, not -O2's code.
test-tsan: check-deps
	@$(MAKE) --no-print-directory SAN=thread BUILD=build-tsan OPT='-O1 -g' all test-progs \
	    build-tsan/tests/unit/test_record build-tsan/tests/unit/test_record_threads
	build-tsan/tests/unit/test_record   # the tracker's tables under threads
	build-tsan/tests/unit/test_record_threads   # 2-8 threads against their replay
	CUMEMTRACE_BUILD=$(abspath build-tsan) $(PYTHON) -m pytest -q -p no:cacheprovider \
	    tests/e2e/test_process.py tests/e2e/test_concurrency.py tests/e2e/test_phases.py \
	    -k "threads or fork or concurrency"

# ---- benchmarks (scripts/bench.py; results in docs/performance.md) ----
$(BUILD)/tests/bench/bench_alloc: tests/bench/bench_alloc.c src/preload/stacks/cfi.h $(SIMRT)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g -Wall -Wextra -Werror -Isrc/common -rdynamic -o $@ $< \
	    -L$(BUILD)/sim -lcudart -ldl -lpthread

# The lock-free stand-in runtime of the thread-scaling row (fastrt.c).
$(BUILD)/bench/fastrt/libcudart.so.13: tests/bench/fastrt.c src/simgpu/runtime/libcudart.map
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g -Wall -Wextra -Werror -fPIC -fvisibility=hidden -shared -o $@ $< \
	    -Wl,-soname,libcudart.so.13 -Wl,--version-script=src/simgpu/runtime/libcudart.map

# The -g module the big snapshot's native frames lie in (scripts/bench_resolve.py).
$(BUILD)/tests/bench/bench_symbols: tests/bench/bench_symbols.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g -Wall -Wextra -Werror -o $@ $<

# callgrind's client requests for scripts/bench_torch_history.py and
# bench_torch_phases.py (ctypes).
$(BUILD)/tests/bench/libcg_requests.so: tests/bench/cg_requests.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -Wall -Wextra -Werror -fPIC -shared -o $@ $<

bench: all $(BUILD)/tests/bench/bench_alloc $(BUILD)/bench/fastrt/libcudart.so.13 \
       $(BUILD)/tests/bench/bench_symbols $(BUILD)/tests/bench/libcg_requests.so
	@scripts/install-deps.sh --bench || echo "cumemtrace: bench: heaptrack missing; the comparison with it is skipped"
	$(PYTHON) scripts/bench.py --build $(BUILD) --write docs/performance.md
	$(PYTHON) scripts/bench_ranks.py --build $(BUILD) --write docs/performance.md
	$(PYTHON) scripts/bench_torch_history.py --build $(BUILD) --write docs/performance.md
