"""Thin wrapper: one model x one intervention -> its checkpoints and marker (qclm.interventions.finetune)."""
from pathlib import Path

from qclm.jobs.gpu import bind_one_gpu
from qclm.logs import configure_logging

configure_logging(snakemake.log[0], announce=True)
gpu_lock = bind_one_gpu(str(snakemake.params.device))  # before torch starts CUDA

import torch  # noqa: E402

from qclm.interventions import Intervention  # noqa: E402
from qclm.corpus import load_corpus  # noqa: E402
from qclm.calibration.corpora import load_check  # noqa: E402
from qclm.interventions.finetune import finetune  # noqa: E402
from qclm.models.table import parse_model_row  # noqa: E402

torch.set_num_threads(snakemake.threads)
spec = parse_model_row(snakemake.params.model, "config model table", 0)
check = list(snakemake.input.check)  # a calibration run's manipulation check (an intervention: none)
sets, base = load_check(check[0]) if check else (None, False)
finetune(spec, Path(snakemake.params.models_dir) / spec.name, load_corpus(snakemake.input.corpus),
         Intervention(snakemake.wildcards.intervention, snakemake.params.settings), Path(snakemake.output[0]).parent,
         str(snakemake.params.device), check=sets, check_base=base)
