# tests/sim.mk - extra rules for the simulated device's tests (included by
# the Makefile after tests/tests.mk).
#
# - test_sim_procaddress and test_sim_runtime compare against the look-ups of
#   NVIDIA's runtime, so they include the generated cudart_lookups.h.
# - tests/e2e/test_sim_runtime.py runs two helpers built here: a program
#   linked only to the static runtime (with the programs' flags, sanitizers
#   included), and a watcher used as LD_AUDIT and LD_PRELOAD (see
#   tests/sim/sim_watch.c; no sanitizers: an auditor lives in its own
#   namespace, where a second sanitizer runtime cannot start).

SIM_LOOKUP_TESTS := $(BUILD)/tests/unit/test_sim_procaddress $(BUILD)/tests/unit/test_sim_runtime
$(SIM_LOOKUP_TESTS): $(BUILD)/gen/cudart_lookups.h
$(SIM_LOOKUP_TESTS): private CFLAGS_ALL += -I$(BUILD)/gen

SIM_HELPERS := $(BUILD)/tests/sim/static_probe $(BUILD)/tests/sim/libsim_watch.so

$(BUILD)/tests/sim/static_probe: tests/sim/static_probe.c $(SIMRTA)
	@mkdir -p $(dir $@)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(SIMRTA) -ldl -lpthread

$(BUILD)/tests/sim/libsim_watch.so: tests/sim/sim_watch.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O1 -g -Wall -Wextra -Werror -fPIC -Isrc/common -shared -o $@ $<

test-bins: $(SIM_HELPERS)


# The stand-in cuBLAS/cuBLASLt are tested through their exported ABI.
$(BUILD)/tests/unit/test_sim_blas: tests/unit/test_sim_blas.c $(SIMBLAS) $(SIMBLASLT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< -L$(BUILD)/sim -l:libcublas.so.13 -l:libcublasLt.so.13 \
	    -Wl,-rpath,$(SIMDIR) $(LDFLAGS_ALL) $(UNIT_LD)
$(BUILD)/tests/unit/test_sim_dnn: tests/unit/test_sim_dnn.c $(SIMDNN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< -L$(BUILD)/sim -l:libcudnn.so.9 \
	    -Wl,-rpath,$(abspath $(BUILD)/sim) $(LDFLAGS_ALL) $(UNIT_LD)
