"""The Likert questionnaire probe kind: the paper's QCLM (method.md sections 1-5, 7).

Each variant of a questionnaire (template x item x cterm x intensifier phrase) is scored as the log-probability of
its intensifier phrase after its item prefix, under every context of a condition (the stimulus lead, then the item
prefix): a log-likelihood request per variant. The raw table has one row per continuation token
(:data:`COLUMNS`); the CPU stages turn it into variant probabilities (eq. 1, the two-way normalization) and item
scores (eq. 2) per cell, then the score tables of results/scores/ (questionnaire and condition scores, eqs. 3 and
5, silhouettes), which ``qclm analyze`` reads.

Config: ``questionnaires: {ID: FILE}`` (the shorthand) or ``probes: {ID: {kind: likert, questionnaire: FILE}}``;
the wordings scored are the config's ``templates`` section (:class:`Wordings`: its ``score`` and
``extra_limit_stimuli``, the config section the kind's scoring reads), the items ``limit_items``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from qclm import settings
from qclm.contexts import Context, ContextSettings, condition_contexts
from qclm.errors import InputError, Problem
from qclm.probes.likert.sections import SECTIONS, TEMPLATE_DEFAULTS, TEMPLATES
from qclm.probes.base import (
    FILE_SETTING, Answer, Asking, CollectInput, Labelled, ProbeKind, ScoringCell, construct_terms,
)
from qclm.probes.likert import LIKERT
from qclm.probes.likert.outputs import OUTPUTS
from qclm.questionnaire import Questionnaire, Variant, load_questionnaire

if TYPE_CHECKING:
    import pandas as pd

    from qclm.prompts import PromptBuilder

#: the raw table of a Likert cell: one row per continuation token
COLUMNS = ["model", "questionnaire", "condition", "stimulus_id", "template", "item_id", "cterm", "polarity",
           "intensifier", "level", "weight", "token_index", "token_id", "token", "logprob"]


@dataclass(frozen=True)
class ItemContext:
    """The variants of one questionnaire under one context (the templates the protocol scores there)."""

    context: Context
    variants: list[Variant]

    @property
    def stimulus_id(self) -> str:
        return self.context.stimulus_id

    @property
    def stimulus(self) -> str:
        return self.context.lead

    @property
    def texts(self) -> list[str]:
        return [self.context.lead + v.prefix for v in self.variants]


@dataclass(frozen=True)
class Wordings:
    """Which templates (wordings) of a questionnaire are scored (method.md section 1b): ``score`` (config
    ``templates.score``): all, the first, or a list of ids (the first is always scored); with
    ``extra_limit_stimuli`` N, the templates after the first are scored on vanilla and on the first N stimuli of
    each class only."""

    score: str | tuple[str, ...] = TEMPLATE_DEFAULTS["score"]  # all | first | template ids
    extra_limit_stimuli: int | None = TEMPLATE_DEFAULTS["extra_limit_stimuli"]

    @classmethod
    def from_config(cls, config: dict) -> Wordings:
        """From a config's (or :attr:`Asking.config`'s) ``templates`` section, defaults filled in."""
        wording = LikertProbe.section(config, TEMPLATES)
        score = wording["score"]
        return cls(score if isinstance(score, str) else tuple(score), wording["extra_limit_stimuli"])

    def template_ids(self, q: Questionnaire) -> list[str]:
        """The templates of ``q`` scored, the first (default) one always first."""
        if self.score == "all":
            return list(q.templates)
        if self.score == "first":
            return [q.templates[0]]
        unknown = [t for t in self.score if t not in q.templates]
        if unknown:
            raise InputError.one(q.path, "templates", f"unknown template id(s) {unknown} (config templates.score); "
                                 f"this questionnaire has {', '.join(q.templates)}")
        return [q.templates[0]] + [t for t in q.templates[1:] if t in self.score]

    def templates_at(self, q: Questionnaire, position: int | None) -> list[str]:
        """The templates scored under the stimulus at ``position`` (0-based; None: vanilla)."""
        ids = self.template_ids(q)
        if position is None or self.extra_limit_stimuli is None or position < self.extra_limit_stimuli:
            return ids
        return ids[:1]


def item_contexts(q: Questionnaire, condition: str, stimuli, run: ContextSettings,
                  wordings: Wordings = Wordings()) -> list[ItemContext]:
    """The contexts of a condition (:func:`qclm.contexts.condition_contexts`) with the questionnaire's variants in
    each: the first ``limit_items`` items, the templates ``wordings`` scores at that stimulus position."""
    return [variants_in(q, ctx, run, wordings) for ctx in condition_contexts(condition, stimuli, run)]


def variants_in(q: Questionnaire, ctx: Context, run: ContextSettings, wordings: Wordings) -> ItemContext:
    items = [i.id for i in q.items][: run.limit_items] if run.limit_items else None
    return ItemContext(ctx, q.variants(items, wordings.templates_at(q, ctx.position)))


def describe_variant(q: Questionnaire, v: Variant, stimulus_id: str) -> str:
    """How an error names a variant: file, item, cterm, intensifier (template and stimulus where they matter)."""
    return (f"{q.path}: item {v.item_id}: cterm {v.cterm!r}, intensifier {v.intensifier!r}"
            + (f", template {v.template}" if len(q.templates) > 1 else "")
            + (f", stimulus {stimulus_id}" if stimulus_id else ""))


class LikertProbe(ProbeKind):
    name = LIKERT
    needs = ("loglikelihood",)
    calibration = "qclm.probes.likert.calibration:units"
    materials = "qclm.probes.likert.calibration:MATERIALS"
    summary = "Likert questionnaire items scored by their intensifiers' probabilities (the paper's QCLM)"
    schema = {
        "type": "object",
        "required": ["questionnaire"],
        "properties": {"questionnaire": {
            **FILE_SETTING, "description": "the questionnaire file (resources/questionnaires/README.md)"}},
        "additionalProperties": False,
    }
    scoring_keys = ("questionnaire",)
    scoring_sections = {TEMPLATES: ("score", "extra_limit_stimuli")}
    file_keys = ("questionnaire",)
    shipped = {"questionnaire": "questionnaires"}
    cell_tables = ("variants", "items")
    config_sections = (settings.EQUATIONS, TEMPLATES)
    config_schema = SECTIONS
    outputs = OUTPUTS
    score_tables = {"items": "item_scores.parquet", "items_csv": "item_scores.csv",
                    "questionnaires": "questionnaire_scores.csv", "conditions": "condition_means.csv",
                    "variants": "variant_probs.parquet", "silhouette": "silhouette.csv",
                    "instruments": "instruments.csv"}
    #: the memorization kind's table where the run has that kind: instruments whose items a model has seen are
    #: flagged in instrument_validation
    optional_tables = {"memorization": ("memorization", "analysis:memorization")}
    #: the item scores (in every wording; the analyses read the default one) are the weights axis of the
    #: interventions; the kind's own per-model state-trait tables stand for the item_table's generic one
    intervention_table = "items"
    honours_limit_items = True
    report_rank = 0
    shorthand = "questionnaires"
    commands = {"analyze": "qclm.probes.likert.command"}

    @cached_property
    def questionnaire(self) -> Questionnaire:
        """The instance's questionnaire, read on first use."""
        return load_questionnaire(self.settings["questionnaire"])

    def problems(self) -> list[Problem]:
        try:
            q = self.questionnaire
        except InputError as err:
            return err.problems
        if q.id != self.instance.id:
            file = self.settings["questionnaire"]
            return [(self.instance.source, self.instance.where,
                     f"{file} has id '{q.id}'; the key must be the same ('{q.id}: {file}')")]
        return []

    def scored_terms(self) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        return {self.questionnaire.id: construct_terms(self.questionnaire.items)}

    # -- scoring ----------------------------------------------------------------------------------------------
    def requests(self, context: Context, prompts: PromptBuilder, asking: Asking) -> list[Labelled]:
        from qclm.engine.requests import LoglikRequest

        q = self.questionnaire
        ictx = variants_in(q, context, asking.run, Wordings.from_config(asking.config))
        texts, continuations = prompts.build(context.lead, ictx.variants)
        return [Labelled({"variant": v, "item_id": v.item_id}, LoglikRequest(t, c),
                         describe_variant(q, v, context.stimulus_id),
                         f"template {v.template}, item {v.item_id}, cterm {v.cterm!r} (S{v.polarity}), intensifier "
                         f"{v.intensifier!r} (level {v.level}, weight {v.weight:g})")
                for v, t, c in zip(ictx.variants, texts, continuations)]

    def rows(self, cell: ScoringCell, answers: list[Answer]) -> tuple[pd.DataFrame, dict]:
        """One row per scored token of every variant (the continuation's tokens, as the model's tokenizer names
        them)."""
        import numpy as np
        import pandas as pd

        q = self.questionnaire
        cols: dict[str, list] = {c: [] for c in COLUMNS}
        for answer in answers:
            v: Variant = answer.key["variant"]
            res = answer.result
            n = len(res.token_ids)
            for name, value in (("model", cell.model), ("questionnaire", q.id), ("condition", cell.condition),
                                ("stimulus_id", answer.context.stimulus_id), ("template", v.template),
                                ("item_id", v.item_id), ("cterm", v.cterm), ("polarity", v.polarity),
                                ("intensifier", v.intensifier), ("level", v.level), ("weight", v.weight)):
                cols[name].extend([value] * n)
            cols["token_index"].extend(range(n))
            cols["token_id"].extend(res.token_ids)
            cols["token"].extend(res.tokens)
            cols["logprob"].extend(res.token_logprobs)
        df = pd.DataFrame(cols).astype({"token_index": "int32", "token_id": "int64", "weight": "float64",
                                        "logprob": "float64"}) if cell.contexts else pd.DataFrame(columns=COLUMNS)
        assert np.isfinite(df["logprob"]).all()  # the backend raises naming the request first
        wordings = Wordings.from_config(cell.asking.config)
        return df, {"questionnaire": q.id, "questionnaire_sha256": q.sha256, "templates": list(q.templates),
                    "templates_scored": wordings.template_ids(q),
                    "templates_extra_limit_stimuli": wordings.extra_limit_stimuli}

    # -- CPU stages -------------------------------------------------------------------------------------------
    def cell_scores(self, raw: pd.DataFrame, config: dict) -> dict[str, pd.DataFrame]:
        from qclm.equations import condition_tables

        scoring = config[settings.EQUATIONS]
        variants, items = condition_tables(raw, scoring["aggregation"], scoring["item_score"],
                                           scoring["normalization_epsilon"], scoring["normalization"])
        return {"variants": variants, "items": items}

    @classmethod
    def collect(cls, data: CollectInput) -> dict[str, pd.DataFrame]:
        import pandas as pd

        from qclm.equations import collect_tables
        from qclm.questionnaire import INSTRUMENT_COLUMNS, instrument_rows

        files = {i.id: i.settings["questionnaire"] for i in data.instances}
        default_templates = {q: load_questionnaire(path).templates[0] for q, path in files.items()}
        # the workflow's order: models as the model table lists them, then instances, conditions
        keys = list(data.cells)
        tables = collect_tables([data.cells[k]["items"] for k in keys], [data.cells[k]["variants"] for k in keys],
                                data.models, default_templates,
                                LikertProbe.section(data.config, TEMPLATES)["select"])
        tables["items_csv"] = tables["items"]
        tables["instruments"] = pd.DataFrame(instrument_rows(files), columns=INSTRUMENT_COLUMNS)
        return tables

    @classmethod
    def analyze(cls, tables: dict[str, Any], out, config: dict, instances=()) -> dict[str, pd.DataFrame]:
        """The Likert analysis (method.md sections 6-8; :func:`qclm.probes.likert.analysis.stage.analyze`, as
        ``qclm analyze``) on the collected score tables, with the config's analysis settings and contrasts; the
        memorization kind's table where the run has that kind (:attr:`optional_tables`)."""
        import logging

        import pandas as pd

        from qclm.analysis import floors
        from qclm.experiment import Experiment, config_contrasts, contrast_label, scored_contrasts
        from qclm.probes.likert.analysis.stage import analyze

        analysis = settings.section(config, settings.ANALYSIS)
        contrasts = config_contrasts(config)
        scored_conditions = set(pd.read_parquet(tables["items"], columns=["condition"])["condition"])
        # the config's stimulus types that were scored; fewer than two compare nothing
        types = [t for t in Experiment.from_config(config).stimulus_types if t in scored_conditions]
        if contrasts is not None:  # the config's contrasts whose two conditions were scored (qclm probe --conditions)
            contrasts, left = scored_contrasts(contrasts, scored_conditions)
            if left:
                logging.getLogger("qclm.analysis").info(
                    "contrast(s) %s left out: a condition was not scored", ", ".join(contrast_label(*c) for c in left))
        return analyze(tables["items"], out, analysis["bootstrap"], analysis["seed"], analysis["size_classes"],
                       silhouette=tables.get("silhouette"), variant_probs=tables.get("variants"),
                       heatmap_item=analysis["heatmap_item"], contrasts=contrasts,
                       min_models=analysis["min_models"], min_stimuli=analysis["min_stimuli"],
                       templates=cls.section(config, TEMPLATES)["select"],
                       instruments=tables.get("instruments"), memorization=tables.get("memorization"),
                       equations=settings.section(config, settings.EQUATIONS), floors=floors.path(config),
                       stimulus_types=types if len(types) > 1 else [])

    # -- the command line -------------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--questionnaire", action="append", default=None,
                            help="a questionnaire file (resources/questionnaires/*.yaml); repeat for several, each "
                                 "its own instance named by its file (stai_s and stai_t: the state-trait tables)")

    @classmethod
    def instances_from_args(cls, args: argparse.Namespace) -> list[dict[str, Any]]:
        """One instance per ``--questionnaire``, as a config's ``questionnaires:`` declares one per file."""
        return [{"questionnaire": path} for path in args.questionnaire] if args.questionnaire else [{}]

    # -- the run's config -------------------------------------------------------------------------------------
    @classmethod
    def check_config(cls, config: dict, config_file: str, instances: list, found: list[Problem]) -> list[Problem]:
        """The wordings ``templates:`` scores and selects, and ``analysis.heatmap_item`` (probes/likert/checks.py)."""
        from qclm.probes.likert.checks import config_problems

        return config_problems(cls, config, config_file, instances, found)
