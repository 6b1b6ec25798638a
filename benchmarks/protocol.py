"""Benchmark: scoring the full paper protocol for one model, cell by cell, as the scoring job does.

Every probe instance x condition cell of the config (config/config.yaml: both questionnaires,
vanilla plus 24 stress and 24 neutral long stimuli) in each item's first template (the paper's
protocol; ``--templates config`` scores the templates the config scores instead) goes through
``qclm.jobs.score_model.score_cell`` with the model loaded once, as the scoring job runs it
(tokenization, the engine with its self-check, the per-token table); nothing is written. Prints
seconds per cell, the total, and the model load separately (excluded from the total).

    .venv/bin/python benchmarks/protocol.py --model smollm2-135m-instruct --json benchmarks/out/protocol-smollm2.json
    .venv/bin/python benchmarks/protocol.py --model gemma3-270m --json benchmarks/out/protocol-gemma3.json
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import torch

from qclm import bench
from qclm import cache, probes, settings
from qclm.contexts import ContextSettings
from qclm.experiment import Experiment
from qclm.inputs import read_yaml
from qclm.jobs.backends import load
from qclm.jobs.score_model import CellSpec, score_cell
from qclm.models.loading import ensure_prepared
from qclm.models.table import load_model_table

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--model", default="smollm2-135m-instruct", help="a name in the config's model table")
    ap.add_argument("--config", default=str(ROOT / "config/config.yaml"))
    ap.add_argument("--threads", type=int, default=None, help="default: the config's engine.threads")
    ap.add_argument("--templates", default="first", choices=["first", "config"],
                    help="first: each item's first template (the paper's protocol); config: as the config says")
    args = ap.parse_args(argv)

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config, _ = settings.migrate(read_yaml(args.config))
    base = Path(args.config).resolve().parent.parent  # paths in the config are relative to the workflow root

    def path(p: str) -> Path:
        return Path(p) if Path(p).is_absolute() else base / p

    engine = settings.section(config, settings.ENGINE)
    torch.set_num_threads(args.threads or int(engine["threads"]))
    spec = load_model_table(path(config["models"]))[args.model]
    configured = config.get("models_dir")
    prepared = ensure_prepared(spec, cache.models_dir(path(configured) if configured else None) / spec.name)
    t0 = time.perf_counter()
    loaded = load(spec, prepared, engine)
    load_s = time.perf_counter() - t0
    if args.templates == "first":
        config["templates"] = {**(config.get("templates") or {}), "score": "first"}
    protocol = ContextSettings.from_config(config)
    experiment = Experiment.from_config(config)
    cells = []
    total = 0.0
    for instance in probes.instances(config, args.config):
        cls = probes.kind_class(instance.kind)
        settings_ = {k: str(path(v)) if k in cls.file_keys and isinstance(v, str) else v
                     for k, v in instance.settings.items()}
        for condition in probes.instance_conditions(instance, list(experiment.conditions)):
            stimuli = tuple(str(path(f)) for f in experiment.files_of(condition))
            files = tuple(str(path(f)) for f in cls(instance).files())
            cell = CellSpec(instance.id, instance.kind, condition, cls.scoring_settings(settings_), files, stimuli,
                            cls.version, cls.scoring_config(config))
            t0 = time.perf_counter()
            df, meta = score_cell(loaded, cell, protocol)
            seconds = time.perf_counter() - t0
            total += seconds
            cells.append({"probe": instance.id, "condition": condition, "seconds": round(seconds, 2),
                          "rows": len(df), "tokens_computed": meta["tokens_computed"],
                          "scoring_method": meta["scoring_method"], "load_average": round(os.getloadavg()[0], 2)})
            print(f"{spec.name} {instance.id}/{condition}: {seconds:.1f} s, {len(df)} rows, "
                  f"{meta['tokens_computed']} tokens ({meta['scoring_method']}), load {cells[-1]['load_average']}",
                  file=sys.stderr, flush=True)
    record = {"model": spec.name, "templates": args.templates, "load_seconds": round(load_s, 1),
              "scoring_seconds": round(total, 1),
              "scoring_minutes": round(total / 60, 2), "threads": torch.get_num_threads(), "cells": cells,
              "torch": torch.__version__}
    print(json.dumps(record, indent=2))
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
