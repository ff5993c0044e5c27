# tests/pip.mk - `make test-pip`: the pip package (tests/pip/), from the sdist
# and the binary wheel that `make wheel` leaves in $(BUILD)/dist, each
# installed into a fresh venv beside PyTorch (scripts/torch-env.sh's, read
# through a .pth file) and used from there alone.  Slow (it compiles the
# project twice, in pip's own build trees) and needs PyPI for the build
# tools: not part of `make test`; CI runs it.

.PHONY: test-pip
test-pip: wheel
	@py=$$(scripts/torch-env.sh) && \
	    CUMEMTRACE_DIST=$(abspath $(BUILD)/dist) CUMEMTRACE_TORCH_PYTHON=$$py \
	    $(PYTHON) -m pytest -q -p no:cacheprovider tests/pip
