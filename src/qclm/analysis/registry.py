"""The analysis outputs, one registration each: every table and figure of the report is declared here and
nowhere else. ``qclm analyze`` computes and draws what is registered (:mod:`qclm.analysis.runner`), the workflow
(workflow/rules/analysis.smk) declares the files and files them in the report from the same registrations.

A registration (:class:`Output`) says:

- ``name``: the file stem: a table is ``analysis/NAME.csv`` with ``analysis/tables/NAME.md`` and ``.html``, a
  figure is ``analysis/figures/NAME.png`` and ``.pdf``; a table and a figure may share a name (and a caption);
- ``kind``: :data:`TABLE` or :data:`FIGURE`;
- ``category``: the report's category (the report lists categories in registration order, :func:`categories`);
- ``probe``: the probe kind it belongs to (docs/probes.md; :data:`LIKERT` for the questionnaire analyses);
- ``code``: ``"module:function"``, imported only when the analysis runs;
- ``caption``: its caption file in workflow/report (default ``NAME.rst``);
- figures: ``table``, the table the figure draws, whose ``underpowered`` column is the figure's mark (the figure
  never compares a count with a threshold itself, so its mark and the table's cannot disagree), and ``uses``,
  other tables it reads; tables: ``uses``, earlier tables of the same probe kind that it reads.

Light on purpose (no numpy, pandas or matplotlib): the workflow imports it while building its DAG.

How a probe kind adds its tables and figures
--------------------------------------------
1. A table is a function ``f(context, *uses) -> pandas.DataFrame`` in a module of the analysis (one module per
   table family): ``context`` is whatever the probe kind's analysis prepared from its inputs (Likert's:
   :class:`qclm.analysis.stage.LikertContext`), ``uses`` the tables it named, computed before it. A table that
   can be underpowered has a boolean ``underpowered`` column (and the count it rests on, e.g. ``n``).
2. A figure is a function ``f(context, table, *uses)`` returning a matplotlib figure, or a sentence saying why
   it cannot be drawn (the runner draws that sentence in its place: the files always exist). It marks what its
   table marks with :func:`qclm.analysis.plotting.mark_underpowered` (hollow markers are the other convention).
   The runner applies the style, saves PNG and PDF, and closes it.
3. One registration each, below, in report order: ``register(Output("memorized", TABLE, "6. Memorization",
   probe="memorization", code="qclm.analysis.memorization:memorized_table"))``, then the figure with
   ``table="memorized"``; and a caption ``workflow/report/NAME.rst``.
4. The kind's analysis prepares its context and calls
   ``qclm.analysis.runner.run_outputs(probe, context, out_dir)``, which computes the kind's tables in
   registration order, writes each (CSV, Markdown, HTML) as soon as it exists and draws the figures from them;
   it writes its section of the report's first page, ``analysis/overview.KIND.md``
   (:func:`qclm.analysis.overview.write_fragment`), and the workflow's ``overview`` rule composes the page.
5. In workflow/rules/analysis.smk the kind's rule declares its outputs from :func:`outputs` as the Likert rule
   ``analyze`` does (every file, the shown one in ``report()`` with caption and category), writes its section,
   and the kind joins ``ANALYSIS_PROBES`` (its files join the targets, its section the ``overview`` rule).

tests/test_analysis_registry.py holds a worked example: a probe kind registered in the test whose table and
figure the runner writes.
"""

from __future__ import annotations

from dataclasses import dataclass

TABLE, FIGURE = "table", "figure"
KINDS = (TABLE, FIGURE)
#: the probe kind of the questionnaire analyses (the paper's QCLM)
LIKERT = "likert"
#: where the caption files are, relative to the repository root
CAPTION_DIR = "workflow/report"


