"""Thin wrapper: one model, loaded once -> one Parquet of token log-probabilities per
questionnaire x condition (the rule's outputs, in the order of params.cells)."""
import sys
from pathlib import Path

from qclm.cli import configure_logging
from qclm.scoring_job import Cell, bind_one_gpu

configure_logging(snakemake.log.main)
gpu_lock = bind_one_gpu(str(snakemake.params.scoring.get("device", "auto")))  # before torch starts CUDA

import torch  # noqa: E402

from qclm.models import parse_model_row  # noqa: E402
from qclm.protocol import Protocol  # noqa: E402
from qclm.scoring_job import run_scoring_job  # noqa: E402

torch.set_num_threads(snakemake.threads)
spec = parse_model_row(snakemake.params.model, "config model table", 0)
sys.exit(run_scoring_job(
    spec,
    [Cell(**cell) for cell in snakemake.params.cells],
    list(snakemake.output),
    list(snakemake.log.cells),
    Protocol.from_config(snakemake.params.protocol),
    snakemake.params.scoring,
    prepared_dir=Path(snakemake.params.models_dir) / spec.name,
    cache_dir=Path(snakemake.params.cache_dir),
))
