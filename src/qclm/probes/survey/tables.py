"""The survey's tables on the CPU (no torch): a cell's raw table -> its ``responses`` (every generation through
every post-processing step, with a status, and the forced choice on the identical prompt beside it) and its
``choices`` (the forced choice, one row per option); across cells, the survey's item scores in the item-score
shape (:data:`qclm.probes.items.ITEM_COLUMNS`)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from qclm.probes.survey.judge import process
from qclm.probes.survey.material import PROMPT_KEY

#: the responses table (one row per generation; none is dropped)
RESPONSE_COLUMNS = PROMPT_KEY + [
    "seed", "repetition", "request_seed", "prompt_sha256", "new_tokens", "finish_reason", "raw_text", "cleaned_text",
    "json", "judged_text", "refusal", "judge", "mentions", "status", "judged_position", "judged_option",
    "option_score", "score", "fc_argmax_position", "fc_argmax_option", "fc_prob_judged", "fc_expected", "fc_agrees",
]
#: the choices table (one row per option of a forced choice)
CHOICE_COLUMNS = PROMPT_KEY + ["prompt_sha256", "position", "label", "option_score", "keyed_score", "logprob",
                               "n_tokens", "prob", "prob_mean", "normalized", "argmax", "expected"]


def cell_tables(raw: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The ``responses`` and ``choices`` tables of one cell."""
    options = raw[raw["record"] == "option"].copy()
    gens = raw[raw["record"] == "response"].copy()
    options["position"] = options["position"].astype(int)
    best = options.loc[options.groupby(PROMPT_KEY, sort=False)["prob"].idxmax()] if len(options) else options
    options["argmax"] = False
    options.loc[best.index, "argmax"] = True
    choices = options[CHOICE_COLUMNS].reset_index(drop=True)

    by_prompt = {key: part.sort_values("position") for key, part in options.groupby(PROMPT_KEY, sort=False)}
    out = []
    for _, row in gens.iterrows():
        key = tuple(row[c] for c in PROMPT_KEY)
        shown = by_prompt[key]
        labels = list(shown["label"])
        done = process(row["raw_text"], labels, row["variant"] == "json")
        v = done.verdict
        argmax = shown[shown["argmax"]].iloc[0]
        record = {c: row[c] for c in PROMPT_KEY}
        record.update({
            "seed": row["seed"], "repetition": row["repetition"], "request_seed": row["request_seed"],
            "prompt_sha256": row["prompt_sha256"], "new_tokens": row["new_tokens"],
            "finish_reason": row["finish_reason"], "raw_text": row["raw_text"], "cleaned_text": done.cleaned,
            "json": done.json, "judged_text": done.judged_text, "refusal": done.refusal, "judge": v.name,
            "mentions": json.dumps({"counted": list(v.mentions), "negated": list(v.negated)}),
            "status": done.status, "fc_argmax_position": int(argmax["position"]),
            "fc_argmax_option": argmax["label"], "fc_expected": float(argmax["expected"]),
        })
        if done.status == "answered":
            chosen = shown.iloc[v.index]
            record.update({"judged_position": int(chosen["position"]), "judged_option": chosen["label"],
                           "option_score": float(chosen["option_score"]), "score": float(chosen["keyed_score"]),
                           "fc_prob_judged": float(chosen["prob"]),
                           "fc_agrees": bool(chosen["position"] == argmax["position"])})
        else:
            record.update({"judged_position": None, "judged_option": "", "option_score": np.nan, "score": np.nan,
                           "fc_prob_judged": np.nan, "fc_agrees": None})
        out.append(record)
    responses = pd.DataFrame(out, columns=RESPONSE_COLUMNS)
    responses = responses.astype({"judged_position": "Int64", "fc_agrees": "boolean", "seed": "Int64",
                                  "repetition": "Int64", "request_seed": "Int64", "new_tokens": "Int64",
                                  "fc_argmax_position": "Int64", "option_score": "float64", "score": "float64",
                                  "fc_prob_judged": "float64", "fc_expected": "float64"})
    return {"responses": responses, "choices": choices}


def item_scores(responses: pd.DataFrame) -> pd.DataFrame:
    """The survey's item scores in the item-score shape: per model, instrument, item, condition and stimulus, the
    mean keyed score of the answered responses (every variant, order, persona, seed), with how many were answered
    of how many; an item with no answered response has no row."""
    keys = ["model", "instrument", "item_id", "condition", "stimulus_id"]
    if responses.empty:
        return pd.DataFrame(columns=keys + ["score", "n_answered", "n_responses"])
    grouped = responses.groupby(keys, sort=False, dropna=False)
    out = grouped.agg(score=("score", "mean"), n_answered=("score", "count"), n_responses=("status", "size"))
    out = out.reset_index()
    return out[out["n_answered"] > 0].reset_index(drop=True)