@dataclass(frozen=True)
class Output:
    """One table or figure of the analysis (module docstring)."""

    name: str
    kind: str
    category: str
    probe: str
    code: str
    table: str | None = None
    uses: tuple[str, ...] = ()
    caption: str = ""

    def __post_init__(self) -> None:
        if not self.caption:
            object.__setattr__(self, "caption", f"{self.name}.rst")
        object.__setattr__(self, "uses", tuple(self.uses))

    @property
    def reads(self) -> tuple[str, ...]:
        """The tables the function receives after the context, in order."""
        return ((self.table,) if self.table else ()) + self.uses

    @property
    def files(self) -> tuple[str, ...]:
        """Its files, relative to the analysis directory."""
        if self.kind == TABLE:
            return f"{self.name}.csv", f"tables/{self.name}.md", f"tables/{self.name}.html"
        return f"figures/{self.name}.png", f"figures/{self.name}.pdf"

    @property
    def shown(self) -> str:
        """The file the report shows (the HTML copy of a table, the PNG of a figure)."""
        return self.files[2] if self.kind == TABLE else self.files[0]


_OUTPUTS: list[Output] = []


def register(output: Output) -> Output:
    """Add a registration; a problem (a name taken, an unknown kind, a table not registered before) is a
    ValueError naming the output."""
    what = f"analysis output {output.kind} {output.name!r} ({output.probe})"
    if output.kind not in KINDS:
        raise ValueError(f"{what}: kind must be one of {', '.join(KINDS)}")
    if not output.name or not output.name.replace("_", "").isalnum():
        raise ValueError(f"{what}: the name is a file stem of letters, digits and underscores")
    if not output.category or not output.probe:
        raise ValueError(f"{what}: needs a report category and a probe kind")
    module, _, function = output.code.partition(":")
    if not module or not function:
        raise ValueError(f"{what}: code must be 'module:function', got {output.code!r}")
    if any(o.kind == output.kind and o.name == output.name for o in _OUTPUTS):
        raise ValueError(f"{what}: a {output.kind} of that name is registered already")
    if output.kind == TABLE and output.table:
        raise ValueError(f"{what}: a table names the tables it reads in uses, not table")
    if output.kind == FIGURE and output.table is None and output.uses:
        raise ValueError(f"{what}: a figure that reads tables names the one whose underpowered column it draws "
                         "in table")
    tables = [o.name for o in _OUTPUTS if o.kind == TABLE and o.probe == output.probe]
    missing = [t for t in output.reads if t not in tables]
    if missing:
        raise ValueError(f"{what}: reads {', '.join(missing)}, not a table of probe kind {output.probe} "
                         "registered before it")
    _OUTPUTS.append(output)
    return output


def outputs(probe: str | None = None, kind: str | None = None) -> tuple[Output, ...]:
    """The registrations, in registration order (report order), of one probe kind and/or kind."""
    return tuple(o for o in _OUTPUTS if (probe is None or o.probe == probe) and (kind is None or o.kind == kind))


def names(probe: str | None = None, kind: str | None = None) -> tuple[str, ...]:
    """The names of :func:`outputs`."""
    return tuple(o.name for o in outputs(probe, kind))


def categories(probe: str | None = None) -> tuple[str, ...]:
    """The report categories of a probe kind (all kinds: None), in report order."""
    return tuple(dict.fromkeys(o.category for o in outputs(probe)))


def probes() -> tuple[str, ...]:
    """The probe kinds with registered outputs, in registration order (Likert first)."""
    return tuple(dict.fromkeys(o.probe for o in _OUTPUTS))


def get(kind: str, name: str) -> Output:
    """The registration of a table or figure by name."""
    for o in _OUTPUTS:
        if o.kind == kind and o.name == name:
            return o
    raise KeyError(f"no analysis {kind} named {name!r}")


# --------------------------------------------------------------------------- the Likert questionnaire analyses

def _likert(name: str, kind: str, category: str, code: str, table: str | None = None,
            uses: tuple[str, ...] = ()) -> None:
    register(Output(name, kind, category, LIKERT, f"qclm.analysis.{code}", table, uses))


