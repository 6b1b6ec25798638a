"""What each of qlatent's choices does to the numbers (docs/qlatent.md), measured on one model.

Scores every variant of a questionnaire, vanilla and under one stress stimulus, with the engine
(the per-variant log-probabilities equal qlatent's on the same strings: benchmarks/peers.py), and
recomputes item and questionnaire scores with one of the authors' choices changed at a time:

- ``separator``: stimulus + "\\n" + item (qlatent's ``run(pre_text=...)``) instead of "\\n\\n";
- ``aggregation``: geometric mean of the token probabilities (``run(scoring=...)`` default);
- ``item score``: qlatent's QSOFTMAX(dim=["question", "answer"]) (epsilon 1e-10) and
  ``mean_score`` with the authors' ``dict_pos_neg`` cterm weights, filtered to S+
  ("positiveonly", what their validator's alpha and correlations use) or unfiltered;
- ``chat`` / ``chat_with_preamble``: qlatent's chat modes (its own ``apply_chat_template_or_raw``),
  the stimulus outside the chat, then the project's eqs. 1-2 on those probabilities;
- ``authors``: their separator, aggregation and positiveonly mean_score together.

For each: the questionnaire score (mean of item scores) vanilla and under the stimulus, the shift
(stimulus minus vanilla), the largest item-score change against the project's scores and the
Spearman correlation of item scores with them. Run it in .venv-peers (it calls qlatent's code):

    .venv-peers/bin/python benchmarks/qlatent_effects.py --json benchmarks/out/effects-smollm2.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import peers  # benchmarks/peers.py: the adapter between the project and qlatent
import torch
from scipy.stats import spearmanr

from qclm import bench
from qclm.engine import make_scorer, tokenize_requests
from qclm.equations import condition_tables, normalize, variant_probabilities
from qclm.models.loading import ensure_prepared, load_model
from qclm.models.table import load_model_table
from qclm.questionnaire import Questionnaire, load_questionnaire

ROOT = Path(__file__).resolve().parents[1]
MODES = ("chat", "chat_with_preamble")


def split_trailing_space(prefix: str, phrase: str) -> tuple[str, str]:
    """qlatent scores from the first token where prefix and prefix + phrase differ; a prefix that
    ends in spaces loses them to the phrase's first token. The same tokens, as a context without
    trailing spaces and a continuation that starts with them (lm-evaluation-harness's rule)."""
    context = prefix.rstrip(" ")
    return context, prefix[len(context):] + phrase


def chat_case(case: peers.Case, q: Questionnaire, tokenizer, mode: str) -> tuple[peers.Case, list[str]]:
    """The case's variants as qlatent's run(mode=...) builds them: the item prefix as the authors
    write it (ending "Answer: "), right-stripped into a user turn with the generation prompt,
    "My answer is " after it for chat_with_preamble, pre_text + "\\n" in front, then the phrase."""
    from qlatent.qclm.qclm import apply_chat_template_or_raw

    contexts, continuations = [], []
    for v in case.variants:
        text, effective = apply_chat_template_or_raw(tokenizer, v.prefix + " ")
        if effective != "chat":
            raise SystemExit(f"{mode}: the tokenizer has no chat template (qlatent would fall back to raw)")
        if mode == "chat_with_preamble":
            text += "My answer is "
        if case.pre_text is not None:
            text = case.pre_text + "\n" + text
        context, continuation = split_trailing_space(text, v.intensifier)
        contexts.append(context)
        continuations.append(continuation)
    return peers.Case(case.condition, case.stimulus_id, case.variants, contexts, case.pre_text), continuations


def score(scorer, tokenizer, contexts, continuations):
    return scorer.score(tokenize_requests(tokenizer, contexts, continuations))


def project_item_scores(tokens: pd.DataFrame, aggregation: str) -> pd.Series:
    """Eqs. 1-2 and the two-way normalization (qclm.equations): one score per item."""
    _, items = condition_tables(tokens, aggregation)
    return items.set_index("item_id")["score"]


def qlatent_normalized(tokens: pd.DataFrame, q: Questionnaire, aggregation: str):
    """Per item, qlatent's QSOFTMAX(dim=["question", "answer"]) of the variants' probabilities
    (p per variant by the project's aggregation): yields (item, question, normalized question)."""
    p = variant_probabilities(tokens, aggregation).set_index(["item_id", "cterm", "intensifier"])["p_raw"]
    for item in q.items:
        if item.id not in p.index.get_level_values(0):
            continue
        question = peers.qlatent_question(q, item)
        grid = question._pdf
        values = [p[(item.id, c, a[len(peers.CONTINUATION_LEAD):])] for c, a in zip(grid[peers.QUESTION_DIM],
                                                                                    grid[peers.ANSWER_DIM])]
        question._t = torch.tensor(values, dtype=torch.float32)  # QCLM.run stores its floats this way
        question._pdf["P"] = values
        yield item, question, question.softmax(dim=[peers.QUESTION_DIM, peers.ANSWER_DIM])


def qlatent_item_scores(tokens: pd.DataFrame, q: Questionnaire, aggregation: str, positive_only: bool) -> pd.Series:
    """qlatent's own item score on the same token probabilities: QSOFTMAX, then mean_score
    (filtered to S+, the validator's "positiveonly", or not)."""
    out = {}
    for item, question, norm in qlatent_normalized(tokens, q, aggregation):
        filt = question.get_filter_for_postive_keywords([peers.ANSWER_DIM]) if positive_only else {}
        out[item.id] = float(norm.mean_score(filt))
    return pd.Series(out)


def epsilon_effect(tokens: pd.DataFrame, q: Questionnaire, aggregation: str) -> dict:
    """QSOFTMAX (log(p + 1e-10), float32) against the two-way normalization in float64
    (qclm.equations.normalize) on the same probabilities: the largest differences of P_norm."""
    ours = normalize(variant_probabilities(tokens, aggregation)).set_index(["item_id", "cterm", "intensifier"])
    diffs, rel = [], []
    for item, _, norm in qlatent_normalized(tokens, q, aggregation):
        pdf = norm._pdf
        mine = ours.loc[[(item.id, c, a[len(peers.CONTINUATION_LEAD):])
                         for c, a in zip(pdf[peers.QUESTION_DIM], pdf[peers.ANSWER_DIM])], "p_norm"].to_numpy()
        diffs.append(np.abs(pdf["P"].to_numpy() - mine))
        rel.append(diffs[-1] / mine)
    p = variant_probabilities(tokens, aggregation)["p_raw"]
    return {"max_abs_p_norm_diff": float(np.max(np.concatenate(diffs))),
            "max_rel_p_norm_diff": float(np.max(np.concatenate(rel))), "min_p_raw": float(p.min())}


def summarize(name: str, scores: dict[str, pd.Series], baseline: dict[str, pd.Series]) -> dict:
    row = {"setting": name}
    for cond in ("vanilla", "stress"):
        s, b = scores[cond], baseline[cond].loc[scores[cond].index]
        row[f"{cond}_score"] = float(s.mean())
        row[f"{cond}_max_abs_item_change"] = float(np.max(np.abs(s - b)))
        row[f"{cond}_spearman_with_project"] = float(spearmanr(s, b).statistic)
    row["shift"] = row["stress_score"] - row["vanilla_score"]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    bench.model_options(ap, ROOT)
    ap.add_argument("--questionnaire", default=str(ROOT / "resources/questionnaires/stai_s.yaml"))
    ap.add_argument("--stimuli", default=str(ROOT / "resources/stimuli/stress.yaml"))
    ap.add_argument("--stimulus-index", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="first N items (0: all)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    spec = load_model_table(args.models)[args.model]
    prepared = ensure_prepared(spec, Path(args.models_dir) / spec.name)
    model, tok, prov = load_model(spec, prepared, "cpu")
    q = load_questionnaire(args.questionnaire)
    stim = Path(args.stimuli)
    ours = peers.build_cases(q, stim, args.stimulus_index, "long", "\n\n", args.limit)
    theirs_sep = peers.build_cases(q, stim, args.stimulus_index, "long", "\n", args.limit)
    scorer = make_scorer(model, "auto")
    t0 = time.perf_counter()

    def tokens(case, contexts, continuations):
        return peers.token_frame(case, spec.name, q.id, score(scorer, tok, contexts, continuations))

    base_tokens = {c.condition: tokens(c, c.contexts, c.continuations) for c in ours}
    sep_tokens = {"vanilla": base_tokens["vanilla"],
                  "stress": tokens(theirs_sep[1], theirs_sep[1].contexts, theirs_sep[1].continuations)}
    baseline = {c: project_item_scores(t, "harmonic") for c, t in base_tokens.items()}
    rows = [summarize("project (paper: \\n\\n, harmonic, eq. 2)", baseline, baseline)]
    rows.append(summarize("separator \\n", {c: project_item_scores(t, "harmonic") for c, t in sep_tokens.items()},
                          baseline))
    rows.append(summarize("aggregation geometric", {c: project_item_scores(t, "geometric")
                                                     for c, t in base_tokens.items()}, baseline))
    for positive in (True, False):
        label = "positiveonly" if positive else "unfiltered"
        rows.append(summarize(f"item score: QSOFTMAX + mean_score {label}",
                              {c: qlatent_item_scores(t, q, "harmonic", positive) for c, t in base_tokens.items()},
                              baseline))
    if tok.chat_template:
        for mode in MODES:
            mode_tokens = {}
            for case in ours:
                chat, continuations = chat_case(case, q, tok, mode)
                mode_tokens[case.condition] = tokens(chat, chat.contexts, continuations)
            rows.append(summarize(f"mode {mode}", {c: project_item_scores(t, "harmonic")
                                                   for c, t in mode_tokens.items()}, baseline))
    rows.append(summarize("authors (\\n, geometric, QSOFTMAX + mean_score positiveonly)",
                          {c: qlatent_item_scores(t, q, "geometric", True) for c, t in sep_tokens.items()}, baseline))
    epsilon = {c: epsilon_effect(t, q, "harmonic") for c, t in base_tokens.items()}
    epsilon.update({f"{c} geometric": epsilon_effect(t, q, "geometric") for c, t in base_tokens.items()})
    seconds = time.perf_counter() - t0

    record = {"model": spec.name, "questionnaire": q.id, "items": len(baseline["vanilla"]),
              "stimulus_id": ours[1].stimulus_id, "dtype": prov["dtype"], "seconds": round(seconds, 1),
              "load_average": peers.load_average(), "rows": rows, "qsoftmax_epsilon": epsilon}
    print(f"\n{spec.name}, {q.id} ({record['items']} items), vanilla and {record['stimulus_id']}; "
          f"{seconds:.0f} s, load average {record['load_average']}")
    print("| setting | vanilla score | stress score | shift | max abs item change (vanilla / stress) | "
          "Spearman with project (vanilla / stress) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['setting']} | {r['vanilla_score']:+.4f} | {r['stress_score']:+.4f} | {r['shift']:+.4f} | "
              f"{r['vanilla_max_abs_item_change']:.4f} / {r['stress_max_abs_item_change']:.4f} | "
              f"{r['vanilla_spearman_with_project']:.3f} / {r['stress_spearman_with_project']:.3f} |")
    for cond, e in epsilon.items():
        print(f"QSOFTMAX vs two-way normalization ({cond}): max |dP_norm| {e['max_abs_p_norm_diff']:.2e}, "
              f"max relative {e['max_rel_p_norm_diff']:.2e}, smallest p {e['min_p_raw']:.2e}")
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
