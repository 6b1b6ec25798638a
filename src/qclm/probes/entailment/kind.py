"""The entailment probe kind: questionnaire items as natural-language-inference pairs (Reuben et al., "Assessment
and manipulation of latent constructs in pre-trained language models using psychometric scales"; docs/entailment.md).

Each variant of an entailment instrument (item x cterm x intensifier: a premise and a hypothesis with the cterm in
one and the intensifier in the other, either way round; qclm.probes.entailment.material) is asked of a causal
language model as a forced choice after the condition's stimulus: does the premise imply the hypothesis, " True",
" False" or " Neither"? p_raw is P(True), the softmax of the three answers' summed log-probabilities. From there the
Likert math applies unchanged, through the
functions of qclm.equations (one home for each equation): the two-way normalization over cterms x
intensifiers, eq. 2 over the S+ rows, eq. 3 / eq. 5 means, condition means, and the silhouettes of section 7. The
tables have the Likert shapes (``questionnaire`` is the instance id, ``template`` the prompt form), so the item
scores get the per-model state-trait decomposition.

Config::

    probes:
      gad7_nli: {kind: entailment, instrument: resources/entailment/gad7.yaml}   # form: qclm (default) or mnli
"""

from __future__ import annotations

import argparse
from functools import cached_property
from typing import TYPE_CHECKING, Any

from qclm import settings
from qclm.errors import InputError, Problem
from qclm.probes.base import FILE_SETTING, CollectInput, Labelled, ProbeKind, construct_terms
from qclm.probes.entailment.material import EntailmentInstrument, Variant, load_entailment
from qclm.probes.entailment.outputs import OUTPUTS

if TYPE_CHECKING:
    import pandas as pd

#: the prompt forms: ``qclm`` was written for this project; ``mnli`` is the form lm-evaluation-harness documents for
#: MNLI (premise, then "Question: hypothesis True, False or Neither?", then "Answer:")
FORMS = {
    "qclm": "Premise: {premise}\nHypothesis: {hypothesis}\nDoes the premise imply the hypothesis? "
            "Answer True, False or Neither.\nAnswer:",
    "mnli": "{premise}\nQuestion: {hypothesis} True, False or Neither?\nAnswer:",
}
#: the answers, in this order: p_raw is the probability of the first (entailment)
OPTIONS = ("True", "False", "Neither")
#: the raw table: one row per variant and context (the Likert variant keys, then the answers' log-probabilities)
COLUMNS = ["model", "questionnaire", "condition", "stimulus_id", "template", "item_id", "cterm", "polarity",
           "intensifier", "level", "weight", "logp_true", "logp_false", "logp_neither", "p_raw"]


def describe_variant(inst: EntailmentInstrument, v: Variant, stimulus_id: str) -> str:
    return (f"{inst.path}: item {v.item_id}: cterm {v.cterm!r}, intensifier {v.intensifier!r}"
            + (f", stimulus {stimulus_id}" if stimulus_id else ""))


