"""Reading and checking the tables the analysis stage consumes (the score aggregation of method.md
section 5 is in :mod:`qclm.equations`, shared with the workflow).

Schemas (extra columns are ignored):

- item scores (``results/scores/item_scores.parquet`` or any CSV/Parquet in the same form):
  model, questionnaire, item_id, condition (vanilla, a stimulus class, or classes joined by +),
  stimulus_id ("" for vanilla), score, and optional params_b (billions of parameters, may be
  missing), template (the wording's id), default_template (true for each questionnaire's first
  template), and dtype and prompt_format (what each model ran in; shown on the overview page).
- silhouette (``results/scores/silhouette.csv``): model, questionnaire, item_id, silhouette, and
  optional template.
- variant probabilities (``results/scores/variant_probs.parquet``): model, questionnaire, condition,
  stimulus_id, item_id, cterm, polarity ("+"|"-"), intensifier, level, weight, p_raw, p_norm, and optional
  template.
- instruments (``results/scores/instruments.csv``, optional): questionnaire, construct, framing (state|trait),
  and optional name, n_items, item_wording, scale, templates, source.

Every error names the file and the column.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd

from qclm.analysis.permodel import INSTRUMENT, ITEM_COLUMNS, QUESTIONNAIRE
from qclm.errors import InputError
from qclm.experiment import VANILLA
from qclm.inputs import CONDITION_PATTERN, duplicate_column_problems, load_schema

log = logging.getLogger("qclm.analysis")

#: the item-score shape (qclm.analysis.permodel.ITEM_COLUMNS) with the Likert tables' name of the instrument column
ITEM_SCORE_COLUMNS = tuple(QUESTIONNAIRE if c == INSTRUMENT else c for c in ITEM_COLUMNS)
SILHOUETTE_COLUMNS = ("model", "questionnaire", "item_id", "silhouette")
VARIANT_PROB_COLUMNS = (
    "model", "questionnaire", "condition", "stimulus_id", "item_id", "cterm", "polarity",
    "intensifier", "level", "weight", "p_raw", "p_norm",
)
_TEXT_COLUMNS = ("model", "questionnaire", "item_id", "condition", "stimulus_id", "cterm", "polarity",
                 "intensifier", "level", "template")
OPTIONAL_ITEM_COLUMNS = ("params_b", "template", "default_template", "dtype", "prompt_format")


def read_table(path: str | Path, text_columns: tuple[str, ...] = _TEXT_COLUMNS,
               parquet_filters: list | None = None) -> pd.DataFrame:
    """Read a CSV, TSV or Parquet table; identifier columns are read as text ("" for missing).

    ``parquet_filters`` (pyarrow row filters) skip rows of a large Parquet file while reading.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix.lower() == ".gz" else path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path, filters=parquet_filters)
        elif suffix in (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt"):
            sep = "\t" if suffix.startswith(".tsv") else ","
            _check_header(path, sep)
            header = pd.read_csv(path, sep=sep, nrows=0).columns
            dtype = {c: str for c in text_columns if c in header}
            df = pd.read_csv(path, sep=sep, dtype=dtype, keep_default_na=False,
                             na_values={c: ["", "NA", "NaN", "nan"] for c in header if c not in dtype})
        else:
            raise InputError(f"{path}: unknown table format {path.suffix!r} (expected .csv, .tsv or .parquet)")
    except InputError:
        raise
    except Exception as exc:  # parser errors of pandas/pyarrow, reported with the file name
        raise InputError(f"{path}: cannot read table ({exc})") from exc
    for col in text_columns:
        if col in df.columns:
            df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str).str.strip()
    return df


def _check_header(path: Path, sep: str) -> None:
    """A column named twice is an error (pandas would rename the second to 'score.1' and read the first)."""
    import csv
    import gzip

    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
        header = next(csv.reader(f, delimiter=sep), [])
    problems = duplicate_column_problems([c.strip() for c in header], path, "line 1 (header)")
    if problems:
        raise InputError(problems)


