# One job per model: the weights are loaded once and every probe instance x condition (a cell) is scored with
# them (a 16B model takes minutes to load); each cell still gets its own Parquet table, the probe kind's raw
# table, {RESULTS}/logprobs/{model}/{probe}/{condition}.parquet. The params hold exactly what changes the
# numbers: the cells (probe kind, its scoring settings, material and stimulus files), the protocol and the engine
# settings (qclm.settings.engine_numbers); the scoring math and the analysis settings are not here.

SCORING_CELLS = [
    {
        "probe": i.id,
        "kind": i.kind,
        "version": probes.kind_class(i.kind).version,
        "condition": c,
        "settings": probes.kind_class(i.kind).scoring_settings(i.settings),
        "files": probes.probe(i).files(),
        "stimuli_files": EXPERIMENT.files_of(c),
    }
    for i in INSTANCES.values()
    for c in INSTANCE_CONDITIONS[i.id]
]


rule score:
    conda:
        "../../environment.yml"
    input:
        material=sorted({f for cell in SCORING_CELLS for f in cell["files"]}),
        stimuli=sorted({f for cell in SCORING_CELLS for f in cell["stimuli_files"]}),
        prepared=prepared_model,
    output:
        [raw_table("{model}", cell["probe"], cell["condition"]) for cell in SCORING_CELLS],
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
        cells=[f"{LOGS}/score/{{model}}/{cell['probe']}/{cell['condition']}.log" for cell in SCORING_CELLS],
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
