# The planted-signal calibration (docs/calibration.md; qclm.calibration): one corpus per plant and dose, and the
# filler alone per dose (the control), each written by a job of its own from the part of the config it depends on
# (qclm.calibration.corpus_config); the fine-tuning (interventions.smk) and the scoring of every checkpoint
# (scoring.smk) follow as for any intervention, and analyze_calibration (analysis.smk) reads every checkpoint's
# scores beside the control of its dose.


def calibration_material(wildcards):
    """The files a calibration corpus is made of: its plant's material and its probes' (the control: none)."""
    plant = CALIBRATION[wildcards.intervention].plant
    if plant is None:
        return []
    files = {f for i in plant.probes for f in probes.probe(INSTANCES[i]).files()}
    return sorted(files | {v for k, v in plant.settings.items() if k in ("instrument", "statements")})


if CALIBRATION:

    rule calibration_corpus:
        conda:
            "../../environment.yml"
        input:
            filler=calibration.section(config)["filler"],
            material=calibration_material,
        output:
            str(calibration.corpus_path(RESULTS, "{intervention}")),
        params:
            config=lambda wildcards: calibration.corpus_config(config, wildcards.intervention),
        wildcard_constraints:
            intervention=_alternatives(CALIBRATION),
        log:
            f"{LOGS}/calibration_corpus/{{intervention}}.log",
        localrule: True
        script:
            "../scripts/calibration_corpus.py"
