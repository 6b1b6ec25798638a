# One job per model: the weights are loaded once and every questionnaire x condition is scored
# with them (a 16B model takes minutes to load); each cell still gets its own Parquet table of
# raw token log-probabilities, {RESULTS}/logprobs/{model}/{questionnaire}/{condition}.parquet.

SCORING_CELLS = [
    {
        "questionnaire": q,
        "condition": c,
        "questionnaire_file": QUESTIONNAIRES[q],
        "stimuli_files": EXPERIMENT.files_of(c),
    }
    for q in QUESTIONNAIRES
    for c in CONDITIONS
]


rule score:
    conda:
        "../../environment.yml"
    input:
        questionnaires=sorted(set(QUESTIONNAIRES.values())),
        stimuli=sorted({f for cell in SCORING_CELLS for f in cell["stimuli_files"]}),
        prepared=prepared_model,
    output:
        [
            f"{RESULTS}/logprobs/{{model}}/{cell['questionnaire']}/{cell['condition']}.parquet"
            for cell in SCORING_CELLS
        ],
    params:
        model=model_row,
        cells=SCORING_CELLS,
        engine=engine_settings,
        protocol=protocol_settings,
        models_dir=MODELS_DIR,
        # finished cells survive a killed job here (Snakemake deletes an incomplete job's outputs)
        cache_dir=f"{RESULTS}/cache/logprobs",
    log:
        # the whole job (loading, GPU binding, failures); each cell's scoring also in its own file
        main=f"{LOGS}/score/{{model}}.log",
        cells=[
            f"{LOGS}/score/{{model}}/{cell['questionnaire']}/{cell['condition']}.log"
            for cell in SCORING_CELLS
        ],
    benchmark:
        f"{RESULTS}/benchmarks/score/{{model}}.tsv"
    threads: ENGINE["threads"]
    # the GPU is the scarce resource: whenever it is free a scoring job starts first, and the
    # CPU-only jobs fill the remaining cores
    priority: 10
    resources:
        gpu=1,
        mem_mb=score_mem_mb,
        runtime=score_runtime,
    script:
        "../scripts/score_model.py"
