"""Thin wrapper: token log-probabilities -> variant probabilities (eq. 1, normalization) and item scores (eq. 2)."""
import pandas as pd

from qclm.logs import configure_logging
from qclm.parquet import read_metadata, write_parquet
from qclm.probes.likert.equations import condition_tables

configure_logging(snakemake.log[0])
tokens = pd.read_parquet(snakemake.input[0])
variants, items = condition_tables(tokens, snakemake.params.aggregation, snakemake.params.item_score,
                                   snakemake.params.normalization_epsilon)
meta = read_metadata(snakemake.input[0])
write_parquet(variants, snakemake.output.variants, meta)
write_parquet(items, snakemake.output.item_table, meta)
