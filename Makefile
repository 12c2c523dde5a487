# Everything runs from a project-local virtualenv that the first target creates,
# so a fresh machine needs nothing but python3.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint typecheck unit bench clean

$(VENV)/.installed: pyproject.toml setup.py otel_stall/core/_canon.c otel_stall/core/_vendor/xxhash/xxhash.h
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

## demo: run a simulated looping agent through the live processor, then replay its capture
demo: $(VENV)/.installed
	$(BIN)/otel-stall demo

## test: lint, type-check and run the whole test suite (what CI runs)
test: lint typecheck unit

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed
	$(BIN)/mypy

unit: $(VENV)/.installed
	$(BIN)/pytest

bench: $(VENV)/.installed
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist

## fixtures: regenerate tests/frameworks/ from real agent frameworks run offline (ONLY=name[/layout])
.PHONY: fixtures
fixtures: $(VENV)/.installed
	$(BIN)/python tests/frameworks/generate.py $(foreach o,$(ONLY),--only $(o))