PER_MODEL, ACROSS_MODELS, VALIDATION, LIBRARY, WORDING = (
    "1. Per-model results", "2. Across-model results", "3. Validation", "4. Instrument library", "5. Wording")

# what one or two models support comes first (method.md section 6b)
_likert("per_model", TABLE, PER_MODEL, "permodel:per_model")
_likert("per_model_state_trait", TABLE, PER_MODEL, "permodel:per_model_state_trait")
_likert("per_model_interaction", TABLE, PER_MODEL, "permodel:per_model_interaction")
_likert("per_model_shifts", FIGURE, PER_MODEL, "permodel_figures:per_model_shifts", table="per_model")
_likert("per_model_spectrum", FIGURE, PER_MODEL, "permodel_figures:per_model_spectrum",
        table="per_model_state_trait")
# across models (method.md section 6; figures 3-6 of the paper)
_likert("zscores", TABLE, ACROSS_MODELS, "across_models:zscores")
_likert("condition_summary", TABLE, ACROSS_MODELS, "across_models:condition_summary")
_likert("paired_tests", TABLE, ACROSS_MODELS, "across_models:paired_tests")
_likert("anova_oneway", TABLE, ACROSS_MODELS, "across_models:anova_oneway")
_likert("anova_interaction", TABLE, ACROSS_MODELS, "across_models:anova_interaction")
_likert("anova_by_size", TABLE, ACROSS_MODELS, "across_models:anova_by_size")
_likert("fig3_condition_means", FIGURE, ACROSS_MODELS, "across_figures:condition_means", table="condition_summary")
_likert("fig4_model_scores", FIGURE, ACROSS_MODELS, "across_figures:model_scores", table="condition_summary",
        uses=("zscores",))
_likert("fig5_variance_decomposition", FIGURE, ACROSS_MODELS, "across_figures:variance_decomposition",
        table="anova_oneway")
_likert("fig6_decomposition_by_size", FIGURE, ACROSS_MODELS, "across_figures:decomposition_by_size",
        table="anova_by_size")
_likert("state_trait_spectrum", FIGURE, ACROSS_MODELS, "across_figures:state_trait_spectrum", table="anova_oneway")
# validation of the adaptation (method.md section 7); the heatmap draws the scoring stage's variant probabilities
_likert("validation", TABLE, VALIDATION, "validation:validation")
_likert("item_heatmap", FIGURE, VALIDATION, "item_heatmap:item_heatmap")
# the instrument library (method.md section 7c)
_likert("instrument_validation", TABLE, LIBRARY, "library:instrument_validation")
_likert("construct_map", TABLE, LIBRARY, "constructs:construct_map")
_likert("instrument_spectrum", TABLE, LIBRARY, "library:instrument_spectrum",
        uses=("anova_oneway", "per_model_state_trait"))
_likert("instrument_validation", FIGURE, LIBRARY, "library_figures:instrument_validation",
        table="instrument_validation")
_likert("construct_map", FIGURE, LIBRARY, "library_figures:construct_map", table="construct_map")
_likert("instrument_spectrum", FIGURE, LIBRARY, "library_figures:instrument_spectrum", table="instrument_spectrum")
# wording (method.md section 7b)
_likert("wording", TABLE, WORDING, "wording:wording")
_likert("wording", FIGURE, WORDING, "wording_figures:wording", table="wording")

#: the per-model state-trait decomposition of a probe kind's per-item numbers (qclm.probes.items), one caption
STATE_TRAIT_CODE, STATE_TRAIT_CAPTION = "qclm.probes.items:state_trait_output", "probe_state_trait.rst"

# the memorization probe (docs/memorization.md)
MEMORIZATION = "6. Memorization"
register(Output("memorization", TABLE, MEMORIZATION, "memorization",
                "qclm.probes.memorization.analysis:memorization_output"))
register(Output("memorization", FIGURE, MEMORIZATION, "memorization",
                "qclm.probes.memorization.figures:figure_memorization", table="memorization"))