def _require_columns(df: pd.DataFrame, columns: tuple[str, ...], path: Path | str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        names = ", ".join(f"`{c}`" for c in missing)
        raise InputError(f"{path}: missing column {names} (found: {', '.join(map(str, df.columns))})")


def _numeric_column(df: pd.DataFrame, column: str, path: Path | str, allow_missing: bool) -> pd.Series:
    """Column ``column`` as float; text that is not a number is an error naming file, column and row."""
    raw = df[column]
    values = pd.to_numeric(raw, errors="coerce").astype(float)
    bad = values.isna() & raw.notna() & (raw.astype(str).str.strip() != "")
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: column `{column}` has non-numeric value {raw.iloc[row]!r} (data row {row + 1})")
    if not allow_missing and values.isna().any():
        row = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise InputError(f"{path}: column `{column}` has a missing value (data row {row + 1})")
    return values


def _bool_column(values: pd.Series) -> pd.Series:
    """true/false as written in a CSV (or already boolean, from Parquet)."""
    return values.astype(str).str.strip().str.lower().isin(["true", "1", "yes"])


def load_item_scores(path: str | Path) -> pd.DataFrame:
    """Read and check an item-score table (schema in the module docstring).

    Rows with a missing score are dropped with a warning; everything else that breaks the schema
    (missing column, unknown condition, stimulus id on a vanilla row or missing on a stimulus row,
    duplicate rows, a model with two different sizes) is an :class:`InputError`.
    """
    path = Path(path)
    df = read_table(path)
    _require_columns(df, ITEM_SCORE_COLUMNS, path)
    keep = list(ITEM_SCORE_COLUMNS) + [c for c in OPTIONAL_ITEM_COLUMNS if c in df.columns]
    df = df[keep].copy()
    if df.empty:
        raise InputError(f"{path}: the table has no rows")
    for col in ("model", "questionnaire", "item_id"):
        if (df[col] == "").any():
            row = int(np.flatnonzero((df[col] == "").to_numpy())[0])
            raise InputError(f"{path}: column `{col}` is empty in data row {row + 1}")
    is_condition = {c: re.search(CONDITION_PATTERN, str(c)) is not None for c in df["condition"].unique()}
    bad = ~df["condition"].map(is_condition).astype(bool)
    if bad.any():
        raise InputError(f"{path}: column `condition` has value(s) {sorted(set(df.loc[bad, 'condition']))} that "
                         f"are not conditions (vanilla, a class name, or class names joined by +)")
    bad = (df["condition"] == "vanilla") & (df["stimulus_id"] != "")
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: column `stimulus_id` must be empty for condition vanilla "
                         f"(data row {row + 1} has {df['stimulus_id'].iloc[row]!r})")
    bad = (df["condition"] != "vanilla") & (df["stimulus_id"] == "")
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: column `stimulus_id` is empty for condition "
                         f"{df['condition'].iloc[row]!r} (data row {row + 1})")
    df["score"] = _numeric_column(df, "score", path, allow_missing=True)
    if df["score"].isna().all():
        raise InputError(f"{path}: column `score` has no value in any of its {len(df)} rows (every score is missing: "
                         "was the scoring stage's output complete?)")
    if df["score"].isna().any():
        log.warning("%s: dropping %d rows with a missing `score`", path, int(df["score"].isna().sum()))
        df = df[df["score"].notna()]
    with_vanilla = set(df.loc[df["condition"] == VANILLA, "questionnaire"])
    without = [q for q in pd.unique(df["questionnaire"]) if q not in with_vanilla]
    if without:
        raise InputError(f"{path}: column `condition` has no {VANILLA} row with a score for questionnaire(s) "
                         f"{', '.join(map(str, without))} (conditions: {', '.join(sorted(set(df['condition'])))}): "
                         f"the z-scores and contrasts are measured against {VANILLA}, the item alone")
    if not np.isfinite(df["score"].to_numpy()).all():
        raise InputError(f"{path}: column `score` has infinite values")
    if "default_template" in df.columns:
        df["default_template"] = _bool_column(df["default_template"])
    key = ["model", "questionnaire", "item_id", "condition", "stimulus_id"] + (
        ["template"] if "template" in df.columns else [])
    dup = df.duplicated(key, keep=False)
    if dup.any():
        first = df.loc[dup, key].iloc[0].to_dict()
        raise InputError(f"{path}: {int(dup.sum())} duplicate rows for the key columns {key}, e.g. {first}")
    if "params_b" in df.columns:
        df["params_b"] = _numeric_column(df, "params_b", path, allow_missing=True)
        bad = df["params_b"].notna() & ~(np.isfinite(df["params_b"]) & (df["params_b"] > 0))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(f"{path}: column `params_b` must be a positive number (billions of parameters) or "
                             f"empty, got {float(df['params_b'].iloc[row])!r} (data row {row + 1})")
        n_sizes = df.dropna(subset=["params_b"]).groupby("model", sort=False)["params_b"].nunique()
        if (n_sizes > 1).any():
            raise InputError(f"{path}: column `params_b` has different values for model "
                             f"{n_sizes[n_sizes > 1].index[0]!r}")
    return df.reset_index(drop=True)


