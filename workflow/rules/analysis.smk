# Analysis stage (method.md sections 6-8): statistics tables and figures from the scoring stage's tables.
# The rules only wire files to the package (src/qclm/analysis); the outputs, their report categories and
# captions come from the registrations in qclm.analysis.registry (one home). Settings: config["analysis"]
# (bootstrap, seed, size_classes, min_models, min_stimuli, heatmap_item; defaults from the config schema via
# qclm.settings), the experiment's contrasts, templates.select.
# The instrument table (constructs and framings of the questionnaires) is an input where the workflow scores
# questionnaires; a Snakefile that only analyses existing scores runs without it.

import os
import shlex
import sys

from qclm import probes, settings
from qclm.analysis import registry
from qclm.analysis.overview import OVERVIEW, fragment_name
from qclm.experiment import Experiment, format_contrast_args, output_dirs, template_settings

ANALYSIS_RESULTS, ANALYSIS_LOGS = output_dirs(config)
ANALYSIS_DIR = f"{ANALYSIS_RESULTS}/analysis"
ANALYSIS_SETTINGS = settings.section(config, settings.ANALYSIS)
ANALYSIS_CONTRASTS = (
    format_contrast_args(Experiment.from_config(config).contrasts) if "conditions" in config else ""
)
ANALYSIS_INSTRUMENTS = f"{ANALYSIS_RESULTS}/scores/instruments.csv" if globals().get("QUESTIONNAIRES") else []
# the probe kinds this workflow analyses (the run's kinds; a Snakefile that only analyses existing Likert scores:
# Likert), each with its rule below; each kind's section of the report's first page (analysis/overview.KIND.md)
# joins the overview
ANALYSIS_KINDS = {probes.kind_class(k).name: k for k in KINDS} if "KINDS" in globals() else {registry.LIKERT: ""}
ANALYSIS_PROBES = list(ANALYSIS_KINDS)
# the memorization probe's table, where the run has one: instruments whose items a model has seen are flagged in
# the Likert kind's instrument_validation
ANALYSIS_MEMORIZATION = (
    f"{ANALYSIS_DIR}/{registry.get(registry.TABLE, 'memorization').files[0]}"
    if "memorization" in ANALYSIS_PROBES
    else []
)
# every file of a probe kind's registered tables and figures
ANALYSIS_FILES = {
    probe: [f"{ANALYSIS_DIR}/{path}" for o in registry.outputs(probe) for path in o.files]
    for probe in ANALYSIS_PROBES
}
# the intervention analysis (qclm.interventions.analysis) where the config has interventions: the item scores of
# every kind that has them, base models and checkpoints together
ANALYSIS_INTERVENTION_ITEMS = {
    _key: f"{ANALYSIS_RESULTS}/scores/{probes.kind_class(_key).score_tables[probes.kind_class(_key).item_table or 'items']}"
    for _key in (KINDS if globals().get("INTERVENTIONS") else [])
    if probes.kind_class(_key).item_table or _key == registry.LIKERT
}
if ANALYSIS_INTERVENTION_ITEMS:
    ANALYSIS_PROBES.append("interventions")
    ANALYSIS_FILES["interventions"] = [
        f"{ANALYSIS_DIR}/{path}" for o in registry.outputs("interventions") for path in o.files
    ]
# the planted-signal calibration (qclm.calibration.analysis) where the config has one: the score tables of every
# kind a plant is read by, base models, controls and planted checkpoints together
ANALYSIS_CALIBRATION_KINDS = sorted(
    {INSTANCES[p].kind for job in globals().get("CALIBRATION", {}).values() if job.plant for p in job.plant.probes}
)
if ANALYSIS_CALIBRATION_KINDS:
    ANALYSIS_PROBES.append("calibration")
    ANALYSIS_FILES["calibration"] = [
        f"{ANALYSIS_DIR}/{path}" for o in registry.outputs("calibration") for path in o.files
    ]
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


if registry.LIKERT in ANALYSIS_PROBES:

    rule analyze:
        conda:
            "../../environment.yml"
        input:
            scores=f"{ANALYSIS_RESULTS}/scores/item_scores.parquet",
            silhouette=f"{ANALYSIS_RESULTS}/scores/silhouette.csv",
            variant_probs=f"{ANALYSIS_RESULTS}/scores/variant_probs.parquet",
            instruments=ANALYSIS_INSTRUMENTS,
            memorization=ANALYSIS_MEMORIZATION,
        output:
            # every registered file; the one the report shows (a table's HTML copy, a figure's PNG) with its
            # caption and category
            [
                report(
                    f"{ANALYSIS_DIR}/{path}",
                    caption=f"../report/{o.caption}",
                    category=o.category,
                    subcategory="Tables" if o.kind == registry.TABLE else "Figures",
                )
                if path == o.shown
                else f"{ANALYSIS_DIR}/{path}"
                for o in registry.outputs(registry.LIKERT)
                for path in o.files
            ],
            fragment=ANALYSIS_FRAGMENTS[registry.LIKERT],
            run_info=f"{ANALYSIS_DIR}/run_info.json",
        params:
            # the interpreter running Snakemake has the qclm package; a bare `qclm` may not be on PATH
            python=sys.executable,
            out=lambda wildcards, output: os.path.dirname(output.run_info),
            bootstrap=ANALYSIS_SETTINGS["bootstrap"],
            seed=ANALYSIS_SETTINGS["seed"],
            size_classes=",".join(str(b) for b in ANALYSIS_SETTINGS["size_classes"]),
            min_models=ANALYSIS_SETTINGS["min_models"],
            min_stimuli=ANALYSIS_SETTINGS["min_stimuli"],
            templates=template_settings(config)["select"],
            contrasts=ANALYSIS_CONTRASTS,  # empty: the paper's contrasts present in the table
            instruments=lambda wildcards, input: input.instruments or "",  # empty: no instrument table
            memorization=lambda wildcards, input: input.memorization or "",  # empty: no memorization probe
            heatmap=(
                f"--heatmap-item {shlex.quote(str(ANALYSIS_SETTINGS['heatmap_item']))}"
                if ANALYSIS_SETTINGS["heatmap_item"]
                else ""
            ),
        log:
            f"{ANALYSIS_LOGS}/analyze.log",
        benchmark:
            f"{ANALYSIS_RESULTS}/benchmarks/analyze.tsv"
        threads: 1
        shell:
            "{params.python:q} -m qclm.commands analyze --scores {input.scores:q} --out {params.out:q}"
            " --silhouette {input.silhouette:q} --variant-probs {input.variant_probs:q}"
            " --bootstrap {params.bootstrap} --seed {params.seed} --size-classes {params.size_classes:q}"
            " --min-models {params.min_models:q} --min-stimuli {params.min_stimuli:q} --templates {params.templates:q}"
            " --contrasts={params.contrasts:q} {params.heatmap} --instruments={params.instruments:q}"
            " --memorization={params.memorization:q} 2> {log:q}"


