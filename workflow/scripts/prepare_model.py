"""Thin wrapper: de-quantize an embedded or GGUF model into a safetensors directory."""
from pathlib import Path

from qclm.cli import configure_logging
from qclm.models import parse_model_row, prepare_model

configure_logging(snakemake.log[0])
spec = parse_model_row(snakemake.params.model, "config model table", 0)
prepare_model(spec, Path(snakemake.output[0]).parent)