register(Output("memorization_state_trait", TABLE, MEMORIZATION, "memorization", STATE_TRAIT_CODE,
                caption=STATE_TRAIT_CAPTION))

# the Core Sentiment Inventory probe (docs/csi.md)
CSI = "7. Implicit sentiment"
register(Output("csi_validity", TABLE, CSI, "csi", "qclm.probes.csi.analysis:validity_output"))
register(Output("csi_scores", TABLE, CSI, "csi", "qclm.probes.csi.analysis:scores_output", uses=("csi_validity",)))
register(Output("csi_contrasts", TABLE, CSI, "csi", "qclm.probes.csi.analysis:contrasts_output"))
register(Output("csi_story", TABLE, CSI, "csi", "qclm.probes.csi.analysis:story_output"))
register(Output("csi_state_trait", TABLE, CSI, "csi", STATE_TRAIT_CODE, caption=STATE_TRAIT_CAPTION))
register(Output("csi", FIGURE, CSI, "csi", "qclm.probes.csi.analysis:figure_csi", table="csi_scores",
                uses=("csi_story",)))

# the entailment probe (docs/entailment.md)
ENTAILMENT = "8. Entailment items"
register(Output("entailment", TABLE, ENTAILMENT, "entailment", "qclm.probes.entailment.analysis:entailment_output"))
register(Output("entailment", FIGURE, ENTAILMENT, "entailment", "qclm.probes.entailment.figures:figure_entailment",
                table="entailment"))
register(Output("entailment_state_trait", TABLE, ENTAILMENT, "entailment", STATE_TRAIT_CODE,
                caption=STATE_TRAIT_CAPTION))

# the generated survey (docs/survey.md)
SURVEY = "9. Generated survey"
register(Output("survey_summary", TABLE, SURVEY, "survey", "qclm.probes.survey.analysis:summary_output"))
register(Output("survey_agreement", TABLE, SURVEY, "survey", "qclm.probes.survey.analysis:agreement_output"))
register(Output("survey_state_trait", TABLE, SURVEY, "survey", STATE_TRAIT_CODE, caption=STATE_TRAIT_CAPTION))
register(Output("survey_rates", FIGURE, SURVEY, "survey", "qclm.probes.survey.figures:figure_rates",
                table="survey_summary", caption="survey_rates.rst"))
register(Output("survey_agreement", FIGURE, SURVEY, "survey", "qclm.probes.survey.figures:figure_agreement",
                table="survey_agreement"))

# fine-tuning interventions: what moves with the weights (docs/interventions.md)
INTERVENTIONS = "10. Interventions"
register(Output("intervention_overlap", TABLE, INTERVENTIONS, "interventions",
                "qclm.interventions.analysis:overlap_output"))
register(Output("intervention", TABLE, INTERVENTIONS, "interventions",
                "qclm.interventions.analysis:intervention_output", uses=("intervention_overlap",)))
register(Output("intervention_tests", TABLE, INTERVENTIONS, "interventions", "qclm.interventions.analysis:tests_output",
                uses=("intervention",)))
register(Output("trait_map", TABLE, INTERVENTIONS, "interventions", "qclm.interventions.analysis:trait_map_output",
                uses=("intervention",)))
register(Output("trait_map", FIGURE, INTERVENTIONS, "interventions", "qclm.interventions.analysis:figure_trait_map",
                table="trait_map"))

# the planted-signal calibration: the dose each probe detects (docs/calibration.md)
CALIBRATION = "11. Calibration"
register(Output("calibration", TABLE, CALIBRATION, "calibration", "qclm.calibration.analysis:calibration_output"))
register(Output("calibration_floor", TABLE, CALIBRATION, "calibration", "qclm.calibration.analysis:floor_output",
                uses=("calibration",)))
register(Output("calibration", FIGURE, CALIBRATION, "calibration", "qclm.calibration.analysis:figure_calibration",
                table="calibration"))
