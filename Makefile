# The two commands of the README. Each does all of its own set-up, idempotently:
#   make compare   set up .venv, then run `python -m accelml compare` on the embedded default spec
#   make test      set up .venv, lint (ruff) and type-check (mypy --strict) accelml/, start the
#                  local SLURM, build (once, cached in ~/.cache/accelml/images) the container image
#                  the container tests run cases in, run the test suite
# A second run skips what is already done (the venv is rebuilt only when pyproject.toml or
# make/constraints.txt change; the Horovod wheel is cached outside the venv).
# Both overlap their set-up steps (a sub-make with -j). Beside the venv's install: Open MPI's
# install (for Horovod) and, for `make test`, the test tools' install and the local SLURM's
# start. After it: the Horovod compile (what a fresh machine's suite waits for longest) and,
# for `make test`, the image build (mostly downloads and unpacking) and ruff + mypy, niced so
# that the compile keeps the cores. The apt-gets take turns (make/apt-install.sh). The suite
# itself runs on pytest-xdist workers (pyproject.toml's addopts), most of its time being waits
# on real subprocesses. Each step's output is printed whole when it ends (--output-sync).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.accelml-installed
HOROVOD := $(VENV)/.accelml-horovod
PYTEST_ARGS ?=
# mypy's incremental cache, outside the checkout like the Horovod wheel and the image: a fresh
# clone re-checks only what changed (mypy compares its files' hashes), not the 135 modules and
# the stubs of TensorFlow, PyTorch and JAX again (20 CPU-s with an empty cache, 2026-12-07).
MYPY_CACHE ?= $(or $(ACCELML_MYPY_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/accelml/mypy)

.PHONY: compare test setup test-ready lint container-image test-tools slurm-up open-mpi
.DEFAULT_GOAL := compare

# accelml's own modules are compiled to bytecode first: where PYTHONDONTWRITEBYTECODE is set (as
# on this VM) every process would compile them again, ~0.15 CPU-s each, and the suite
# starts about 500 Python processes (case processes, ranks, workers).
compare:
	@$(MAKE) --no-print-directory -j2 --output-sync=target setup
	@$(PY) -m compileall -q -j 0 accelml
	$(PY) -m accelml compare

test:
	@$(MAKE) --no-print-directory -j4 --output-sync=target test-ready
	@$(PY) -m compileall -q -j 0 accelml tests
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest $(PYTEST_ARGS)

# What the suite needs, built side by side (run by `make test` with -j). The system tools and
# the local SLURM need no venv: on a fresh machine their apt-gets run while pip installs.
test-ready: $(HOROVOD) lint container-image test-tools slurm-up

slurm-up:
	@bash slurm/local/start.sh start; rc=$$?; \
	  if [ $$rc = 3 ]; then echo "tests marked slurm will be skipped"; elif [ $$rc != 0 ]; then exit $$rc; fi

lint: $(INSTALLED)
	nice $(PY) -m ruff check accelml tests benchmarks
	nice $(PY) -m mypy --cache-dir "$(MYPY_CACHE)"

container-image: $(INSTALLED)
	@nice bash make/build-container-image.sh "$(VENV)"; rc=$$?; \
	  if [ $$rc = 3 ]; then echo "tests of cases in containers will be skipped"; elif [ $$rc != 0 ]; then exit $$rc; fi

test-tools:
	@bash make/install-test-tools.sh

setup: $(INSTALLED) $(HOROVOD)

$(INSTALLED): pyproject.toml make/constraints.txt make/setup-venv.sh
	bash make/setup-venv.sh "$(PYTHON)" "$(VENV)"
	@touch $@

open-mpi:
	@bash make/install-open-mpi.sh

$(HOROVOD): $(INSTALLED) make/build-horovod.sh | open-mpi
	bash make/build-horovod.sh "$(VENV)"
	@touch $@
