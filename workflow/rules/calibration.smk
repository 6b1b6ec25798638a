# The planted-signal calibration (docs/calibration.md; qclm.calibration): one corpus per plant and dose, and the
# filler alone per dose (the control), each written by a job of its own from the part of the config it depends on
# (qclm.calibration.corpus_config); the fine-tuning (interventions.smk) and the scoring of every checkpoint
# (scoring.smk) follow as for any intervention, and analyze_calibration (analysis.smk) reads every checkpoint's
# scores beside the control of its dose.


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
