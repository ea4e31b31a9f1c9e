# semcodec — quick start: `make demo` and `make test` each set up everything they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0
# Elsewhere, keep torch CPU-only with: make TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_PIP_ARGS ?=
STAMP := $(VENV)/.semcodec-installed
KODAK ?= ../shared/data/kodak
BSDS ?= ../shared/data/bsds500-test

.PHONY: all venv bench-deps demo test test-fast lint bench bench-bsds bench-speed bench-large fuzz clean

all: test

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)" $(TORCH_PIP_ARGS)
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

# The benchmarks' optional extras: plots and SSIMULACRA 2 ([bench]), the JPEG XL codec
# (imagecodecs); each is skipped with a note if it cannot install.
bench-deps: venv
	$(BIN)/python -c "import matplotlib, ssimulacra2" 2>/dev/null || $(BIN)/python -m pip install -q -e ".[bench]" || echo "[bench] extra unavailable: no plots, SSIMULACRA 2 left out"
	$(BIN)/python -c "import imagecodecs" 2>/dev/null || $(BIN)/python -m pip install -q -e ".[jxl]" || echo "imagecodecs unavailable: jxl will be skipped"

demo: venv
	$(BIN)/python -m semcodec.demo

# The whole suite, its 15 slowest tests, and the linter (what .ci/run runs).
test: venv lint
	$(BIN)/python -m pytest -q --durations=15 tests

# The quick tier for every change: no test marked slow or subprocess (pyproject.toml).
test-fast: venv
	$(BIN)/python -m pytest -q -m "not slow and not subprocess" tests

lint: venv
	$(BIN)/ruff check src tests tools
	$(BIN)/ruff format --check src tests tools

bench: bench-deps
	$(BIN)/semcodec bench rd --images $(KODAK) --out bench-out/kodak.json --csv bench-out/kodak.csv --plot docs/rd-kodak.png

bench-bsds: bench-deps
	$(BIN)/semcodec bench rd --images $(BSDS) --out bench-out/bsds.json --csv bench-out/bsds.csv --plot docs/rd-bsds.png

# e.g. make bench-speed SPEED_ARGS="--limit 4 --threads 1"
SPEED_ARGS ?=
bench-speed: venv
	$(BIN)/semcodec bench speed --images $(KODAK) --out bench-out/speed.json $(SPEED_ARGS)

clean:
	rm -rf build dist *.egg-info src/*.egg-info demo-out bench-out .pytest_cache

# ----- robustness (docs/robustness.md) -----------------------------------------------------------
FUZZ_SECONDS ?= 600

fuzz: venv
	$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/python -m pip install -q atheris || echo "atheris unavailable: seeded random-mutation mode"
	nice -n 10 $(BIN)/python fuzz/fuzz_decoders.py --seconds $(FUZZ_SECONDS)

bench-large: venv
	nice -n 10 $(BIN)/semcodec bench large

# ----- benchmark helpers (docs/benchmarks.md) ----------------------------------------------------
.PHONY: bench-classic bench-report

# Classic codecs only (no model needed): the "Classic codecs on Kodak" table of docs/benchmarks.md.
bench-classic: bench-deps
	$(BIN)/semcodec bench rd --images $(KODAK) --codecs jpeg,webp,jpeg2000,avif,jxl --out bench-out/kodak-classic.json --csv bench-out/kodak-classic.csv --plot bench-out/kodak-classic.png

# Tables (Markdown) and plot again from an existing result, without re-running: REPORT=bench-out/bsds.json
REPORT ?= bench-out/kodak.json
bench-report: venv
	$(BIN)/semcodec bench report $(REPORT) --markdown $(basename $(REPORT)).md --plot $(basename $(REPORT)).png
