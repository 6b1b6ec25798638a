"""Thin wrapper: de-quantize an embedded or GGUF model into a safetensors directory."""
from pathlib import Path

from qclm.logs import configure_logging
from qclm.models.loading import prepare_model
from qclm.models.table import parse_model_row

configure_logging(snakemake.log[0])
spec = parse_model_row(snakemake.params.model, "config model table", 0)
prepare_model(spec, Path(snakemake.output[0]).parent)
