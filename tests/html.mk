# tests/html.mk - what the HTML page tests need (tests/e2e/test_html.py):
# the demo's training program, run under the tracer to make real snapshots.
test-bins: $(BUILD)/examples/train_sim

# `make bench` also measures the HTML page of the 1M-allocation / 100k-stack
# snapshot: size and time to interactive in headless Chromium.
.PHONY: bench-html
bench-html: $(CLI)
	$(PYTHON) scripts/bench_html.py --build $(BUILD)
bench: bench-html
