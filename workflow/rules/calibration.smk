# The planted-signal calibration (docs/calibration.md; qclm.calibration): one corpus per run (the two arms and the
# shams of a plant, or of plants that share their runs) with the manipulation check's text sets beside it, each
# written by a job of its own from the part of the config it depends on (qclm.calibration.corpus_config); the
# fine-tuning (interventions.smk, which measures the check) and the scoring of every checkpoint (scoring.smk)
# follow as for any intervention, and analyze_calibration (analysis.smk) reads every checkpoint's scores and every
# run's check.


if CALIBRATION:

    rule calibration_corpus:
        conda:
            "../../environment.yml"
        input:
            filler=calibration.section(config)["filler"],
            heldout=calibration.section(config)["heldout_neutral"],
            shams=calibration.section(config)["sham_statements"],
            material=calibration_material,
        output:
            corpus=str(calibration.corpus_path(RESULTS, "{intervention}")),
            check=str(calibration.check_path(RESULTS, "{intervention}")),
        params:
            config=lambda wildcards: calibration.corpus_config(config, wildcards.intervention),
        wildcard_constraints:
            intervention=_alternatives(CALIBRATION),
        log:
            f"{LOGS}/calibration_corpus/{{intervention}}.log",
        localrule: True
        script:
            "../scripts/calibration_corpus.py"