def load_silhouette(path: str | Path) -> pd.DataFrame:
    """Read and check the per-item silhouette table of the scoring stage (method.md section 7)."""
    df = read_table(path)
    _require_columns(df, SILHOUETTE_COLUMNS, path)
    df = df[list(SILHOUETTE_COLUMNS) + [c for c in ("template", "default_template") if c in df.columns]].copy()
    if "default_template" in df.columns:
        df["default_template"] = _bool_column(df["default_template"])
    df["silhouette"] = _numeric_column(df, "silhouette", path, allow_missing=True)
    return df


def load_variant_probs(path: str | Path, condition: str | None = "vanilla") -> pd.DataFrame:
    """Read and check the variant probability table (raw and two-way-normalized, method.md sections 3-4).

    Only rows of ``condition`` are kept (the table has one row per variant and stimulus, millions of rows
    for a full run; the heatmap needs vanilla only). ``condition=None`` keeps all rows (the normalization
    sensitivity renormalizes every condition).
    """
    filters = None
    if condition is not None and Path(path).suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            if "condition" in pq.read_schema(path).names:
                filters = [("condition", "==", condition)]
        except Exception:  # unreadable: read_table reports it with the file name
            pass
    df = read_table(path, parquet_filters=filters)
    _require_columns(df, VARIANT_PROB_COLUMNS, path)
    if condition is not None:
        df = df[df["condition"] == condition]
    df = df[list(VARIANT_PROB_COLUMNS) + [c for c in ("template",) if c in df.columns]].copy()
    for col in ("weight", "p_raw", "p_norm"):
        df[col] = _numeric_column(df, col, path, allow_missing=True)
    bad = ~df["polarity"].isin(["+", "-"])
    if bad.any():
        raise InputError(f"{path}: column `polarity` has value {df['polarity'][bad].iloc[0]!r}; expected '+' or '-'")
    return df


def select_heatmap_item(variant_probs: pd.DataFrame, item: str | None) -> tuple[str, str]:
    """(questionnaire, item_id) for the heatmap: ``QUESTIONNAIRE:ITEM`` or ``ITEM``; default the first item
    of the first questionnaire in the table. Raises ValueError naming the column when not found."""
    if not item:
        first = variant_probs.iloc[0]
        q = first["questionnaire"]
        return q, variant_probs.loc[variant_probs["questionnaire"] == q, "item_id"].iloc[0]
    if ":" in item and not (variant_probs["item_id"] == item).any():
        q, item_id = item.split(":", 1)
        hit = (variant_probs["questionnaire"] == q) & (variant_probs["item_id"] == item_id)
    else:
        item_id = item
        hit = variant_probs["item_id"] == item_id
    qs = list(pd.unique(variant_probs.loc[hit, "questionnaire"]))
    if not qs:
        raise ValueError(f"heatmap item {item!r} not found in column `item_id` of the variant probability table")
    if len(qs) > 1:
        raise ValueError(f"heatmap item {item!r} occurs in questionnaires {qs}; write QUESTIONNAIRE:ITEM")
    return qs[0], item_id


def model_sizes(items: pd.DataFrame) -> pd.Series:
    """Parameter count (billions) per model from the optional ``params_b`` column; NaN where unknown."""
    models = pd.unique(items["model"])
    if "params_b" not in items.columns:
        return pd.Series(np.nan, index=pd.Index(models, name="model"), name="params_b")
    sizes = items.dropna(subset=["params_b"]).groupby("model", sort=False)["params_b"].first()
    return sizes.reindex(pd.Index(models, name="model")).rename("params_b")


