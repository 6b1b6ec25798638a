# The CPU stages after scoring, per probe kind of the run (qclm.jobs.stages): per-cell tables from each raw table
# (the Likert kind: variant probabilities, eq. 1 and the normalization, and item scores, eq. 2), then the kind's
# tables across models and conditions under {SCORES}/ (the Likert kind: item, questionnaire and condition scores,
# silhouettes, the instrument table). Their params are the config sections the kind reads (the Likert kind: the
# scoring math and the wordings): changing one reruns these rules of that kind and no scoring job.

for _kind in KINDS:
    _cls = probes.kind_class(_kind)
    _ids = [i.id for i in instances_of(_kind)]

    # one job per model and instance writes the per-cell tables of all its conditions (one process instead of
    # one per condition); instances with their own conditions get a rule of their own (as the scoring rules)
    _groups = {}
    for _id in _ids if _cls.cell_tables else ():
        _groups.setdefault(tuple(INSTANCE_CONDITIONS[_id]), []).append(_id)
    for _conditions, _group in _groups.items():

        rule:
            name:
                group_rule(f"cells_{_kind}", _group, list(_conditions) == list(CONDITIONS))
            conda:
                "../../environment.yml"
            input:
                [raw_table("{model}", "{probe}", c) for c in _conditions],
            output:
                [cell_table("{model}", "{probe}", c, t) for c in _conditions for t in _cls.cell_tables],
            params:
                config=_cls.stage_config(config),
                instance=lambda wildcards: INSTANCES[wildcards.probe],
                conditions=list(_conditions),
                tables=list(_cls.cell_tables),
            wildcard_constraints:
                probe=_alternatives(_group),
            log:
                f"{LOGS}/cells/{{model}}/{{probe}}.log",
            script:
                "../scripts/cell_tables.py"

    rule:
        name:
            f"collect_{_kind}"
        conda:
            "../../environment.yml"
        input:
            cells=[
                cell_table(m, i, c, t) if t != "raw" else raw_table(m, i, c)
                for m in MODELS
                for i in _ids
                if i in MODEL_INSTANCES[m]
                for c in INSTANCE_CONDITIONS[i]
                for t in ("raw",) + _cls.cell_tables
            ],
            models=config["models"],
            material=sorted({f for i in instances_of(_kind) for f in probes.probe(i).files()}),
        output:
            **{f"table_{name}": f"{SCORES}/{path}" for name, path in _cls.score_tables.items()},
        params:
            kind=_kind,
            instances=instances_of(_kind),
            cells=[
                (m, i, c)
                for m in MODELS
                for i in _ids
                if i in MODEL_INSTANCES[m]
                for c in INSTANCE_CONDITIONS[i]
            ],
            tables=("raw",) + _cls.cell_tables,
            config=_cls.stage_config(config),
        log:
            f"{LOGS}/collect_{_kind}.log",
        script:
            "../scripts/collect.py"
