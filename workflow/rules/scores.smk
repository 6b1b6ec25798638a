# From token log-probabilities to variant probabilities, item scores and summary tables.


rule condition_scores:
    conda:
        "../../environment.yml"
    input:
        f"{RESULTS}/logprobs/{{model}}/{{questionnaire}}/{{condition}}.parquet",
    output:
        variants=f"{SCORES}/{{model}}/{{questionnaire}}/{{condition}}.variants.parquet",
        item_table=f"{SCORES}/{{model}}/{{questionnaire}}/{{condition}}.items.parquet",
    params:
        aggregation=SCORING["aggregation"],
        item_score=SCORING["item_score"],
        normalization_epsilon=SCORING["normalization_epsilon"],
    log:
        f"{LOGS}/condition_scores/{{model}}/{{questionnaire}}/{{condition}}.log",
    script:
        "../scripts/condition_scores.py"


rule aggregate_scores:
    conda:
        "../../environment.yml"
    input:
        item_tables=condition_outputs("items"),
        variant_tables=condition_outputs("variants"),
        models=config["models"],
        questionnaires=sorted(set(QUESTIONNAIRES.values())),
    output:
        item_scores=f"{SCORES}/item_scores.parquet",
        item_scores_csv=f"{SCORES}/item_scores.csv",
        questionnaires=f"{SCORES}/questionnaire_scores.csv",
        conditions=f"{SCORES}/condition_means.csv",
        variants=f"{SCORES}/variant_probs.parquet",
        silhouette=f"{SCORES}/silhouette.csv",
        instruments=f"{SCORES}/instruments.csv",
    params:
        questionnaires=QUESTIONNAIRES,
        select=TEMPLATES["select"],
    log:
        f"{LOGS}/aggregate_scores.log",
    script:
        "../scripts/aggregate_scores.py"
