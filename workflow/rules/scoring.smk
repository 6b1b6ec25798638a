# One job per model: the weights are loaded once and every probe instance x condition (a cell) is scored with
# them (a 16B model takes minutes to load); each cell still gets its own Parquet table, the probe kind's raw
# table, {RESULTS}/logprobs/{model}/{probe}/{condition}.parquet. The params hold exactly what changes the
# numbers: the cells (probe kind, its scoring settings, material and stimulus files), the protocol and the engine
# settings (qclm.settings.engine_numbers); the scoring math and the analysis settings are not here.
# Models scored by the same probe instances share one rule: `score` for the models every instance scores (all of
# them in a run without calibration plants); a calibration plant's checkpoints, which only its plant's probes
# score (MODEL_INSTANCES, common.smk), get a rule of their own per set of instances, `score_` and the set's ids.


# instance ids -> the models they score
SCORING_GROUPS = {}
for _model, _ids in MODEL_INSTANCES.items():
    SCORING_GROUPS.setdefault(tuple(_ids), []).append(_model)

for _ids, _models in SCORING_GROUPS.items():
    _cells = scoring_cells(_ids)

    rule:
        name:
            group_rule("score", _ids, list(_ids) == list(INSTANCES))
        conda:
            "../../environment.yml"
        input:
            material=sorted({f for cell in _cells for f in cell["files"]}),
            stimuli=sorted({f for cell in _cells for f in cell["stimuli_files"]}),
            prepared=prepared_model,
        output:
            [raw_table("{model}", cell["probe"], cell["condition"]) for cell in _cells],
        params:
            model=model_row,
            cells=_cells,
            engine=engine_settings,
            protocol=protocol_settings,
            models_dir=MODELS_DIR,
            # finished cells survive a killed job here (Snakemake deletes an incomplete job's outputs)
            cache_dir=f"{RESULTS}/cache/logprobs",
        wildcard_constraints:
            model=_alternatives(_models),
        log:
            # the whole job (loading, GPU binding, failures); each cell's scoring also in its own file
            main=f"{LOGS}/score/{{model}}.log",
            cells=[f"{LOGS}/score/{{model}}/{cell['probe']}/{cell['condition']}.log" for cell in _cells],
        benchmark:
            f"{RESULTS}/benchmarks/score/{{model}}.tsv"
        threads: ENGINE["threads"]
        # the GPU is the scarce resource: whenever it is free a scoring job starts first, and the
        # CPU-only jobs fill the remaining cores
        priority: 10
        resources:
            gpu=score_gpus,
            mem_mb=score_mem_mb,
            runtime=score_runtime,
        script:
            "../scripts/score_model.py"
