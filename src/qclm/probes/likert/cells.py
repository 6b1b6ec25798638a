"""Scoring one cell, a model x questionnaire x condition, into a Parquet table of raw token
log-probabilities, one row per continuation token, with provenance in the file metadata."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import qclm
from qclm.engine import make_scorer, tokenize_requests
from qclm.experiment import classes_of
from qclm.models.loading import load_model
from qclm.models.table import ModelSpec
from qclm.prompts import PromptBuilder, PromptFormat
from qclm.contexts import Protocol, condition_contexts
from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli

log = logging.getLogger("qclm.probes.likert.cells")

COLUMNS = ["model", "questionnaire", "condition", "stimulus_id", "template", "item_id", "cterm", "polarity",
           "intensifier", "level", "weight", "token_index", "token_id", "token", "logprob"]
class NumericalError(RuntimeError):
    """A log-probability that is NaN or infinite."""


def score_condition(spec: ModelSpec, questionnaire_path: str | Path, condition: str,
                    stimuli_paths: list[str | Path], protocol: Protocol, engine: dict,
                    prepared_dir: str | Path | None = None, model_and_tokenizer=None) -> tuple[pd.DataFrame, dict]:
    """Score every variant of a questionnaire under every context of a condition; ``stimuli_paths``
    holds the stimulus file of each class of the condition, in order (none for vanilla)."""
    from tqdm import tqdm

    q = load_questionnaire(questionnaire_path)
    stimuli = [load_stimuli(path, expected_class=cls) for path, cls in zip(stimuli_paths, classes_of(condition),
                                                                             strict=True)]
    contexts = condition_contexts(q, condition, stimuli, protocol)
    if model_and_tokenizer is None:
        model, tokenizer, provenance = load_model(spec, prepared_dir, engine.get("device", "auto"))
    else:
        model, tokenizer, provenance = model_and_tokenizer
    fmt = PromptFormat.from_settings(spec.prompt_format, engine)
    builder = PromptBuilder(tokenizer, fmt)
    t0 = time.perf_counter()
    total = sum(len(c.variants) for c in contexts)
    scorer = make_scorer(model, engine.get("method", "auto"), int(engine.get("batch_size", 16)),
                         engine.get("pack_tokens", "auto"))
    frames = []
    with tqdm(total=total, desc=f"{spec.name}/{q.id}/{condition}", unit="variant", mininterval=5) as bar:
        for ctx in contexts:
            requests, describe = context_requests(builder, q, ctx, engine.get("boundary", "error"))
            logprobs = scorer.score(requests, progress=bar.update)
            for i, lp in enumerate(logprobs):
                if not np.all(np.isfinite(lp)):
                    raise NumericalError(f"non-finite log-probability {lp.tolist()} for {describe(i)}")
            frames.append(_rows(spec.name, q.id, condition, ctx, requests, logprobs, tokenizer))
    df = pd.concat(frames, ignore_index=True)
    seconds = time.perf_counter() - t0
    stats = scorer.stats
    log.info("%s/%s/%s: %d variants, %d contexts, %d tokens computed, %.1f s (%s)", spec.name, q.id, condition,
             total, len(contexts), stats.tokens_computed, seconds, stats.method)
    metadata = {
        **provenance, "qclm": qclm.__version__, "questionnaire": q.id, "questionnaire_sha256": q.sha256,
        "condition": condition, "stimuli_files": [str(p) for p in stimuli_paths],
        "stimuli_sha256": [s.sha256 for s in stimuli], "stimulus_version": protocol.version,
        "separator": protocol.separator, "limit_items": protocol.limit_items, **fmt.provenance(),
        "templates": list(q.templates), "templates_scored": protocol.template_ids(q),
        "templates_extra_limit_stimuli": protocol.extra_limit_stimuli,
        "limit_stimuli": protocol.limit_stimuli, "scoring_method": stats.method, "scoring_notes": stats.notes,
        "boundary": engine.get("boundary", "error"), "params_b": spec.params_b, "model_type": spec.type,
        "family": spec.family, "tokens_computed": stats.tokens_computed, "seconds": round(seconds, 3),
    }
    return df, metadata


def context_requests(builder: PromptBuilder, q, ctx, boundary: str = "error"):
    """The tokenized requests of every variant of one context, as a model scores them (the scoring jobs and
    ``qclm render`` both build them here), and a function describing variant i for error messages."""

    def describe(i: int) -> str:
        v = ctx.variants[i]
        return (f"{q.path}: item {v.item_id}: cterm {v.cterm!r}, intensifier {v.intensifier!r}"
                + (f", template {v.template}" if len(q.templates) > 1 else "")
                + (f", stimulus {ctx.stimulus_id}" if ctx.stimulus_id else ""))

    texts, continuations = builder.build(ctx.stimulus, ctx.variants)
    return tokenize_requests(builder.tokenizer, texts, continuations, boundary, describe), describe


def _rows(model: str, questionnaire: str, condition: str, ctx, requests, logprobs, tokenizer) -> pd.DataFrame:
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for v, r, lp in zip(ctx.variants, requests, logprobs):
        n = len(r.continuation)
        for name, value in (("model", model), ("questionnaire", questionnaire), ("condition", condition),
                            ("stimulus_id", ctx.stimulus_id), ("template", v.template), ("item_id", v.item_id),
                            ("cterm", v.cterm),
                            ("polarity", v.polarity), ("intensifier", v.intensifier), ("level", v.level),
                            ("weight", v.weight)):
            cols[name].extend([value] * n)
        cols["token_index"].extend(range(n))
        cols["token_id"].extend(r.continuation)
        cols["token"].extend(tokenizer.convert_ids_to_tokens(list(r.continuation)))
        cols["logprob"].extend(lp.astype(np.float64).tolist())
    df = pd.DataFrame(cols)
    return df.astype({"token_index": "int32", "token_id": "int64", "weight": "float64", "logprob": "float64"})
