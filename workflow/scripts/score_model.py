"""Thin wrapper: one model, loaded once -> one raw Parquet table per probe instance x condition (the rule's
outputs, in the order of params.cells; qclm.jobs.score_model)."""
import sys
from pathlib import Path

from qclm.models.table import parse_row
from qclm.jobs.gpu import bind_gpus
from qclm.logs import configure_logging

configure_logging(snakemake.log.main, announce=True)
spec = parse_row(snakemake.params.model, "config model table", 0)
gpu_locks = bind_gpus(str(snakemake.params.engine["device"]), spec.job_gpus)  # before torch starts CUDA

import torch  # noqa: E402

from qclm.contexts import ContextSettings  # noqa: E402
from qclm.jobs.score_model import CellSpec, run_scoring_job  # noqa: E402
from qclm.settings import run_only  # noqa: E402

torch.set_num_threads(snakemake.threads)
sys.exit(run_scoring_job(
    spec,
    [CellSpec(**cell) for cell in snakemake.params.cells],
    list(snakemake.output),
    list(snakemake.log.cells),
    ContextSettings.from_config(snakemake.params.contexts),
    # the settings that change no number (server backends' concurrency, timeouts...) come from the config, not
    # the params: changing them reruns no job
    {**snakemake.params.engine, **run_only(snakemake.config)},
    prepared_dir=Path(snakemake.params.models_dir) / spec.name,
    cache_dir=Path(snakemake.params.cache_dir),
))
