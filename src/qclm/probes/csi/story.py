"""The story test (issue 18, point 4b; the paper's, small): does the model's own tragedy list make its stories
tragic? For instruct models, under vanilla, after the word lists are scored: for k = 0..5 and ``story_samples``
samples each, a story generated from k words of the model's tragedy list and 5 - k of its comedy list, then rated
by the model on a 1-10 tragedy scale (both asked through the scoring job's request loop, ``cell.ask``) as a
forced choice over "1/10" ... "10/10" (the expected value under the
options' probabilities). The analysis reports the Spearman correlation between k and the rating.

The tragedy list: the words labelled with the second label in every repetition; where fewer than
:data:`~qclm.probes.csi.columns.POOL_MIN`, the words with the lowest mean bias (log p(first label) - log p(second)),
and the comedy list the same way from the other end, never sharing a word (``story_pool`` says which rule gave
the words). The words of a story are drawn with a generator seeded from (run seed, model, instance, k, sample),
the generation's seed likewise (:func:`qclm.engine.requests.derive_seed`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.engine.requests import GenerateRequest, GenerationSettings, derive_seed
from qclm.probes.base import Labelled
from qclm.probes.csi import prompts as P

#: sampled stories: a little below temperature 1, so a small model stays on the task
TEMPERATURE = 0.7
TOP_P = 0.95


def pools(answers: pd.DataFrame, pool_min: int) -> tuple[list[str], list[str], str]:
    """(tragedy words, comedy words, how they were chosen) from one context's answers on the word list."""
    words = answers[answers["part"] == "words"].assign(bias=lambda d: d["logp_a"] - d["logp_b"])
    per = words.groupby("word", sort=False).agg(bias=("bias", "mean"), all_b=("choice", lambda c: (c == "b").all()),
                                                 all_a=("choice", lambda c: (c == "a").all()))
    tragedy = per.index[per["all_b"]].tolist()
    comedy = per.index[per["all_a"]].tolist()
    how = "consistent"
    if len(tragedy) < pool_min or len(comedy) < pool_min:
        how = "lowest/highest bias"
        ranked = per.sort_values("bias").index.tolist()
        half = len(ranked) // 2
        if len(tragedy) < pool_min:
            tragedy = ranked[:min(pool_min, half)]
        if len(comedy) < pool_min:
            comedy = [w for w in reversed(ranked) if w not in tragedy][:min(pool_min, half)]
    return tragedy, comedy, how


def story_test(probe, cell, ctx, answers: pd.DataFrame) -> pd.DataFrame:
    """The story rows of one model (module docstring)."""
    from qclm.probes.csi.columns import COLUMNS, POOL_MIN, STORY_WORDS

    s = probe.settings
    tragedy, comedy, how = pools(answers, POOL_MIN)
    if len(tragedy) < STORY_WORDS or len(comedy) < STORY_WORDS:
        return pd.DataFrame(columns=COLUMNS)
    plans = []
    for k in range(STORY_WORDS + 1):
        for sample in range(1, s["story_samples"] + 1):
            rng = np.random.default_rng(derive_seed(cell.asking.seed, cell.model, probe.instance.id, "story words", k,
                                                    sample))
            words = (list(rng.choice(tragedy, k, replace=False))
                     + list(rng.choice(comedy, STORY_WORDS - k, replace=False)))
            rng.shuffle(words)
            plans.append((k, sample, [str(w) for w in words]))
    settings = GenerationSettings(max_new_tokens=s["story_tokens"], temperature=TEMPERATURE, top_p=TOP_P,
                                  stop=("\n\n",))
    generated = cell.ask([(ctx, Labelled({}, GenerateRequest(
        P.story_context(cell.prompts, ctx.lead, words),
        derive_seed(cell.asking.seed, cell.model, probe.instance.id, "story", k, sample), settings),
        f"story test: k={k}, sample {sample}")) for k, sample, words in plans])
    ratings = cell.ask([(ctx, Labelled({}, P.rating_request(cell.prompts, ctx.lead, g.result.text),
                                       f"story test rating: k={k}, sample {sample}"))
                        for (k, sample, _), g in zip(plans, generated)])
    rows = [{"model": cell.model, "probe": probe.instance.id, "condition": cell.condition,
             "stimulus_id": ctx.stimulus_id, "part": "story", "label_a": s["labels"][0], "label_b": s["labels"][1],
             "label_other": s["other"], "story_k": k, "story_sample": sample, "story_words": " ".join(words),
             "story_pool": how, "story_text": g.result.text, "story_finish": g.result.finish_reason,
             "rating_expected": r.result.expected, "rating_argmax": P.RATING_VALUES[r.result.argmax]}
            for (k, sample, words), g, r in zip(plans, generated, ratings)]
    return pd.DataFrame(rows, columns=COLUMNS)
