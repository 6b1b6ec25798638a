# Fine-tuning interventions (docs/interventions.md): each model of the table x each intervention of the config is
# one job that fine-tunes the model on the intervention's corpus and writes a checkpoint after each epoch of
# `checkpoints` ({RESULTS}/checkpoints/{model}@{intervention}/e{epoch}/) and the job's marker last. Each
# checkpoint is a model of its own, MODEL@INTERVENTION-eEPOCH (DERIVED, common.smk), whose scoring job waits for
# the marker. The params hold what changes the weights: the base model's row and the training settings (the
# corpus is an input: a changed corpus fine-tunes again).


rule finetune:
    conda:
        "../../environment.yml"
    input:
        prepared=lambda wildcards: prepared_model(wildcards),
        corpus=lambda wildcards: FINETUNES[wildcards.intervention].corpus,
        check=finetune_check,
    output:
        str(interventions.job_dir(RESULTS, "{model}", "{intervention}") / interventions.JOB_MARKER),
    params:
        model=model_row,
        settings=lambda wildcards: FINETUNES[wildcards.intervention].training_settings(),
        device=ENGINE["device"],
        models_dir=MODELS_DIR,
    wildcard_constraints:
        model=_alternatives(BASE_MODELS),
        intervention=_alternatives(FINETUNES),
    log:
        f"{LOGS}/finetune/{{model}}@{{intervention}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/finetune/{{model}}@{{intervention}}.tsv"
    threads: ENGINE["threads"]
    priority: 20
    resources:
        gpu=1,
        mem_mb=finetune_mem_mb,
        runtime=finetune_runtime,
    script:
        "../scripts/finetune.py"
