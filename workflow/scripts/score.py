"""Thin wrapper: one model x questionnaire x condition -> token log-probabilities (Parquet).

A failure ends the job with one line in its log and on stderr, and no traceback:
``model NAME: cannot load: CAUSE`` when the model cannot be loaded (other models' jobs go on
under --keep-going), ``model NAME: QUESTIONNAIRE/CONDITION: ...`` for a non-finite log-prob or a
continuation that tokenizes differently at the boundary (the message names the variant)."""
import logging
import sys
from pathlib import Path

import torch

from qclm.cli import configure_logging
from qclm.engine import BoundaryError
from qclm.logprobs import NumericalError, score_condition, write_parquet
from qclm.models import ModelLoadError, load_model, parse_model_row
from qclm.protocol import Protocol

configure_logging(snakemake.log[0])
log = logging.getLogger("qclm.score")


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or "(no message)"
    text = text if len(text) <= 400 else text[:397] + "..."
    return text if isinstance(err, ModelLoadError) else f"{type(err).__name__}: {text}"


def fail(line: str) -> None:
    log.error(line)
    print(line, file=sys.stderr)
    sys.exit(1)


torch.set_num_threads(snakemake.threads)
output = Path(snakemake.output[0])
# write_parquet writes .NAME.PID.tmp and renames it; a job killed mid-write leaves its temporary file
for stale in output.parent.glob(f".{output.name}.*.tmp"):
    stale.unlink(missing_ok=True)
spec = parse_model_row(snakemake.params.model, "config model table", 0)
scoring = snakemake.params.scoring
prepared_dir = Path(snakemake.params.models_dir) / spec.name
try:
    loaded = load_model(spec, prepared_dir, scoring.get("device", "auto"))
except Exception as err:  # noqa: BLE001 - any cause: fail this model's job with one line
    fail(f"model {spec.name}: cannot load: {one_line(err)}")
questionnaire, condition = snakemake.wildcards.questionnaire, snakemake.wildcards.condition
try:
    df, metadata = score_condition(
        spec,
        snakemake.input.questionnaire,
        condition,
        snakemake.input.stimuli or None,
        Protocol.from_config(snakemake.params.protocol),
        scoring,
        prepared_dir=prepared_dir,
        model_and_tokenizer=loaded,
    )
except (NumericalError, BoundaryError) as err:
    fail(f"model {spec.name}: {questionnaire}/{condition}: {one_line(err)}")
write_parquet(df, output, metadata)
