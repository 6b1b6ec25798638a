"""Peers side by side: the authors' QCLM (PyPI qlatent), lm-evaluation-harness and the engine.

Runs, in one process on the same model and the same prompt strings (STAI-S items, vanilla and
under one stress stimulus), three scorers of P(intensifier | prefix):

``engine``
    the project's: ``qclm.engine.requests.tokenize_requests`` + ``make_scorer("auto")`` (method.md
    section 3; the reference of the comparison).
``lm-eval``
    lm-evaluation-harness ``HFLM.loglikelihood`` (batch 16) on the same (context, continuation)
    pairs; compared per variant as the summed continuation log-probability.
``qlatent``
    the authors' ``qlatent.qclm.qclm.QCLM(...).run(model=..., pre_text=..., scoring=...)``, one
    sequence at a time; it stores one aggregated probability per variant (``_pdf["P"]``), which is
    compared in log space with the project's aggregation of the same name (harmonic, geometric
    mean or product of the token probabilities; method.md section 3, ``qclm.equations``).

The prompts are the same strings, checked, not assumed: each item becomes a QCLM whose template is
the item's template with ``{cterm}`` -> ``{question}`` and ``{intensifier}`` -> ``{answer}``, the
answer keywords carry the project's leading space (``" very much"``), and the stimulus goes in as
``pre_text = stimulus + separator minus its last "\\n"`` (qlatent joins pre_text and item with one
"\\n"). A recording tokenizer captures every string qlatent tokenizes, and the run stops if they
are not exactly the project's contexts and context + continuation texts. The authors' own choices
(their separator, their template's space, their aggregation) differ from these: docs/qlatent.md.

    .venv-peers/bin/python benchmarks/peers.py                      # SmolLM2, --limit 6 items
    .venv-peers/bin/python benchmarks/peers.py --limit 0 --json benchmarks/out/peers-smollm2.json
    .venv-peers/bin/python benchmarks/peers.py --model gemma3-270m --limit 2

Run it in .venv-peers (``make peers-env``): qlatent and lm-eval are not in the project's .venv.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from qclm import bench
from qclm.contexts import ContextSettings
from qclm.engine import make_scorer, tokenize_requests
from qclm.equations import AGGREGATIONS, VARIANT_KEYS, variant_probabilities
from qclm.experiment import VANILLA
from qclm.models.loading import ensure_prepared, load_model
from qclm.models.table import load_model_table
from qclm.probes.likert.kind import Wordings, item_contexts
from qclm.questionnaire import (CONTINUATION_LEAD, CTERM_SLOT, INTENSIFIER_SLOT, Item, Questionnaire, Variant,
                                load_questionnaire)
from qclm.stimuli import load_stimuli

ROOT = Path(__file__).resolve().parents[1]
#: the project's aggregation name -> qlatent's ``scoring=`` name (qlatent/qclm/qclm.py VALID_SCORING_METHODS)
QLATENT_SCORING = {"harmonic": "harmonic_mean", "geometric": "geometric_mean", "product": "prod"}
#: the dimension names of a qlatent question, as the authors' questionnaires name them
QUESTION_DIM, ANSWER_DIM = "question", "answer"


@dataclass(frozen=True)
class Case:
    """One condition's variants: the project's contexts, and qlatent's pre_text for them."""

    condition: str
    stimulus_id: str
    variants: list[Variant]
    contexts: list[str]
    pre_text: str | None  # what qlatent's run(pre_text=...) needs to build the same contexts

    @property
    def continuations(self) -> list[str]:
        return [v.continuation for v in self.variants]


def qlatent_pre_text(lead: str) -> str:
    """qlatent builds ``pre_text + "\\n" + item prefix``; the project ``stimulus + separator + item
    prefix``. The same string needs pre_text = stimulus + separator without its last newline."""
    if not lead.endswith("\n"):
        raise ValueError(f"qlatent joins pre_text and item with '\\n': a separator ending otherwise "
                         f"({lead[-5:]!r}) cannot be reproduced")
    return lead[:-1]


