# Analysis stage (method.md sections 6-8): statistics tables and figures from the scoring stage's tables.
# The rules only wire files to the package: every probe kind's analysis runs through one rule, analyze_KIND
# (ProbeKind.analyze: workflow/scripts/analyze_probe.py), the intervention and calibration analyses through
# theirs. The outputs, their captions and report categories come from their owners (a kind's `outputs`, the
# built-in kinds' in qclm/probes/KIND/outputs.py; qclm/interventions/outputs.py, qclm/calibration/outputs.py);
# the report numbers the categories in report order (qclm.analysis.registry.report_categories): Likert first,
# then the run's other kinds in config order, then the interventions and the calibration. Settings: config
# sections stimuli, conditions, contrasts and analysis (defaults from the config schema via qclm.settings), and
# the sections each kind's CPU stages read (ProbeKind.config_sections: Likert's templates.select).
# A Snakefile that only analyses existing scores names their kinds itself before including this file (KINDS =
# ["likert"]) and reads the score tables present.

import os
import sys

from qclm import probes, settings
from qclm.analysis import floors, registry
from qclm.analysis.overview import OVERVIEW, fragment_name
from qclm.experiment import EXPERIMENT_KEYS, output_dirs

ANALYSIS_RESULTS, ANALYSIS_LOGS = output_dirs(config)
ANALYSIS_DIR = f"{ANALYSIS_RESULTS}/analysis"
# the probe kinds this workflow analyses, name -> the kind as the config names it (the run's kinds, common.smk's
# KINDS, or those a Snakefile that only analyses existing scores names), in report order (ProbeKind.report_rank,
# then the config's order), each through the analyze_KIND rule below
ANALYSIS_SCORES_ONLY = "PLAN" not in globals()
ANALYSIS_KINDS = {
    probes.kind_class(k).name: k for k in sorted(KINDS, key=lambda k: probes.kind_class(k).report_rank)
}
# every owner's outputs in report order: the kinds', then the intervention analysis (where the config has
# interventions: the item scores of every kind that has them, base models and checkpoints together), then the
# planted-signal calibration (where the config has one: the score tables of every kind a plant is read by)
ANALYSIS_OUTPUTS = {name: probes.kind_class(key).analysis_outputs() for name, key in ANALYSIS_KINDS.items()}
ANALYSIS_INTERVENTION_ITEMS = {
    _key: f"{ANALYSIS_RESULTS}/scores/{probes.kind_class(_key).score_tables[probes.kind_class(_key).intervention_items()]}"
    for _key in (KINDS if globals().get("INTERVENTIONS") else [])
    if probes.kind_class(_key).intervention_items()
}
if ANALYSIS_INTERVENTION_ITEMS:
    from qclm.interventions import outputs as _interventions

    ANALYSIS_OUTPUTS[_interventions.PROBE] = _interventions.OUTPUTS
ANALYSIS_CALIBRATION_KINDS = sorted(
    {INSTANCES[p].kind for job in globals().get("CALIBRATION", {}).values() for plant in job.plants
     for p in plant.probes}
)
if ANALYSIS_CALIBRATION_KINDS:
    from qclm.calibration import outputs as _calibration
    from qclm.calibration import provenance as _calibration_provenance

    ANALYSIS_OUTPUTS[_calibration.PROBE] = _calibration.OUTPUTS
ANALYSIS_PROBES = list(ANALYSIS_OUTPUTS)
# (owner, category title) -> "N. title"; refuses two owners writing one file
ANALYSIS_CATEGORIES = registry.report_categories(list(ANALYSIS_OUTPUTS.values()))
# every file of an owner's tables and figures
ANALYSIS_FILES = {
    probe: [f"{ANALYSIS_DIR}/{path}" for o in outputs for path in o.files] for probe, outputs in ANALYSIS_OUTPUTS.items()
}
# the calibrated floors each kind's section of the first page ends with (analysis.floors; qclm.analysis.floors)
ANALYSIS_FLOORS = floors.path(config)
# each owner's section of the report's first page (analysis/overview.KIND.md) joins the overview
ANALYSIS_FRAGMENTS = {probe: f"{ANALYSIS_DIR}/{fragment_name(probe)}" for probe in ANALYSIS_PROBES}
ANALYSIS_TARGETS = [path for probe in ANALYSIS_PROBES for path in ANALYSIS_FILES[probe]] + [
    f"{ANALYSIS_DIR}/{OVERVIEW}.{ext}" for ext in ("md", "rst")
]
# the report opens on the run's own overview once the analysis has written it (snakemake --report runs
# after the workflow), else on the static description of the workflow
_OVERVIEW_RST = os.path.abspath(f"{ANALYSIS_DIR}/{OVERVIEW}.rst")
REPORT_DESCRIPTION = (
    _OVERVIEW_RST if os.path.exists(_OVERVIEW_RST) else str(workflow.source_path("../report/workflow.rst"))
)


