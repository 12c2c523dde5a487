# Everything runs from a project-local virtualenv that the first target creates,
# so a fresh machine needs nothing but python3.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# What the virtualenv gets: dev (tests, ruff, mypy) or test (.ci/run's extra Pythons, which
# only run the tests: 20 MB of wheels instead of 47 on Python 3.13).
EXTRAS ?= dev
# pytest-xdist workers: one per core. `make unit WORKERS=0` runs the tests in one process.
# Work stealing: an idle worker takes queued tests from a busy one, so a few long tests
# (the 200k-span load test, the GC stress) do not leave one worker running alone at the end.
WORKERS ?= auto
# Extra pytest arguments, e.g. PYTEST_ARGS='-x'.
PYTEST_ARGS ?=
# Which tests `make unit` runs, as a marker expression, e.g. MARKS='not slow and not phoenix'
# (the extra Pythons in .ci/run). The phoenix tests need the phoenix extra, in a virtualenv of
# their own: `make unit VENV=.venv-phoenix EXTRAS=test,phoenix MARKS=phoenix WORKERS=0`.
MARKS ?= not phoenix

.PHONY: demo test lint typecheck unit e2e integrations collector bench docs clean

# Every virtualenv is made and filled by uv, itself installed once with pip into a
# virtualenv of its own. From its cache uv links files where pip unpacks every wheel
# again: the integrations' 700 MB take 6 CPU seconds instead of pip's 33, and .ci/run,
# which runs five virtualenvs' worth of work on two cores, is bound by CPU.
UV_VERSION := 0.13.9
UV := .venv-uv/bin/uv
SOURCES := pyproject.toml setup.py otel_stall/core/_canon.c
INT_EXTRAS := dev,integrations

$(UV):
	rm -rf .venv-uv
	$(PYTHON) -m venv .venv-uv
	.venv-uv/bin/python -m pip install --quiet --disable-pip-version-check 'uv==$(UV_VERSION)'

# $(call fill,DIR,EXTRAS): the virtualenv DIR (made with pip in it, which the packaging test
# runs) with otel-stall installed editable, with EXTRAS (none if empty). `UV_CONSTRAINT=FILE`
# in the environment pins versions, as .ci/run does for the oldest dependencies.
define fill
	test -x $(1)/bin/python || $(UV) venv --quiet --seed --python $(PYTHON) $(1)
	$(UV) pip install --quiet --python $(1)/bin/python -e '.$(if $(2),[$(2)])'
	touch $(1)/.installed
endef

$(VENV)/.installed: $(SOURCES) | $(UV)
	$(call fill,$(VENV),$(EXTRAS))

# The demo's own virtualenv: the runtime dependencies only, not the dev toolchain (issue 29).
DEMO_VENV ?= .venv-demo

$(DEMO_VENV)/.installed: $(SOURCES) | $(UV)
	$(call fill,$(DEMO_VENV),)

## demo: run a simulated looping agent through the live processor, then replay its capture
demo: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/otel-stall demo

## test: lint, type-check and run the whole test suite (what CI runs)
test: lint typecheck unit

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed
	$(BIN)/mypy

unit: $(VENV)/.installed
	$(BIN)/pytest -n $(WORKERS) --dist worksteal --ignore=tests/e2e --ignore=tests/integrations -m "$(MARKS)" $(PYTEST_ARGS)

## collector: build the OpenTelemetry Collector of collector/manifest.yaml (needs Go), once:
## it is cached by the manifest's hash under ~/.cache/otel-stall/collector/
collector:
	collector/build.sh

## e2e: the real collector tier on loopback: load-balanced gateways, a gateway killed under
## load, replay of the file exporter's output (tests/e2e/; builds the collector first)
e2e: $(VENV)/.installed
	collector/build.sh >/dev/null
	$(BIN)/pytest -n 0 tests/e2e $(PYTEST_ARGS)

## integrations: the live gate inside the real agent frameworks (tests/integrations/), in a
## virtualenv of its own with the `integrations` extra's pinned framework versions
INT_VENV ?= .venv-integrations

$(INT_VENV)/.installed: $(SOURCES) | $(UV)
	$(call fill,$(INT_VENV),$(INT_EXTRAS))

# mypy first: the adapters are type-checked here, against their frameworks (the main
# virtualenv's `make typecheck` leaves them out); each file named, so none is excluded.
integrations: $(INT_VENV)/.installed
	$(INT_VENV)/bin/mypy $(filter-out %/gate.py %/__init__.py,$(wildcard otel_stall/integrations/*.py)) \
		otel_stall/demo_pydantic_ai.py $(wildcard tests/integrations/*_agent.py) \
		$(filter-out %/test_gate.py %/test_gate_spans.py,$(wildcard tests/integrations/test_*.py)) \
		bench/bench_gate.py
	$(INT_VENV)/bin/pytest -n 0 tests/integrations $(PYTEST_ARGS)

## bench: run every benchmark and regenerate docs/performance.md (BENCH_ARGS=--quick: a fast run)
bench: $(VENV)/.installed
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

## docs: build the user docs into site/ (MkDocs; --strict, so a broken link or a missing page
## fails). The reference pages are generated from the code by docs/gen_reference.py.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(INT_VENV) .venv-phoenix .venv-uv site .pytest_cache .mypy_cache .ruff_cache build dist

## fixtures: regenerate tests/frameworks/ from real agent frameworks run offline (ONLY=name[/layout])
.PHONY: fixtures
fixtures: $(VENV)/.installed
	$(BIN)/python tests/frameworks/generate.py $(foreach o,$(ONLY),--only $(o))
