# The two commands of the README. Each does all of its own set-up, idempotently:
#   make compare   set up .venv, then run `python -m accelml compare` on the embedded default spec
#   make test      set up .venv, lint (ruff) and type-check (mypy --strict) accelml/, start the
#                  local SLURM, build (once, cached in ~/.cache/accelml/images) the container image
#                  the container tests run cases in, run the test suite
# A second run skips what is already done (the venv is rebuilt only when pyproject.toml or
# make/constraints.txt change; the Horovod wheel is cached outside the venv).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.accelml-installed
HOROVOD := $(VENV)/.accelml-horovod
PYTEST_ARGS ?=

.PHONY: compare test setup
.DEFAULT_GOAL := compare

compare: setup
	$(PY) -m accelml compare

test: setup
	@bash make/install-test-tools.sh
	$(PY) -m ruff check accelml tests benchmarks
	$(PY) -m mypy
	@bash make/build-container-image.sh "$(VENV)"; rc=$$?; \
	  if [ $$rc = 3 ]; then echo "tests of cases in containers will be skipped"; elif [ $$rc != 0 ]; then exit $$rc; fi
	@bash slurm/local/start.sh start; rc=$$?; \
	  if [ $$rc = 3 ]; then echo "tests marked slurm will be skipped"; elif [ $$rc != 0 ]; then exit $$rc; fi
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest $(PYTEST_ARGS)

setup: $(INSTALLED) $(HOROVOD)

$(INSTALLED): pyproject.toml make/constraints.txt make/setup-venv.sh
	bash make/setup-venv.sh "$(PYTHON)" "$(VENV)"
	@touch $@

$(HOROVOD): $(INSTALLED) make/build-horovod.sh
	bash make/build-horovod.sh "$(VENV)"
	@touch $@
