# tests/cli.mk - extra targets of the command-line tool (included by Makefile).
#
#   make fuzz [FUZZ_SECONDS=60]   libFuzzer on the snapshot reader and views,
#                                 seeded with tests/golden/inputs/, bounded in time
#   make fuzz-stream              the same for the stream reader (stream_read.c),
#                                 seeded with tests/fuzz/stream_seeds/
#   make bench-cli                load+report+diff a generated 1M-allocation,
#                                 100k-stack snapshot and print the timings
#   make test-cli                 the CLI's unit and golden/e2e tests only

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_DIR      = $(BUILD)/fuzz
FUZZ_BIN      = $(FUZZ_DIR)/fuzz_snapshot
# The two fuzzers share the reader and views, compiled once (a fuzzer's
# objects are instrumented the same whichever binary links them).
FUZZ_SHARED_SRC = $(filter-out src/cli/main.c,$(CLI_SRC)) $(COMMON_SRC)
FUZZ_OBJ      = $(FUZZ_SHARED_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_DIR)/obj/gen/profile.pb-c.o
FUZZ_CFLAGS   = $(CSTD) -O1 -g $(WARN) -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=all $(CLI_INC) -Isrc/common -Iinclude -I$(BUILD)/gen

FUZZ_STREAM_BIN = $(FUZZ_DIR)/fuzz_stream

.PHONY: fuzz fuzz-stream bench-cli test-cli

$(FUZZ_DIR)/obj/%.o: %.c $(BUILD)/gen/html_assets.h $(BUILD)/gen/profile.pb-c.c | $(CAUSES_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<
$(FUZZ_DIR)/obj/gen/profile.pb-c.o: $(BUILD)/gen/profile.pb-c.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<
$(FUZZ_BIN) $(FUZZ_STREAM_BIN): $(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/tests/fuzz/%.o $(FUZZ_OBJ)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(CLI_LIBS)

# The corpus directory keeps what the fuzzer found between runs; the seeds
# are the golden inputs (read-only there).
fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ \
	    $(FUZZ_DIR)/corpus tests/golden/inputs

fuzz-stream: $(FUZZ_STREAM_BIN)
	@mkdir -p $(FUZZ_DIR)/stream_corpus
	$(FUZZ_STREAM_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/stream- \
	    $(FUZZ_DIR)/stream_corpus tests/fuzz/stream_seeds

BENCH_DIR = $(BUILD)/bench
bench-cli: $(CLI) $(BUILD)/tests/bench/bench_symbols
	@mkdir -p $(BENCH_DIR)
	$(PYTHON) scripts/gen_big_snapshot.py --allocations 1000000 --stacks 100000 \
	    --module $(BUILD)/tests/bench/bench_symbols --native-frames 20000 \
	    --seed 1 -o $(BENCH_DIR)/big_a.json
	$(PYTHON) scripts/gen_big_snapshot.py --allocations 1000000 --stacks 100000 \
	    --module $(BUILD)/tests/bench/bench_symbols --native-frames 20000 \
	    --seed 2 -o $(BENCH_DIR)/big_b.json
	scripts/bench_cli.sh $(CLI) $(BENCH_DIR)/big_a.json $(BENCH_DIR)/big_b.json

test-cli: $(CLI) $(filter $(BUILD)/tests/unit/test_cli_%,$(UNIT_BIN))
	@set -e; for t in $(filter $(BUILD)/tests/unit/test_cli_%,$(UNIT_BIN)); do \
	    echo "== $$t"; $$t; done
	CUMEMTRACE_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider \
	    tests/e2e/test_cli_*.py

# The workload the CLI's end-to-end tests run under the real library
# (tests/e2e/test_cli_workload.py).
test-bins: $(BUILD)/examples/train_sim
-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
