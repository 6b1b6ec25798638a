"""``qclm probe KIND``: run one probe kind on one model from the command line, writing the same tables the workflow
writes (raw cells under DIR/logprobs/, per-cell and collected tables under DIR/scores/, the kind's analysis under
DIR/analysis/), a page of that analysis, DIR/report.html: every table and figure under its caption, and beside it
DIR/results.json: the command, settings, versions, tables and headline numbers in one file.

    qclm probe KIND --model MODEL --out DIR [--config CONFIG] [--conditions vanilla,stress] [--id ID]
                    [--device auto] [--limit N] [--seed N] [--batch-size N] [--model-args COLUMN=VALUE,...]
                    [--system-prompt TEXT] [kind-specific options: qclm probe KIND --help]

MODEL is a model-table name (``--models``, default config/models.tsv), ``embedded:NAME``, a .gguf file, a local
checkpoint directory or a hub id, as for ``qclm loglik``; ``--model-args`` gives its row's other columns
(``revision=...,dtype=bfloat16``) without writing a table, checked as a table's. With ``--config``, the
experiment (stimuli, conditions, prompt-format and engine settings, limits) and, if the config has an instance with
this id, its settings come from the config; the options given here override them. Without it, the probe runs
under vanilla with the defaults. KIND is a built-in kind, one an installed package registers (``qclm probe
--help`` lists them), or an importable module that defines ``KIND``.

The instance id (``--id``) names the tables' instrument (``probe``, ``questionnaire``) and DIR's subdirectories;
without it, it is the name of the material file given (``--instrument my_scale.yaml``: ``my_scale``), else the
kind's name. A kind that takes several files in one run (``qclm probe likert --questionnaire stai_s.yaml
--questionnaire stai_t.yaml``, ``qclm probe survey --instrument A --instrument B``) runs one instance per file, each
named by its file, on the one loaded model.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from qclm import cache, probes, settings
from qclm.argtypes import (
    conditions as conditions_arg, device, non_negative_int, output_dir, plain, positive_int, sized, threads,
)
from qclm.commands.args import (
    COMMAND_LINE, add_instance_arguments, add_model_arguments, command_kind, kind_config, kind_instances, kind_model,
    usable_device,
)
from qclm.errors import InputError
from qclm.logs import configure_logging
from qclm.models.table import DTYPES

#: the usage line of ``qclm probe --help`` (its parser takes the kind's options as they come: kind_parser's)
USAGE = "usage: qclm probe [-h] KIND --model MODEL --out DIR [options of qclm probe KIND --help]"
#: the page of the run's analysis, in DIR
PAGE = "report.html"

log = logging.getLogger("qclm.probe")

def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="run one probe kind on one model (the workflow's tables for that model)",
                       description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    p.add_argument("-h", "--help", action="store_true", dest="show_help", help="the kinds, each in one line")
    p.add_argument("kind", nargs="?", help="a probe kind (the built-in ones, those installed packages register; "
                   "--help lists them) or an importable module defining KIND")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="--model, --out and the kind's options")
    p.set_defaults(func=run)


def kind_parser(cls) -> argparse.ArgumentParser:
    """The options of ``qclm probe KIND``: the model's and the instance's (shared with ``qclm render KIND``:
    commands/args.py) around the run's own."""
    p = argparse.ArgumentParser(prog=f"qclm probe {cls.name}", description=f"{cls.summary}. " + plain(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    p.add_argument("--out", required=True, type=output_dir, help="output directory (the workflow's results layout)")
    p.add_argument("--conditions", default=None, type=conditions_arg,
                   help="conditions, comma-separated (default: the config's, else vanilla)")
    p.add_argument("--dtype", default=None, choices=DTYPES, help="default: the model table's, else auto")
    p.add_argument("--device", default=None, type=device,
                   help="auto, cpu, cuda, cuda:N (default: the config's engine.device)")
    p.add_argument("--threads", type=threads, default=0, help="CPU threads (default 0: torch's default)")
    p.add_argument("--limit", type=positive_int, default=None, metavar="N",
                   help="score only the first N items of each instrument (a quick look; default: the config's "
                   "limit_items, else all)")
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="the run's seed, every sampled request's derives from it (default: the config's engine.seed)")
    p.add_argument("--batch-size", type=sized("batch"), default=None,
                   help="sequences per forward pass of the full-sequence scorer (default: the config's "
                   "engine.batch_size)")
    add_instance_arguments(p, cls)
    return p


def probe_run(kind_name: str, argv: list[str]) -> int:
    from qclm.contexts import ContextSettings
    from qclm.experiment import Experiment
    from qclm.jobs.backends import load
    from qclm.models.loading import ensure_prepared

    if kind_name in ("-h", "--help"):
        kinds = [f"  {name}: {probes.kind_class(name).summary}" for name in probes.registered()]
        print(f"{USAGE}\n\n{plain(__doc__)}\nkinds:\n" + "\n".join(kinds))
        return 0
    cls = command_kind(kind_name)
    args = kind_parser(cls).parse_args(argv)
    config = kind_config(args.config)
    experiment = Experiment.from_config(config)
    conditions = args.conditions or list(experiment.conditions)
    unknown = [c for c in conditions if c not in experiment.conditions]
    problems = [(args.config or COMMAND_LINE, "--conditions", f"condition(s) {', '.join(unknown)} not in the "
                 f"experiment ({', '.join(experiment.conditions)})")] if unknown else []
    if args.limit is not None and not cls.honours_limit_items:
        problems.append((COMMAND_LINE, "--limit", f"the {kind_name} kind scores whole instruments (kinds that take "
                         f"--limit: {', '.join(n for n, k in probes.loaded().items() if k.honours_limit_items)})"))
    try:
        instances = kind_instances(cls, kind_name, args, config)
    except InputError as err:  # every problem at once: the instance's, then the conditions'
        raise InputError(err.problems + problems) from None
    if problems:
        raise InputError(problems)
    engine = settings.section(config, settings.ENGINE)
    if args.device:
        engine["device"] = args.device
    for key, value in (("seed", args.seed), ("batch_size", args.batch_size)):
        if value is not None:
            engine[key] = value
    if args.limit is not None:
        config = {**config, "limit_items": args.limit}
    run_settings = ContextSettings.from_config(config)
    out = Path(args.out)

    spec = kind_model(cls, args, instances, args.dtype)
    clash = _id_clashes(out, spec.name, kind_name, instances)
    if clash:
        raise InputError(clash)
    usable_device(engine["device"])  # a device this torch cannot use: said before the model loads
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    loaded = load(spec, ensure_prepared(spec, cache.models_dir(args.models_dir) / spec.name), engine,
                  cache.responses_dir(spec.name))
    log.info("model %s loaded in %.1f s (%s, %s)", spec.name, time.perf_counter() - t0,
             loaded.provenance.get("dtype"), loaded.provenance.get("device", loaded.provenance.get("backend")))
    try:
        return _score_and_analyze(cls, instances, kind_name, config, conditions, experiment, run_settings, engine, spec,
                                  loaded, out, ["qclm", "probe", kind_name, *argv])
    finally:  # a vLLM server this command started stops with it
        loaded.close()


def _id_clashes(out: Path, model: str, kind_name: str, instances) -> list:
    """Instances whose cells in ``out`` would overwrite another kind's of the same id (a survey and an entailment
    instance both named by their file gad7.yaml): refused before the model loads, naming --id."""
    from qclm.parquet import read_metadata
    from qclm.plan import raw_table

    problems = []
    for instance in instances:
        folder = Path(raw_table(out, model, instance.id, "any")).parent  # the instance's cells, every condition
        for cell in sorted(folder.glob("*.parquet")):
            other = read_metadata(cell).get("kind")
            if other and other != kind_name:
                problems.append((COMMAND_LINE, "--id", f"{cell.parent} holds the cells of a {other} instance named "
                                 f"{instance.id}, which this {kind_name} instance would overwrite: give it another "
                                 "--id, or another --out"))
                break
    return problems


def _score_and_analyze(cls, instances, kind_name, config, conditions, experiment, run_settings, engine, spec, loaded,
                       out, command: list[str]) -> int:
    from qclm.analysis import floors, results
    from qclm.analysis.page import write_page
    from qclm.jobs import stages
    from qclm.jobs.score_model import CellSpec, score_cell
    from qclm.parquet import write_parquet
    from qclm.plan import cell_table, raw_table

    cells: dict[tuple[str, str, str], dict[str, Path]] = {}
    stage_config = cls.stage_config(config)
    for instance in instances:
        ident, obj = instance.id, cls(instance)
        for condition in conditions:
            cell = CellSpec(ident, kind_name, condition, cls.scoring_settings(instance.settings),
                            tuple(obj.files()), tuple(experiment.files_of(condition)), cls.version,
                            cls.scoring_config(config))
            df, meta = score_cell(loaded, cell, run_settings)
            raw = Path(raw_table(out, spec.name, ident, condition))
            write_parquet(df, raw, meta)
            files = {"raw": raw}
            if cls.cell_tables:
                paths = {t: Path(cell_table(out, spec.name, ident, condition, t)) for t in cls.cell_tables}
                stages.cell_tables(instance, raw, stage_config, {t: str(p) for t, p in paths.items()})
                files.update(paths)
            cells[(spec.name, ident, condition)] = files
    models = stages.model_info({spec.name: spec}, [f["raw"] for f in cells.values()])
    score_files = {name: out / "scores" / path for name, path in cls.score_tables.items()}
    analysis_config = {**config, **stage_config}
    stages.collect(kind_name, instances, cells, models, analysis_config, {k: str(v) for k, v in score_files.items()})
    (out / "analysis").mkdir(parents=True, exist_ok=True)
    written = cls.analyze(score_files, out / "analysis", analysis_config, instances)
    shipped_floors = floors.path(analysis_config)  # what a null on this model can be set against
    page = write_page(cls.analysis_outputs(), out / "analysis", out / PAGE,
                      f"qclm probe {kind_name} on {spec.name}",
                      f"Instances {', '.join(i.id for i in instances)}; conditions {', '.join(conditions)}; the "
                      f"tables' data in {out / 'scores'}, their CSV beside each table.",
                      settings.section(analysis_config, "analysis"),
                      floors.section(floors.read(shipped_floors), kind_name, [spec.name], shipped_floors)
                      if shipped_floors else ())
    summary = results.write(out / results.FILE, {
        "command": command, "kind": kind_name, "model": spec.as_row(), "provenance": loaded.provenance,
        "instances": [{"id": i.id, "settings": i.settings} for i in instances], "conditions": conditions,
        "limit_items": run_settings.limit_items, "limit_stimuli": run_settings.limit_stimuli,
        "engine": engine, "report": str(page), "tables": {name: str(p) for name, p in score_files.items()},
        "analysis": [str(p) for p in written]}, score_files.get(cls.intervention_items() or ""))
    log.info("%s on %s: %d condition(s) scored; tables in %s%s; the page: %s; the results: %s",
             ", ".join(i.id for i in instances), spec.name, len(conditions), out / "scores",
             f"; analysis: {', '.join(str(p) for p in written)}" if written else "", page, summary)
    return 0


def run(args: argparse.Namespace) -> int:
    configure_logging()
    if args.kind is None:  # `qclm probe --help`, or no kind: the kinds and their summaries
        probe_run("--help", [])
        return 0 if args.show_help else 2
    try:
        return probe_run(args.kind, list(args.rest))
    except InputError as err:
        print("\n".join(err.lines), file=sys.stderr)
        return 2
    except ValueError as err:  # a model that cannot be resolved, a boundary error, a chat format without template
        print(f"qclm probe: {err}", file=sys.stderr)
        return 2