#: the columns of the instrument table (``results/scores/instruments.csv``, written by the workflow from the
#: questionnaire files, :func:`qclm.questionnaire.instrument_rows`) that the analysis needs; others are kept
INSTRUMENT_REQUIRED = ("questionnaire", "construct", "framing")


def load_instruments(path: str | Path, questionnaires: list[str] | None = None) -> pd.DataFrame:
    """Read and check the instrument table: one row per questionnaire with its construct and framing (state
    or trait), in the table's order. With ``questionnaires`` (those of the scores), only their rows are kept and
    a questionnaire without a row gets an empty construct and framing (warning)."""
    df = read_table(path, text_columns=_TEXT_COLUMNS + ("name", "construct", "framing", "item_wording", "scale",
                                                        "templates", "source", "control_of"))
    _require_columns(df, INSTRUMENT_REQUIRED, path)
    if (df["questionnaire"] == "").any():
        row = int(np.flatnonzero((df["questionnaire"] == "").to_numpy())[0])
        raise InputError(f"{path}: column `questionnaire` is empty in data row {row + 1}")
    dup = df["questionnaire"].duplicated()
    if dup.any():
        raise InputError(f"{path}: column `questionnaire` repeats {df.loc[dup, 'questionnaire'].iloc[0]!r}")
    framings = tuple(load_schema("questionnaire")["properties"]["framing"]["enum"])  # one home: the schema
    bad = ~df["framing"].isin(framings + ("",))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: column `framing` must be {' or '.join(framings)} (or empty), got "
                         f"{df['framing'].iloc[row]!r} (data row {row + 1}, questionnaire "
                         f"{df['questionnaire'].iloc[row]!r})")
    if questionnaires is not None:
        missing = [q for q in questionnaires if q not in set(df["questionnaire"])]
        if missing:
            log.warning("%s: no row for questionnaire(s) %s; their construct and framing are unknown", path,
                        ", ".join(missing))
            df = pd.concat([df, pd.DataFrame({"questionnaire": missing, "construct": "", "framing": ""})],
                           ignore_index=True)
        wanted = set(questionnaires)
        df = df[df["questionnaire"].isin(wanted)]  # the table's order (the config's), the scores' questionnaires
    for col in df.columns:
        if df[col].dtype == object:
            df[col] = df[col].fillna("")
    return df.reset_index(drop=True)


#: the columns of the memorization table (``analysis/memorization.csv``) the instrument tables read
MEMORIZATION_REQUIRED = ("model", "condition", "instrument", "task", "metric", "value", "p_holm", "above_decoy")


def load_memorization(path: str | Path) -> pd.DataFrame:
    """Read and check the memorization probe's table (the instruments whose items a model has seen are flagged in
    ``instrument_validation``)."""
    df = read_table(path, text_columns=("model", "condition", "instrument", "task", "metric"))
    _require_columns(df, MEMORIZATION_REQUIRED, path)
    bad = ~df["above_decoy"].astype(str).isin(["True", "False"])
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: column `above_decoy` must be True or False, got {df['above_decoy'].iloc[row]!r} "
                         f"(data row {row + 1})")
    df["above_decoy"] = df["above_decoy"].astype(str) == "True"
    return df


def exposure_notes(table: pd.DataFrame) -> dict[tuple[str, str], str]:
    """The instruments whose items a model has seen, from the memorization kind's table (its declared optional
    table, read by :func:`load_memorization`: its columns are the contract, no import of that kind): (model,
    instrument) -> a note for the library analysis's instrument tables, for every exposure row marked
    ``above_decoy``."""
    rows = table[(table["task"] == "exposure") & table["above_decoy"].astype(bool)]
    notes: dict[tuple[str, str], list[str]] = {}
    for r in rows.itertuples():
        notes.setdefault((r.model, r.instrument), []).append(
            f"{r.metric} {r.value:.2f}, Holm p {r.p_holm:.3f}, {r.condition}")
    return {k: "items exposed above the decoy (memorization: " + "; ".join(v) + ")" for k, v in notes.items()}
