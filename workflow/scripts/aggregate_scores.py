"""Thin wrapper: per-job tables -> the tidy tables of results/scores/."""
import pandas as pd

from qclm.logs import configure_logging
from qclm.parquet import read_metadata, write_parquet
from qclm.models.table import load_model_table
from qclm.questionnaire import INSTRUMENT_COLUMNS, instrument_rows, load_questionnaire
from qclm.probes.likert.equations import collect_tables

configure_logging(snakemake.log[0])
models = load_model_table(snakemake.input.models)
# the dtype each model ran in (auto resolves per device) and its prompt format, from the scoring provenance
used = {}
for path in snakemake.input.item_tables:
    meta = read_metadata(path)
    used.setdefault(meta["model"], {"dtype": meta.get("dtype"), "prompt_format": meta.get("prompt_format", "raw")})
info = pd.DataFrame(
    [{"model": m.name, "params_b": m.params_b, "model_type": m.type, "family": m.family,
      **used.get(m.name, {"dtype": None, "prompt_format": None})} for m in models.values()]
)
default_templates = {q: load_questionnaire(path).templates[0] for q, path in snakemake.params.questionnaires.items()}
tables = collect_tables(
    [pd.read_parquet(p) for p in snakemake.input.item_tables],
    [pd.read_parquet(p) for p in snakemake.input.variant_tables],
    info,
    default_templates,
    snakemake.params.select,
)
out = snakemake.output
write_parquet(tables["items"], out.item_scores, {"table": "item_scores"})
tables["items"].to_csv(out.item_scores_csv, index=False)
tables["questionnaires"].to_csv(out.questionnaires, index=False)
tables["conditions"].to_csv(out.conditions, index=False)
write_parquet(tables["variants"], out.variants, {"table": "variant_probs"})
tables["silhouette"].to_csv(out.silhouette, index=False)
instruments = pd.DataFrame(instrument_rows(snakemake.params.questionnaires), columns=INSTRUMENT_COLUMNS)
instruments.to_csv(out.instruments, index=False)
