# One job per model: the weights are loaded once and every probe instance x condition (a cell) is scored with
# them (a 16B model takes minutes to load); each cell still gets its own Parquet table, the probe kind's raw
# table, {RESULTS}/logprobs/{model}/{probe}/{condition}.parquet. The params hold exactly what changes the
# numbers: the cells (probe kind, its scoring settings, material and stimulus files, the config sections its
# scoring reads), the run's context settings and the engine settings (qclm.settings.engine_numbers); the scoring
# math and the analysis settings are not here.
# Models scored by the same probe instances share one rule: `score` for the models every instance scores (all of
# them in a run without calibration plants); a calibration plant's checkpoints, which only its plant's probes
# score (MODEL_INSTANCES, common.smk), get a rule of their own per set of instances, `score_` and the set's ids.
# Kinds whose scoring reads config sections of their own (ProbeKind.scoring_sections: the Likert kind's
# templates.score) are scored in a job of their own per model (`score_likert`, log {model}.likert.log) where the
# run has other kinds too: changing such a section reruns only their job, and the other kinds' cells, tables and
# analyses are not touched (one more model load per model).


def _scoring_parts(ids):
    """The instances ``ids`` split by the config sections their kinds' scoring reads: (name suffix, ids) each; one
    part (no suffix) where they all read the same."""
    parts = {}
    for i in ids:
        cls = probes.kind_class(INSTANCES[i].kind)
        parts.setdefault(tuple(sorted(cls.scoring_sections.items())), []).append(i)
    if len(parts) == 1:
        return [("", list(ids))]
    return [("_".join(sorted({INSTANCES[i].kind for i in part})) if sections else "", part)
            for sections, part in parts.items()]


# instance ids -> the models they score
SCORING_GROUPS = {}
for _model, _ids in MODEL_INSTANCES.items():
    SCORING_GROUPS.setdefault(tuple(_ids), []).append(_model)

for (_group_ids, _models), (_suffix, _ids) in [
    (g, p) for g in SCORING_GROUPS.items() for p in _scoring_parts(g[0])
]:
    _cells = scoring_cells(_ids)
    _log = f"{{model}}.{_suffix}" if _suffix else "{model}"

    rule:
        name:
            group_rule("score", _group_ids, list(_group_ids) == list(INSTANCES)) + (f"_{_suffix}" if _suffix else "")
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
            contexts=context_settings,
            models_dir=MODELS_DIR,
            # finished cells survive a killed job here (Snakemake deletes an incomplete job's outputs)
            cache_dir=plan.cell_cache(RESULTS),
        wildcard_constraints:
            model=_alternatives(_models),
        log:
            # the whole job (loading, GPU binding, failures); each cell's scoring also in its own file
            main=f"{LOGS}/score/{_log}.log",
            cells=[f"{LOGS}/score/{{model}}/{cell['probe']}/{cell['condition']}.log" for cell in _cells],
        benchmark:
            f"{RESULTS}/benchmarks/score/{_log}.tsv"
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
