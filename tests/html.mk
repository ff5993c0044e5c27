# tests/html.mk - what the HTML page tests need (tests/e2e/test_html.py):
# the demo's training program, run under the tracer to make real snapshots.
test-bins: $(BUILD)/examples/train_sim