# Every other probe kind: its registered tables and figures from its score tables (ProbeKind.analyze, through the
# analysis runner), and its section of the first page.
ANALYSIS_PROBE_CONFIG = {key: config[key] for key in ("stimuli", "conditions", "contrasts", "analysis") if key in config}

for _name, _key in ANALYSIS_KINDS.items():
    if _name == registry.LIKERT:
        continue
    _cls = probes.kind_class(_key)

    rule:
        name:
            f"analyze_{_key}"
        conda:
            "../../environment.yml"
        input:
            **{f"table_{t}": f"{ANALYSIS_RESULTS}/scores/{path}" for t, path in _cls.score_tables.items()},
            # other kinds' score tables the analysis reads, where the run has those kinds
            **{
                f"table_{t}": f"{ANALYSIS_RESULTS}/scores/{probes.kind_class(other).score_tables[table]}"
                for t, (other, table) in _cls.optional_tables.items()
                if other in ANALYSIS_KINDS
            },
        output:
            [
                report(
                    f"{ANALYSIS_DIR}/{path}",
                    caption=f"../report/{o.caption}",
                    category=o.category,
                    subcategory="Tables" if o.kind == registry.TABLE else "Figures",
                )
                if path == o.shown
                else f"{ANALYSIS_DIR}/{path}"
                for o in registry.outputs(_name)
                for path in o.files
            ],
            fragment=ANALYSIS_FRAGMENTS[_name],
        params:
            kind=_key,
            instances=[i for i in INSTANCES.values() if i.kind == _key],
            config={**ANALYSIS_PROBE_CONFIG, **_cls.stage_config(config)},
            out=ANALYSIS_DIR,
        log:
            f"{ANALYSIS_LOGS}/analyze_{_key}.log",
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
            [
                report(
                    f"{ANALYSIS_DIR}/{path}",
                    caption=f"../report/{o.caption}",
                    category=o.category,
                    subcategory="Tables" if o.kind == registry.TABLE else "Figures",
                )
                if path == o.shown
                else f"{ANALYSIS_DIR}/{path}"
                for o in registry.outputs("interventions")
                for path in o.files
            ],
            fragment=ANALYSIS_FRAGMENTS["interventions"],
        params:
            config={
                key: config[key]
                for key in ("stimuli", "conditions", "contrasts", "analysis", "interventions", "questionnaires",
                            "probes")
                if key in config
            },
            out=ANALYSIS_DIR,
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
        output:
            [
                report(
                    f"{ANALYSIS_DIR}/{path}",
                    caption=f"../report/{o.caption}",
                    category=o.category,
                    subcategory="Tables" if o.kind == registry.TABLE else "Figures",
                )
                if path == o.shown
                else f"{ANALYSIS_DIR}/{path}"
                for o in registry.outputs("calibration")
                for path in o.files
            ],
            fragment=ANALYSIS_FRAGMENTS["calibration"],
        params:
            config={
                key: config[key]
                for key in ("calibration", "questionnaires", "probes", "analysis", "conditions")
                if key in config
            },
            out=ANALYSIS_DIR,
        log:
            f"{ANALYSIS_LOGS}/analyze_calibration.log",
        script:
            "../scripts/analyze_calibration.py"


# The report's first page: the sections the probe kinds' analyses wrote, Likert first (qclm.analysis.overview).
# `qclm analyze` composes the page in its directory too; this rule composes it from every kind's section.
rule overview:
    conda:
        "../../environment.yml"
    input:
        list(ANALYSIS_FRAGMENTS.values()),
    output:
        md=f"{ANALYSIS_DIR}/{OVERVIEW}.md",
        rst=f"{ANALYSIS_DIR}/{OVERVIEW}.rst",
    params:
        python=sys.executable,
        out=lambda wildcards, output: os.path.dirname(output.md),
    log:
        f"{ANALYSIS_LOGS}/overview.log",
    localrule: True
    shell:
        "{params.python:q} -m qclm.analysis.overview --out {params.out:q} {input:q} 2> {log:q}"