def build_cases(q: Questionnaire, stimuli_path: Path, stimulus_index: int, version: str, separator: str,
                limit: int | None) -> list[Case]:
    """Vanilla and one stress stimulus, through the project's own protocol code, in each item's first
    (the paper's) template."""
    protocol = ContextSettings(version=version, separator=separator, limit_items=limit or None)
    vanilla = item_contexts(q, VANILLA, None, protocol, Wordings("first"))[0]
    stimuli = load_stimuli(stimuli_path, "stress")
    stress = item_contexts(q, "stress", stimuli, protocol, Wordings("first"))[stimulus_index]
    lead = stimuli.stimuli[stimulus_index].text(version) + separator
    assert all(t == lead + v.prefix for t, v in zip(stress.texts, stress.variants))
    return [Case(VANILLA, "", vanilla.variants, vanilla.texts, None),
            Case("stress", stress.stimulus_id, stress.variants, stress.texts, qlatent_pre_text(lead))]


def token_frame(case: Case, model_name: str, questionnaire: str, logprobs: list[np.ndarray]) -> pd.DataFrame:
    """Per-token log-probabilities in the layout qclm.equations takes (VARIANT_KEYS + logprob)."""
    rows = []
    for v, lp in zip(case.variants, logprobs):
        for x in lp:
            rows.append((model_name, questionnaire, case.condition, case.stimulus_id, v.template, v.item_id, v.cterm,
                         v.polarity, v.intensifier, v.level, v.weight, float(x)))
    return pd.DataFrame(rows, columns=VARIANT_KEYS + ["logprob"])


def project_probabilities(case: Case, model_name: str, questionnaire: str, logprobs: list[np.ndarray],
                          aggregation: str) -> pd.DataFrame:
    """Per-variant probabilities by the project's own equations (qclm.equations.variant_probabilities)
    from per-token log-probabilities; columns VARIANT_KEYS + p_raw + n_tokens."""
    return variant_probabilities(token_frame(case, model_name, questionnaire, logprobs), aggregation)


# -- qlatent --------------------------------------------------------------------------------------
class RecordingTokenizer:
    """Delegates to a tokenizer and records every text it is called with (qlatent calls
    ``tokenizer(text=[s], return_tensors="pt")``): the strings qlatent actually scores."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.texts: list[str] = []

    def __call__(self, *args, **kwargs):
        text = kwargs.get("text", args[0] if args else None)
        self.texts.extend([text] if isinstance(text, str) else list(text))
        return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


@dataclass
class PipelineLike:
    """What QCLM.run reads from its ``model`` argument (a transformers pipeline in the authors'
    code): ``.model``, ``.tokenizer``, ``.device``, and ``.model_identifier`` for QCACHE."""

    model: object
    tokenizer: object
    device: torch.device
    model_identifier: str


def qlatent_template(item: Item, template: str | None = None) -> str:
    """The item's template in qlatent's form: {cterm} -> {question}, {intensifier} -> {answer}."""
    text = item.templates[template] if template is not None else next(iter(item.templates.values()))
    return text.replace(CTERM_SLOT, "{" + QUESTION_DIM + "}").replace(INTENSIFIER_SLOT, "{" + ANSWER_DIM + "}")


def qlatent_question(q: Questionnaire, item: Item, answer_lead: str = CONTINUATION_LEAD):
    """One item as a qlatent QCLM, built the way the authors' questionnaires build theirs
    (qpsychometric .../stai_s_qclm.py): dimensions {"answer": Likert weights, "question":
    dict_pos_neg(S+, S-, 1.0)}. ``answer_lead`` goes in front of every intensifier phrase."""
    from qlatent.qabstract.qabstract import dict_pos_neg
    from qlatent.qclm.qclm import QCLM

    answers = {answer_lead + phrase: level.weight for phrase, level in q.intensifiers}
    dims = {ANSWER_DIM: answers, QUESTION_DIM: dict_pos_neg(list(item.plus), list(item.minus), 1.0)}
    # a fresh descriptor dict each time: QABSTRACT writes into it (its default {} is shared)
    descriptor = {"Questionnair": q.id, "Factor": "Q", "Ordinal": item.ordinal, "Original": item.description}
    return QCLM(template=qlatent_template(item), dimensions=dims, index=[QUESTION_DIM], scale=ANSWER_DIM,
                descriptor=descriptor)


def run_qlatent(q: Questionnaire, case: Case, pipe: PipelineLike, scoring: str) -> tuple[pd.DataFrame, float]:
    """QCLM.run on every item of the case; returns (item_id, cterm, intensifier, p) rows and seconds.
    Raises if the strings qlatent tokenized are not exactly the project's."""
    items = {i.id: i for i in q.items}
    recorder: RecordingTokenizer = pipe.tokenizer  # type: ignore[assignment]
    recorder.texts.clear()
    rows = []
    seconds = 0.0
    for item_id in dict.fromkeys(v.item_id for v in case.variants):
        question = qlatent_question(q, items[item_id])
        t0 = time.perf_counter()
        question.run(model=pipe, pre_text=case.pre_text, scoring=scoring)
        seconds += time.perf_counter() - t0
        for _, r in question._pdf.iterrows():
            rows.append((item_id, r[QUESTION_DIM], r[ANSWER_DIM][len(CONTINUATION_LEAD):], float(r["P"])))
    want = set(case.contexts) | {c + k for c, k in zip(case.contexts, case.continuations)}
    got = set(recorder.texts)
    if got != want:
        extra, missing = sorted(got - want)[:2], sorted(want - got)[:2]
        raise AssertionError(f"{case.condition}: qlatent tokenized other strings than the project's: "
                             f"extra {extra!r}, missing {missing!r}")
    return pd.DataFrame(rows, columns=["item_id", "cterm", "intensifier", "p_qlatent"]), seconds


