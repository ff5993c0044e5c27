# tests/record.mk - the tracker's cost at scale (included by the Makefile
# after tests/tests.mk): record_cost links the tracker's objects alone and
# tests/e2e/test_record_cost.py counts its instructions under callgrind.

RECORD_COST := $(BUILD)/tests/unit/record_cost

$(RECORD_COST): tests/unit/record_cost.c $(RECORD_OBJ) \
                $(call preload_obj,event_log)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PRELOAD_INC) -o $@ $< $(RECORD_OBJ) \
	    $(call preload_obj,event_log) $(LDFLAGS_ALL) -lpthread

test-bins: $(RECORD_COST)
