"""The Likert questionnaire analysis in one call, :func:`analyze`: item-score table in, statistics tables and
figures out (method.md sections 5-8). The Likert kind's ``analyze`` (:meth:`qclm.probes.likert.kind.LikertProbe.
analyze`: the workflow's ``analyze_likert`` rule and ``qclm probe likert``) runs it on the collected score tables,
``qclm analyze`` (the Likert kind's command, :mod:`qclm.probes.likert.command`) for a researcher with scores from
elsewhere::

    qclm analyze --scores item_scores.csv --out results/analysis [--bootstrap 10000] [--seed 0] \
        [--size-classes 3,8] [--contrasts vanilla:stress,...] [--min-models 10] [--min-stimuli 10] \
        [--templates first|all|ID] [--silhouette silhouette.csv] [--variant-probs variant_probs.parquet] \
        [--heatmap-item STAI-S:s01] [--instruments instruments.csv] [--stimulus-types A,B,C] [--no-figures]

:func:`analyze` checks the settings, reads the inputs into a :class:`LikertContext` (what every table and
figure of the Likert kind reads) and runs the kind's outputs (:mod:`qclm.probes.likert.outputs`, through
:func:`qclm.analysis.runner.run_tables` and :func:`~qclm.analysis.runner.draw_figures`). Outputs in OUT: the tables as
CSV (plus ``tables/*.md`` and
``tables/*.html``), figures in ``figures/*.png`` and ``*.pdf``, ``run_info.json`` with the settings, and the
Likert section of the report's first page, ``overview.likert.md``, composed into ``overview.md`` and
``overview.rst`` with the sections of other probe kinds present in OUT.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from qclm import settings
from qclm.analysis import overview, permodel, runner
from qclm.equations import condition_means, questionnaire_scores, select_templates, template_rows
from qclm.errors import InputError
from qclm.experiment import (contrast_label, contrast_problems, default_contrasts, parse_contrast_args,
                             stimulus_type_problems)
from qclm.models.checkpoints import base_of, without_derived
from qclm.probes.likert import LIKERT
from qclm.probes.likert.analysis import overview as likert_overview
from qclm.probes.likert.analysis.across_models import analysis_scale, zscore_table
from qclm.probes.likert.sections import TEMPLATE_DEFAULTS
from qclm.probes.likert.analysis.score_tables import (
    exposure_notes, load_instruments, load_item_scores, load_memorization, load_silhouette, load_variant_probs,
    model_sizes, select_heatmap_item,
)

log = logging.getLogger("qclm.analysis")

#: the analysis settings' defaults (config schema, ``analysis`` and ``templates`` sections)
DEFAULTS = settings.defaults(settings.ANALYSIS)
TEMPLATE_SELECT = TEMPLATE_DEFAULTS["select"]


def parse_size_classes(text: str | list | tuple) -> list[float]:
    """Size-class boundaries in billions of parameters: "3,8" or [3, 8] -> [3.0, 8.0] (strictly increasing;
    :func:`qclm.settings.parse_size_classes`), a problem an InputError naming the option."""
    try:
        return settings.parse_size_classes(text)
    except ValueError as err:
        raise InputError(f"--size-classes: {err}") from None


def _refuse(problems: list[tuple[str, str]], source: str) -> None:
    """The config checks' (location, problem) pairs of an option, as one InputError that names the table the
    conditions come from (a condition "not declared" by a config is "not in" the scores' table)."""
    if problems:
        raise InputError("; ".join(f"{loc}: {msg}" for loc, msg in problems).replace(
            "is not declared (conditions:", f"is not in {source} (conditions:"))


def resolve_contrasts(contrasts: str | list | None, conditions: list[str], source: str) -> list[tuple[str, str]]:
    """The contrasts to analyse: given (``first:second,...`` or pairs) and checked against the conditions of the
    table, or the paper's three where their conditions are present."""
    if contrasts is None or contrasts == "":
        pairs = default_contrasts(conditions)
        if not pairs and len(conditions) > 1:
            log.warning("none of the paper's contrasts applies to conditions %s; give --contrasts",
                        ", ".join(conditions))
        return pairs
    try:
        pairs = parse_contrast_args(contrasts) if isinstance(contrasts, str) else [tuple(c) for c in contrasts]
    except ValueError as exc:
        raise InputError(str(exc)) from None
    _refuse(contrast_problems(pairs, conditions, "--contrasts"), source)
    return pairs


def resolve_stimulus_types(types: list[str] | tuple[str, ...], conditions: list[str], source: str) -> list[str]:
    """The stimulus types to compare, checked against the conditions of the table (none: no comparison)."""
    types = list(types or ())
    if len(types) == 1:
        raise InputError(f"--stimulus-types: one type ({types[0]}); give two or more to compare")
    if len(set(types)) < len(types):
        raise InputError(f"--stimulus-types: a type is given twice ({', '.join(types)})")
    _refuse(stimulus_type_problems(types, conditions, "--stimulus-types"), source)
    return types


def control_pairs(instruments: pd.DataFrame | None) -> dict[str, str]:
    """Control form -> its original, from the instrument table's ``control_of`` column (empty without it)."""
    if instruments is None or "control_of" not in instruments.columns:
        return {}
    rows = instruments[instruments["control_of"].fillna("").astype(str) != ""]
    return dict(zip(rows["questionnaire"], rows["control_of"].astype(str)))


@dataclass
class LikertContext:
    """What the Likert kind's tables and figures read (their first argument): the inputs, read and checked, the
    quantities several tables share, and the settings."""

    scores: str  #: the item-score table's path (messages, run_info.json)
    all_templates: pd.DataFrame  #: every template's item scores (the wording analysis)
    items: pd.DataFrame  #: one score per item and context, in the selected templates
    qscores: pd.DataFrame  #: questionnaire scores per context (eqs. 3 and 5)
    zs: pd.DataFrame  #: z-scores with the fitted vanilla mean and SD (``zscores.csv`` leaves those two out)
    sizes: pd.Series  #: parameter count per model (billions; NaN where unknown)
    contrasts: list[tuple[str, str]]
    silhouette: pd.DataFrame | None  #: the selected templates' rows of the silhouette table
    instruments: pd.DataFrame | None  #: questionnaire, construct, framing
    exposure: dict[tuple[str, str], str]  #: (model, questionnaire) -> note: items exposed (memorization probe)
    variant_probs: pd.DataFrame | None  #: vanilla rows of the variant probability table (the heatmap)
    variant_probs_path: str | None  #: the whole table (every condition: the normalization sensitivity)
    heatmap_item: str | None
    bootstrap: int
    seed: int
    size_classes: list[float]
    min_models: int
    min_stimuli: int
    templates: str
    equations: dict  #: the config's equations section (the normalization sensitivity recomputes the item scores)
    stimulus_types: list[str]  #: the conditions compared as types of one stimulus (``stimulus_types.csv``)
    controls: dict[str, str]  #: control form -> its original, both as the scores name them (``per_model_control.csv``)

    @cached_property
    def per_model_groups(self) -> list[permodel.Group]:
        """Each model's item scores under each contrast (the three per-model tables read them)."""
        return permodel.per_model_groups(self.items, self.contrasts)

    @property
    def questionnaires(self) -> list[str]:
        return list(pd.unique(self.items["questionnaire"]))

    @property
    def conditions(self) -> list[str]:
        return list(pd.unique(self.items["condition"]))


def read_context(scores: str | Path, *, bootstrap: int, seed: int, size_classes: list[float] | tuple[float, ...] | str,
                 silhouette: str | Path | None, variant_probs: str | Path | None, heatmap_item: str | None,
                 figures: bool, contrasts: str | list | None, min_models: int, min_stimuli: int, templates: str,
                 instruments: str | Path | None, memorization: str | Path | None = None,
                 equations: dict | None = None, stimulus_types: list[str] | tuple[str, ...] = ()) -> LikertContext:
    """Check the settings, read and check the inputs, and compute what several tables share."""
    if bootstrap < 0:
        raise InputError(f"--bootstrap must be >= 0, got {bootstrap}")
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    if min_models < 1 or min_stimuli < 1:
        raise InputError(f"--min-models and --min-stimuli must be >= 1, got {min_models} and {min_stimuli}")
    boundaries = parse_size_classes(size_classes)

    all_templates, derived = without_derived(load_item_scores(scores))
    if derived:
        log.info("%s: %d checkpoint(s) of fine-tuning interventions left out (the intervention analysis reads "
                 "them): %s", scores, len(derived), ", ".join(derived))
    try:
        items = select_templates(all_templates, templates)
    except ValueError as exc:
        raise InputError(f"{scores}: --templates {templates}: {exc}") from None
    conditions = list(pd.unique(items["condition"]))
    pairs = resolve_contrasts(contrasts, conditions, str(scores))
    types = resolve_stimulus_types(stimulus_types, conditions, str(scores))
    sil = without_derived(load_silhouette(silhouette))[0] if silhouette else None
    if sil is not None:
        try:
            sil = template_rows(sil, templates)
        except ValueError as exc:
            raise InputError(f"{silhouette}: --templates {templates}: {exc}") from None
    vprobs = without_derived(load_variant_probs(variant_probs))[0] if variant_probs else None
    if vprobs is not None and not vprobs.empty and figures:
        try:
            select_heatmap_item(vprobs, heatmap_item)  # fail before the work, not after
        except ValueError as exc:
            raise InputError(f"{variant_probs}: {exc}") from exc
    qscores = questionnaire_scores(items)
    cond = condition_means(qscores).rename(columns={"score": "raw"})
    sizes = model_sizes(items)
    questionnaires = list(pd.unique(items["questionnaire"]))
    inst = load_instruments(instruments, questionnaires) if instruments else None
    exposure = exposure_notes(load_memorization(memorization)) if memorization else {}
    log.info("%s: %d rows, %d model(s), questionnaires %s, conditions %s, contrasts %s", scores, len(items),
             len(sizes), ", ".join(questionnaires), ", ".join(conditions),
             ", ".join(contrast_label(*c) for c in pairs) or "none")
    if len(sizes) < min_models:
        log.warning("only %d model(s): the across-model tables (z-scores, t-tests, ANOVAs, bootstrap CIs, "
                    "validation) are underpowered (fewer than %d models) or undefined; the per-model tables "
                    "(per_model, per_model_state_trait, per_model_interaction) analyse each model alone",
                    len(sizes), min_models)
    return LikertContext(
        scores=str(scores), all_templates=all_templates, items=items, qscores=qscores, zs=zscore_table(cond),
        sizes=sizes, contrasts=pairs, silhouette=sil, instruments=inst, exposure=exposure, variant_probs=vprobs,
        variant_probs_path=str(variant_probs) if variant_probs else None, heatmap_item=heatmap_item,
        bootstrap=bootstrap, seed=seed, size_classes=boundaries, min_models=min_models, min_stimuli=min_stimuli,
        templates=templates, equations=settings.section({settings.EQUATIONS: equations}, settings.EQUATIONS),
        stimulus_types=types, controls=control_pairs(inst))


def analyze(
    scores: str | Path,
    out: str | Path,
    bootstrap: int = DEFAULTS["bootstrap"],
    seed: int = DEFAULTS["seed"],
    size_classes: list[float] | tuple[float, ...] | str = tuple(DEFAULTS["size_classes"]),
    silhouette: str | Path | None = None,
    variant_probs: str | Path | None = None,
    heatmap_item: str | None = DEFAULTS["heatmap_item"],
    figures: bool = True,
    contrasts: str | list | None = None,
    min_models: int = DEFAULTS["min_models"],
    min_stimuli: int = DEFAULTS["min_stimuli"],
    templates: str = TEMPLATE_SELECT,
    instruments: str | Path | None = None,
    memorization: str | Path | None = None,
    equations: dict | None = None,
    floors: str | Path | None = None,
    stimulus_types: list[str] | tuple[str, ...] = (),
) -> dict[str, pd.DataFrame]:
    """Run the Likert analysis and write its tables (and figures) in ``out``; returns the tables by name.

    ``instruments``: the instrument table (``results/scores/instruments.csv``: questionnaire, construct, framing);
    without it the construct map correlates the instruments but has no expected signs, and the spectrum and
    validation tables have no construct or framing. ``memorization``: the memorization probe's table
    (``analysis/memorization.csv``): instruments whose items a model has seen are flagged in
    ``instrument_validation``. ``equations``: the settings the item scores were computed with (the config's
    ``equations`` section; the schema's defaults for keys not given): the normalization sensitivity recomputes the
    item scores from ``variant_probs`` with them under each form of the normalization. ``floors``: the calibrated
    floors file (:mod:`qclm.analysis.floors`) the first page sets the nulls against, on the base models scored.
    ``stimulus_types``: conditions of the scores compared as types of one stimulus (``stimulus_types.csv``); the
    control forms among the questionnaires (``per_model_control.csv``) are read from the instrument table."""
    t0 = time.perf_counter()
    ctx = read_context(scores, bootstrap=bootstrap, seed=seed, size_classes=size_classes, silhouette=silhouette,
                       variant_probs=variant_probs, heatmap_item=heatmap_item, figures=figures,
                       contrasts=contrasts, min_models=min_models, min_stimuli=min_stimuli, templates=templates,
                       instruments=instruments, memorization=memorization, equations=equations,
                       stimulus_types=stimulus_types)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    outputs = _outputs()
    result = runner.run_tables(outputs, ctx, out)
    log.info("tables written to %s in %.1f s", out, time.perf_counter() - t0)
    info = run_info(ctx, silhouette, instruments, memorization)
    # the report's first page before the figures: a figure that fails loses nothing else
    overview.write_fragment(out, LIKERT, likert_overview.overview(ctx, result, info))
    overview.compose(out, first=(LIKERT,), floors=floors, kinds=(LIKERT,),
                     models=list(dict.fromkeys(base_of(m) for m in ctx.items["model"].unique())))
    try:
        if figures:
            t1 = time.perf_counter()
            runner.draw_figures(outputs, ctx, result, out / "figures")
            log.info("figures written to %s in %.1f s", out / "figures", time.perf_counter() - t1)
    finally:
        info["seconds"] = round(time.perf_counter() - t0, 2)
        (out / "run_info.json").write_text(json.dumps(info, indent=2) + "\n")
    return result


def _outputs() -> tuple:
    """The Likert kind's outputs, checked, as :meth:`qclm.probes.base.ProbeKind.analysis_outputs` gives them (from
    its declaration: the kind imports this stage, not the other way round)."""
    from qclm.analysis.registry import declare
    from qclm.probes.likert.outputs import OUTPUTS, REPORT

    return declare(LIKERT, OUTPUTS, REPORT)


def run_info(ctx: LikertContext, silhouette: str | Path | None, instruments: str | Path | None,
             memorization: str | Path | None = None) -> dict:
    """The settings of a run (``run_info.json``), and what the overview says about them."""
    return {
        "scores": ctx.scores, "silhouette": str(silhouette) if silhouette else None,
        "variant_probs": ctx.variant_probs_path, "instruments": str(instruments) if instruments else None,
        "memorization": str(memorization) if memorization else None,
        "bootstrap": ctx.bootstrap, "seed": ctx.seed, "size_classes": ctx.size_classes,
        "heatmap_item": ctx.heatmap_item, "n_models": len(ctx.sizes), "questionnaires": ctx.questionnaires,
        "conditions": ctx.conditions, "contrasts": [list(c) for c in ctx.contrasts], "templates": ctx.templates,
        "stimulus_types": ctx.stimulus_types, "controls": ctx.controls,
        "equations": ctx.equations,
        "scale": analysis_scale(ctx.zs), "min_models": ctx.min_models, "min_stimuli": ctx.min_stimuli,
        "seconds": None, "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    import scipy

    from qclm import version

    return {"qclm": version(), "numpy": np.__version__, "pandas": pd.__version__, "scipy": scipy.__version__}