# Snakemake's report() (a line opening with `report` would be read as the report: keyword)
snakemake_report = report
# every file of an owner's outputs; the one the report shows (a table's HTML copy, a figure's PNG) with its caption
# (absolute: it lies in the owner's package) and numbered category
ANALYSIS_OUTPUT_FILES = {
    probe: [
        snakemake_report(
            f"{ANALYSIS_DIR}/{path}",
            caption=o.caption,
            category=ANALYSIS_CATEGORIES[(o.probe, o.category)],
            subcategory="Tables" if o.kind == registry.TABLE else "Figures",
        )
        if path == o.shown
        else f"{ANALYSIS_DIR}/{path}"
        for o in outputs
        for path in o.files
    ]
    for probe, outputs in ANALYSIS_OUTPUTS.items()
}
# a kind's inputs: its score tables, and the tables of other kinds it reads where the run has those kinds
# (ProbeKind.optional_tables: score tables, or their analysis tables); only the score tables present where the
# Snakefile analyses existing scores
ANALYSIS_INPUTS = {
    name: {
        **{
            f"table_{t}": f"{ANALYSIS_RESULTS}/scores/{path}"
            for t, path in probes.kind_class(key).score_tables.items()
            if not ANALYSIS_SCORES_ONLY or os.path.exists(f"{ANALYSIS_RESULTS}/scores/{path}")
        },
        **{
            f"table_{t}": f"{ANALYSIS_RESULTS}/{probes.kind_class(ANALYSIS_KINDS[kind]).table_path(table)}"
            for t, (kind, table) in probes.kind_class(key).optional_tables.items()
            if kind in ANALYSIS_KINDS and not ANALYSIS_SCORES_ONLY
        },
    }
    for name, key in ANALYSIS_KINDS.items()
}


# Every probe kind: its tables and figures from its score tables (ProbeKind.analyze, through the analysis runner;
# the Likert kind's is `qclm analyze`'s), and its section of the first page.
ANALYSIS_PROBE_CONFIG = {key: config[key] for key in (*EXPERIMENT_KEYS, "analysis") if key in config}

for _name, _key in ANALYSIS_KINDS.items():
    _cls = probes.kind_class(_key)

    rule:
        name:
            f"analyze_{_key}"
        conda:
            "../../environment.yml"
        input:
            **ANALYSIS_INPUTS[_name],
        output:
            ANALYSIS_OUTPUT_FILES[_name],
            fragment=ANALYSIS_FRAGMENTS[_name],
        params:
            kind=_key,
            instances=[i for i in globals().get("INSTANCES", {}).values() if i.kind == _key],
            config={**ANALYSIS_PROBE_CONFIG, **_cls.stage_config(config)},
            out=lambda wildcards, output: os.path.dirname(output.fragment),
            # the analysis settings, defaults filled in: the captions quote them ({{ snakemake.params.analysis.seed }})
            analysis=settings.section(config, settings.ANALYSIS),
        log:
            f"{ANALYSIS_LOGS}/analyze_{_key}.log",
        benchmark:
            f"{ANALYSIS_RESULTS}/benchmarks/analyze_{_key}.tsv"
        script:
            "../scripts/analyze_probe.py"


if ANALYSIS_INTERVENTION_ITEMS:

    rule analyze_interventions:
        conda:
            "../../environment.yml"
        input:
            **{f"items_{kind}": path for kind, path in ANALYSIS_INTERVENTION_ITEMS.items()},
            # the overlap of each corpus with each instrument's construct terms reads them
            corpora=sorted({iv.corpus for iv in INTERVENTIONS.values()}),
            material=sorted({f for i in INSTANCES.values() for f in probes.probe(i).files()}),
        output:
            ANALYSIS_OUTPUT_FILES[_interventions.PROBE],
            fragment=ANALYSIS_FRAGMENTS[_interventions.PROBE],
        params:
            config={
                key: config[key]
                for key in (*EXPERIMENT_KEYS, "analysis", "interventions",
                            *probes.shorthands(), "probes")
                if key in config
            },
            out=lambda wildcards, output: os.path.dirname(output.fragment),
        log:
            f"{ANALYSIS_LOGS}/analyze_interventions.log",
        script:
            "../scripts/analyze_interventions.py"


if ANALYSIS_CALIBRATION_KINDS:

    rule analyze_calibration:
        conda:
            "../../environment.yml"
        input:
            **{
                f"{kind}__{name}": f"{ANALYSIS_RESULTS}/scores/{path}"
                for kind in ANALYSIS_CALIBRATION_KINDS
                for name, path in probes.kind_class(kind).score_tables.items()
            },
            material=sorted({f for i in INSTANCES.values() for f in probes.probe(i).files()}),
            runs=calibration_runs,
            corpora=calibration_corpora,
        output:
            ANALYSIS_OUTPUT_FILES[_calibration.PROBE],
            fragment=ANALYSIS_FRAGMENTS[_calibration.PROBE],
        params:
            config=_calibration_provenance.analysis_config(config),
            out=lambda wildcards, output: os.path.dirname(output.fragment),
        log:
            f"{ANALYSIS_LOGS}/analyze_calibration.log",
        script:
            "../scripts/analyze_calibration.py"


# The report's first page: the sections the analyses wrote, in report order (qclm.analysis.overview).
# `qclm analyze` composes the page in its directory too; this rule composes it from every owner's section.
rule overview:
    conda:
        "../../environment.yml"
    input:
        fragments=list(ANALYSIS_FRAGMENTS.values()),
        floors=[ANALYSIS_FLOORS] if ANALYSIS_FLOORS else [],
    params:
        models=list(globals().get("BASE_MODELS", {})),
        kinds=list(ANALYSIS_KINDS),
    output:
        md=f"{ANALYSIS_DIR}/{OVERVIEW}.md",
        rst=f"{ANALYSIS_DIR}/{OVERVIEW}.rst",
    log:
        f"{ANALYSIS_LOGS}/overview.log",
    localrule: True
    script:
        "../scripts/overview.py"
