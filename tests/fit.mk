# tests/fit.mk - `make bench` also measures what `cumemtrace fit` adds to the
# bare simulated run of a PyTorch script (scripts/bench_fit.py; target at
# most 10 %, wall clock, CPU time and instructions, printed as met or MISSED).
# Without the PyTorch venv (scripts/torch-env.sh) it says so and measures nothing.
.PHONY: bench-fit
bench-fit: all
	$(PYTHON) scripts/bench_fit.py --build $(BUILD) --write docs/performance.md
bench: bench-fit