# -- lm-eval -------------------------------------------------------------------------------------
def run_lm_eval(lm, case: Case) -> tuple[np.ndarray, float]:
    """HFLM.loglikelihood on the case's (context, continuation) pairs: summed log-probs, seconds."""
    from lm_eval.api.instance import Instance

    reqs = [Instance(request_type="loglikelihood", doc={}, arguments=(c, k), idx=i)
            for i, (c, k) in enumerate(zip(case.contexts, case.continuations))]
    t0 = time.perf_counter()
    out = lm.loglikelihood(reqs, disable_tqdm=True)
    return np.array([ll for ll, _ in out]), time.perf_counter() - t0


# -- the run -------------------------------------------------------------------------------------
def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def say(message: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"[peers {time.strftime('%H:%M:%S')}, load {load_average()}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    bench.model_options(ap, ROOT)
    ap.add_argument("--questionnaire", default=str(ROOT / "resources/questionnaires/stai_s.yaml"))
    ap.add_argument("--stimuli", default=str(ROOT / "resources/stimuli/stress.yaml"))
    ap.add_argument("--stimulus-index", type=int, default=0)
    ap.add_argument("--version", default="long", choices=["long", "brief"])
    ap.add_argument("--separator", default="\n\n", help="between stimulus and item (must end in a newline)")
    ap.add_argument("--limit", type=int, default=6, help="first N items of the questionnaire (0: all)")
    ap.add_argument("--aggregation", default="harmonic", choices=AGGREGATIONS,
                    help="how qlatent combines token probabilities (compared with the project's same one)")
    ap.add_argument("--methods", default="engine,lm-eval,qlatent", help="comma-separated subset (engine always runs)")
    ap.add_argument("--conditions", default="vanilla,stress", help="comma-separated subset of vanilla,stress")
    ap.add_argument("--batch-size", type=int, default=16, help="lm-eval batch size")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = set(methods) - {"engine", "lm-eval", "qlatent"}
    if unknown:
        ap.error(f"unknown method(s) {sorted(unknown)}")

    torch.set_num_threads(args.threads)
    load_before = load_average()
    spec = load_model_table(args.models)[args.model]
    prepared = ensure_prepared(spec, Path(args.models_dir) / spec.name)
    model, tok, prov = load_model(spec, prepared, "cpu")
    q = load_questionnaire(args.questionnaire)
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    cases = [c for c in build_cases(q, Path(args.stimuli), args.stimulus_index, args.version, args.separator,
                                    args.limit) if c.condition in conditions]
    if not cases:
        ap.error(f"--conditions {args.conditions!r}: choose from vanilla, stress")
    n_variants = sum(len(c.variants) for c in cases)
    with torch.inference_mode():  # one untimed forward pass: allocator and kernels warm for everyone
        model(**tok([cases[-1].contexts[0]], return_tensors="pt"))

    # the engine: the reference of the comparison
    scorer = make_scorer(model, "auto")
    t0 = time.perf_counter()
    engine_lp = {}
    for case in cases:
        reqs = tokenize_requests(tok, case.contexts, case.continuations)
        engine_lp[case.condition] = scorer.score(reqs)
    engine_s = time.perf_counter() - t0
    say(f"engine: {n_variants} variants in {engine_s:.1f} s ({scorer.stats.method})")
    rows = [{"method": "engine", "seconds": round(engine_s, 2), "variants": n_variants, "compared_as": "reference",
             "max_abs_dlogp": 0.0, "scoring_method": scorer.stats.method}]

    if "lm-eval" in methods:
        from lm_eval.models.huggingface import HFLM

        lm = HFLM(pretrained=model, tokenizer=tok, batch_size=args.batch_size)
        seconds, diffs = 0.0, {}
        for case in cases:
            ll, s = run_lm_eval(lm, case)
            seconds += s
            ours = np.array([float(lp.sum()) for lp in engine_lp[case.condition]])
            diffs[case.condition] = float(np.max(np.abs(ll - ours)))
            say(f"lm-eval {case.condition}: {len(ll)} variants in {s:.1f} s")
        rows.append({"method": "lm-eval HFLM", "seconds": round(seconds, 2), "variants": n_variants,
                     "compared_as": "summed log-prob", "max_abs_dlogp": max(diffs.values()), "by_condition": diffs,
                     "batch_size": args.batch_size})

    if "qlatent" in methods:
        pipe = PipelineLike(model, RecordingTokenizer(tok), model.device, str(prepared))
        seconds, diffs = 0.0, {}
        for case in cases:
            theirs, s = run_qlatent(q, case, pipe, QLATENT_SCORING[args.aggregation])
            seconds += s
            ours = project_probabilities(case, spec.name, q.id, engine_lp[case.condition], args.aggregation)
            both = ours.merge(theirs, on=["item_id", "cterm", "intensifier"], how="outer", validate="1:1")
            if both[["p_raw", "p_qlatent"]].isna().any().any():
                raise AssertionError(f"{case.condition}: qlatent and the project scored different variants")
            diffs[case.condition] = float(np.max(np.abs(np.log(both["p_qlatent"]) - np.log(both["p_raw"]))))
            say(f"qlatent {case.condition}: {len(theirs)} variants in {s:.1f} s")
        rows.append({"method": "qlatent QCLM", "seconds": round(seconds, 2), "variants": n_variants,
                     "compared_as": f"log P ({args.aggregation})", "max_abs_dlogp": max(diffs.values()),
                     "by_condition": diffs})

    for r in rows:
        r["seconds_per_variant"] = round(r["seconds"] / r["variants"], 4)
        r["x_engine_time"] = round(r["seconds"] / engine_s, 1)
    record = {
        "model": spec.name, "questionnaire": q.id, "items": len({v.item_id for v in cases[0].variants}),
        "conditions": {c.condition: {"stimulus_id": c.stimulus_id, "variants": len(c.variants)} for c in cases},
        "separator": args.separator, "stimulus_version": args.version, "aggregation": args.aggregation,
        "dtype": prov["dtype"], "threads": args.threads, "load_average_before": load_before,
        "load_average_after": load_average(), "rows": rows,
        "versions": {p: _version(p) for p in ("torch", "transformers", "lm_eval", "qlatent")},
    }
    print_table(record)
    bench.write_json(args.json, record)
    return 0


def _version(package: str) -> str:
    try:
        return package_version(package.replace("_", "-"))
    except Exception:  # noqa: BLE001 - not installed
        return ""


def print_table(record: dict) -> None:
    conds = ", ".join(f"{k} {v['stimulus_id'] or ''}".strip() + f" ({v['variants']})"
                      for k, v in record["conditions"].items())
    print(f"\n{record['model']}, {record['questionnaire']} ({record['items']} items), {conds}; "
          f"{record['dtype']}, {record['threads']} threads; load average {record['load_average_before']} before, "
          f"{record['load_average_after']} after")
    print("| method | seconds | variants | s/variant | x engine | max abs d log-prob vs project | compared as |")
    print("|---|---|---|---|---|---|---|")
    for r in record["rows"]:
        print(f"| {r['method']} | {r['seconds']:.2f} | {r['variants']} | {r['seconds_per_variant']:.4f} | "
              f"{r['x_engine_time']:.1f} | {r['max_abs_dlogp']:.2e} | {r['compared_as']} |")
    print("versions: " + ", ".join(f"{k} {v or '-'}" for k, v in record["versions"].items()))


if __name__ == "__main__":
    sys.exit(main())
