# One job per model x questionnaire x condition: raw token log-probabilities as Parquet.


rule score:
    input:
        questionnaire=lambda w: QUESTIONNAIRES[w.questionnaire],
        stimuli=stimuli_file,
        prepared=prepared_model,
    output:
        "results/logprobs/{model}/{questionnaire}/{condition}.parquet",
    params:
        model=model_row,
        scoring=scoring_settings,
        protocol=protocol_settings,
        models_dir=MODELS_DIR,
    log:
        "logs/score/{model}/{questionnaire}/{condition}.log",
    benchmark:
        "results/benchmarks/score/{model}/{questionnaire}/{condition}.tsv"
    threads: config["scoring"]["threads"]
    resources:
        gpu=1,
    script:
        "../scripts/score.py"