class EntailmentProbe(ProbeKind):
    name = "entailment"
    needs = ("choose",)
    head_needs = {"nli": ("classify",)}
    calibration = "qclm.probes.entailment.calibration:units"
    materials = "qclm.probes.entailment.calibration:MATERIALS"
    #: a causal LM, or a sequence classifier with an entailment label (qclm.engine.nli)
    heads = ("", "nli")
    summary = "questionnaire items as premise/hypothesis pairs, scored by P(True) of a forced choice (Reuben et al.)"
    version = 1
    schema = {
        "type": "object",
        "required": ["instrument"],
        "properties": {
            "instrument": {**FILE_SETTING,
                           "description": "the entailment instrument file (resources/entailment/README.md)"},
            "form": {"enum": list(FORMS), "default": "qclm",
                     "description": "the prompt: qclm (written for this project) or mnli (lm-evaluation-harness's "
                                    "MNLI form)"},
        },
        "additionalProperties": False,
    }
    scoring_keys = ("instrument", "form")
    file_keys = ("instrument",)
    shipped = {"instrument": "entailment"}
    cell_tables = ("variants", "items")
    config_sections = (settings.EQUATIONS,)
    outputs = OUTPUTS
    score_tables = {"items": "entailment_item_scores.parquet", "questionnaires": "entailment_questionnaire_scores.csv",
                    "conditions": "entailment_condition_means.csv", "variants": "entailment_variant_probs.parquet",
                    "silhouette": "entailment_silhouette.csv"}
    item_table = "items"
    honours_limit_items = True

    @cached_property
    def material(self) -> EntailmentInstrument:
        """The instance's entailment instrument, read on first use."""
        return load_entailment(self.settings["instrument"])

    def problems(self) -> list[Problem]:
        try:
            self.material
        except InputError as err:
            return err.problems
        return []

    def scored_terms(self) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        return {self.instance.id: construct_terms(self.material.items)}  # the tables name it by the instance

    # -- scoring ----------------------------------------------------------------------------------------------
    def requests(self, context, prompts, asking) -> list[Labelled]:
        """A forced choice between the options after each variant's prompt (its form); of a sequence classifier
        (``asking.head`` nli), the (stimulus + premise, hypothesis) pair classified instead."""
        from qclm.engine.requests import ChoiceRequest, ClassifyRequest

        inst, form = self.material, FORMS[self.settings["form"]]
        options = tuple(prompts.continuation(o) for o in OPTIONS)

        def request(v: Variant):
            if asking.head == "nli":
                return ClassifyRequest(context.lead + v.premise, v.hypothesis)
            return ChoiceRequest(prompts.context(context.lead, form.format(premise=v.premise,
                                                                           hypothesis=v.hypothesis)), options)

        return [Labelled({"variant": v, "item_id": v.item_id}, request(v),
                         describe_variant(inst, v, context.stimulus_id),
                         f"item {v.item_id}, cterm {v.cterm!r} (S{v.polarity}), intensifier {v.intensifier!r} "
                         f"(level {v.level}, weight {v.weight:g})")
                for v in inst.variants(asking.run.limit_items)]

    def rows(self, cell, answers) -> tuple[pd.DataFrame, dict]:
        """One row per variant: its options' log-probabilities and P(True) (p_raw); of a sequence classifier, the
        log-probabilities of its entailment, contradiction and neutral labels and its entailment probability."""
        import pandas as pd

        nli = cell.asking.head == "nli"
        rows = []
        for a in answers:
            v: Variant = a.key["variant"]
            res = a.result
            scores = (*res.answer_logprobs, res.p_true) if nli else (*res.option_logprobs, res.probs[0])
            rows.append((cell.model, self.instance.id, cell.condition, a.context.stimulus_id, self.settings["form"],
                         v.item_id, v.cterm, v.polarity, v.intensifier, v.level, float(v.weight),
                         *map(float, scores)))
        inst = self.material
        own = {"instrument": inst.id, "instrument_sha256": inst.sha256, "form": self.settings["form"]}
        if not nli:
            return pd.DataFrame(rows, columns=COLUMNS), {**own, "prompt": FORMS[self.settings["form"]],
                                                         "options": list(OPTIONS)}
        labels = dict(answers[0].result.labels) if answers else {}
        return pd.DataFrame(rows, columns=COLUMNS), {
            **own, "head": "nli",
            "prompt": "(premise, hypothesis) pairs through the sequence classifier; the form is not used",
            "labels": labels}

    # -- CPU stages -------------------------------------------------------------------------------------------
    def cell_scores(self, raw: pd.DataFrame, config: dict) -> dict[str, pd.DataFrame]:
        from qclm.equations import VARIANT_KEYS, item_scores, normalize

        scoring = config[settings.EQUATIONS]
        variants = normalize(raw[VARIANT_KEYS + ["p_raw"]], scoring["normalization_epsilon"],
                             scoring["normalization"])
        return {"variants": variants, "items": item_scores(variants, scoring["item_score"])}

    @classmethod
    def collect(cls, data: CollectInput) -> dict[str, pd.DataFrame]:
        from qclm.equations import collect_tables

        keys = list(data.cells)
        forms = {i.id: i.settings["form"] for i in data.instances}
        return collect_tables([data.cells[k]["items"] for k in keys], [data.cells[k]["variants"] for k in keys],
                              data.models, forms, "first")

    @classmethod
    def overview(cls, context, results) -> str:
        from qclm.probes.entailment.analysis import overview

        return overview(context, results)

    # -- the command line -------------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--instrument", help="an entailment instrument file (resources/entailment/*.yaml)")
        parser.add_argument("--form", choices=list(FORMS), help="the prompt form (default qclm)")

    @classmethod
    def settings_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        return {k: getattr(args, k) for k in ("instrument", "form") if getattr(args, k, None)}
