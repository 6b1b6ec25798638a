"""The survey's tables on the CPU (no torch): a cell's raw table -> its ``responses`` (every generation through
every post-processing step, with a status, and the forced choice on the identical prompt beside it) and its
``choices`` (one row per option of a prompt, the three forced choices side by side: the option's number, the one
the analysis reads, then its label alone and the whole option); across cells, the survey's item scores in the
item-score shape (:data:`qclm.analysis.permodel.ITEM_COLUMNS`, with the item's dimension)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from qclm.probes.survey.judge import process
from qclm.probes.survey.material import FORCED_CHOICES, PROMPT_KEY, SCORED

#: the responses table (one row per generation; none is dropped)
RESPONSE_COLUMNS = PROMPT_KEY + [
    "dimension", "seed", "repetition", "request_seed", "prompt_sha256", "new_tokens", "finish_reason", "raw_text",
    "cleaned_text", "json", "judged_text", "validator", "validator_phrase", "judge", "mentions", "status",
    "judged_position", "judged_option", "option_score", "score", "fc_argmax_position", "fc_argmax_option",
    "fc_prob_judged", "fc_expected", "fc_agrees",
]
#: per forced choice, its columns in the choices table (the scored one unsuffixed, the others suffixed by name)
CHOICE_VALUES = ("logprob", "n_tokens", "prob", "prob_mean", "argmax", "expected", "mass")


#: the forced choice's argmax of a prompt none of whose options the row could score
_NO_ARGMAX = pd.Series({"position": None, "label": "", "expected": np.nan})


def suffix(answer: str) -> str:
    """The column suffix of a forced choice in the choices table ("" for the one the analysis reads)."""
    return "" if answer == SCORED else f"_{answer}"


#: the choices table (one row per option of a prompt; each forced choice's values side by side)
CHOICE_COLUMNS = PROMPT_KEY + ["dimension", "prompt_sha256", "position", "label", "option_score", "keyed_score",
                               "normalized"] + [f"{v}{suffix(a)}" for a in FORCED_CHOICES for v in CHOICE_VALUES]


def cell_tables(raw: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The ``responses`` and ``choices`` tables of one cell."""
    choices = _choices(raw[raw["record"] == "option"])
    gens = raw[raw["record"] == "response"].copy()
    options = choices

    by_prompt = {key: part.sort_values("position") for key, part in options.groupby(PROMPT_KEY, sort=False)}
    out = []
    for _, row in gens.iterrows():
        key = tuple(row[c] for c in PROMPT_KEY)
        shown = by_prompt[key]
        labels = list(shown["label"])
        done = process(row["raw_text"], labels, row["variant"] == "json", row["item_text"])
        v = done.verdict
        # no argmax where the row could score none of the options (an API's top log-probabilities held none)
        argmax = shown[shown["argmax"]].iloc[0] if shown["argmax"].any() else _NO_ARGMAX
        record = {c: row[c] for c in PROMPT_KEY + ["dimension"]}
        record.update({
            "seed": row["seed"], "repetition": row["repetition"], "request_seed": row["request_seed"],
            "prompt_sha256": row["prompt_sha256"], "new_tokens": row["new_tokens"],
            "finish_reason": row["finish_reason"], "raw_text": row["raw_text"], "cleaned_text": done.cleaned,
            "json": done.json, "judged_text": done.judged_text, "validator": done.validator,
            "validator_phrase": done.validator_phrase, "judge": v.name,
            "mentions": json.dumps({"counted": list(v.mentions), "negated": list(v.negated)}),
            "status": done.status, "fc_argmax_position": argmax["position"],
            "fc_argmax_option": argmax["label"], "fc_expected": float(argmax["expected"]),
        })
        if done.status == "answered":
            chosen = shown.iloc[v.index]
            record.update({"judged_position": int(chosen["position"]), "judged_option": chosen["label"],
                           "option_score": float(chosen["option_score"]), "score": float(chosen["keyed_score"]),
                           "fc_prob_judged": float(chosen["prob"]),
                           "fc_agrees": (bool(chosen["position"] == argmax["position"])
                                         if argmax is not _NO_ARGMAX else None)})
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


def _choices(options: pd.DataFrame) -> pd.DataFrame:
    """One row per option of a prompt: the forced choice the analysis reads (:data:`SCORED`) and the others beside
    it, each with its argmax and ``mass`` (the options' total probability among all answers the model could give
    there; empty where the log-probabilities are not normalized)."""
    parts = []
    for answer in FORCED_CHOICES:
        part = options[options["answer"] == answer].copy()
        part["position"] = part["position"].astype(int)
        part["argmax"] = False
        scored = part.dropna(subset=["prob"])  # a prompt none of whose options could be scored has no argmax
        if len(scored):
            best = scored.groupby(PROMPT_KEY, sort=False)["prob"].idxmax()
            part.loc[best.to_numpy(), "argmax"] = True
        mass = np.exp(part["logprob"].astype(float)).groupby([part[c] for c in PROMPT_KEY], sort=False) \
            .transform("sum") if len(part) else part["logprob"]
        part["mass"] = mass.where(part["normalized"].astype(bool)).astype(float)
        part = part.set_index(PROMPT_KEY + ["position"])
        parts.append(part[list(CHOICE_VALUES)].add_suffix(suffix(answer)))
    first = options[options["answer"] == SCORED].copy()
    first["position"] = first["position"].astype(int)
    base = first.set_index(PROMPT_KEY + ["position"])[["dimension", "prompt_sha256", "label", "option_score",
                                                       "keyed_score", "normalized"]]
    out = base.join(parts, how="left").reset_index()
    out = out[CHOICE_COLUMNS]
    return out.astype({"normalized": "boolean", **{f"argmax{suffix(a)}": bool for a in FORCED_CHOICES}})


def item_scores(responses: pd.DataFrame) -> pd.DataFrame:
    """The survey's item scores in the item-score shape: per model, instrument, item, condition and stimulus, the
    mean keyed score of the answered responses (every variant, order, persona, seed), with the item's dimension
    and how many were answered of how many; an item with no answered response has no row."""
    keys = ["model", "instrument", "item_id", "condition", "stimulus_id", "dimension"]
    if responses.empty:
        return pd.DataFrame(columns=keys + ["score", "n_answered", "n_responses"])
    grouped = responses.groupby(keys, sort=False, dropna=False)
    out = grouped.agg(score=("score", "mean"), n_answered=("score", "count"), n_responses=("status", "size"))
    out = out.reset_index()
    return out[out["n_answered"] > 0].reset_index(drop=True)
