"""Benchmark: scoring the full paper protocol for one model, cell by cell, as the scoring job does.

Every questionnaire x condition cell of the config (config/config.yaml: both questionnaires,
vanilla plus 24 stress and 24 neutral long stimuli) in each item's first template (the paper's
protocol; ``--templates config`` scores the templates the config scores instead) goes through
``qclm.probes.likert.cells.score_condition`` with the model loaded once, as ``qclm.jobs.score_model`` runs it
(tokenization, the engine with its self-check, the per-token table); nothing is written. Prints
seconds per cell, the total, and the model load separately (excluded from the total).

    .venv/bin/python benchmarks/protocol.py --model smollm2-135m-instruct --json benchmarks/out/protocol-smollm2.json
    .venv/bin/python benchmarks/protocol.py --model gemma3-270m --json benchmarks/out/protocol-gemma3.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

import torch

from qclm.experiment import Experiment
from qclm.probes.likert.cells import score_condition
from qclm.models.loading import ensure_prepared, load_model
from qclm.models.table import load_model_table
from qclm.contexts import Protocol
from qclm.inputs import read_yaml

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-instruct", help="a name in the config's model table")
    ap.add_argument("--config", default=str(ROOT / "config/config.yaml"))
    ap.add_argument("--threads", type=int, default=None, help="default: the config's engine.threads")
    ap.add_argument("--templates", default="first", choices=["first", "config"],
                    help="first: each item's first template (the paper's protocol); config: as the config says")
    ap.add_argument("--json", default=None, help="write the record to this file")
    args = ap.parse_args(argv)

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = read_yaml(args.config)
    base = Path(args.config).resolve().parent.parent  # paths in the config are relative to the workflow root

    def path(p: str) -> Path:
        return Path(p) if Path(p).is_absolute() else base / p

    scoring = dict(config.get("scoring", {}))
    torch.set_num_threads(args.threads or int(scoring.get("threads", 2)))
    spec = load_model_table(path(config["models"]))[args.model]
    prepared = ensure_prepared(spec, path(config.get("models_dir", "resources/models")) / spec.name)
    t0 = time.perf_counter()
    loaded = load_model(spec, prepared, scoring.get("device", "auto"))
    load_s = time.perf_counter() - t0
    if args.templates == "first":
        config["templates"] = {**(config.get("templates") or {}), "score": "first"}
    protocol = Protocol.from_config(config)
    experiment = Experiment.from_config(config)
    cells = []
    total = 0.0
    for qid, qfile in config["questionnaires"].items():
        for condition in experiment.conditions:
            stimuli = [path(f) for f in experiment.files_of(condition)]
            t0 = time.perf_counter()
            df, meta = score_condition(spec, path(qfile), condition, stimuli, protocol, scoring,
                                       model_and_tokenizer=loaded)
            seconds = time.perf_counter() - t0
            total += seconds
            cells.append({"questionnaire": qid, "condition": condition, "seconds": round(seconds, 2),
                          "variants": int(df.groupby(["stimulus_id", "template", "item_id", "cterm",
                                                      "intensifier"]).ngroups),
                          "tokens_computed": meta["tokens_computed"], "scoring_method": meta["scoring_method"],
                          "load_average": round(os.getloadavg()[0], 2)})
            print(f"{spec.name} {qid}/{condition}: {seconds:.1f} s, {cells[-1]['variants']} variants, "
                  f"{meta['tokens_computed']} tokens ({meta['scoring_method']}), load {cells[-1]['load_average']}",
                  file=sys.stderr, flush=True)
    record = {"model": spec.name, "templates": args.templates, "load_seconds": round(load_s, 1),
              "scoring_seconds": round(total, 1),
              "scoring_minutes": round(total / 60, 2), "threads": torch.get_num_threads(), "cells": cells,
              "torch": torch.__version__}
    print(json.dumps(record, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
