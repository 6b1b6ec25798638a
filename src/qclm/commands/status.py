"""``qclm status``: how far a run of the workflow has got, from its config and what lies under its results directory
(the cells the workflow makes, :mod:`qclm.plan`; each cell's table and the scoring jobs' cell cache, read by the key
the scoring job writes, :func:`qclm.jobs.score_model.cell_key`). Light: no model loads, no torch."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from qclm.validation import DEFAULT_CONFIG

#: a cell's state, in the order the table gives them
STATES = ("done", "cached", "stale", "left")
WHAT = {
    "done": "its table is written for the current settings",
    "cached": "scored before for the current settings and kept in the cell cache (a killed job's): the next run "
              "places it without scoring",
    "stale": "its table was written under other settings (a model row, a probe setting, a file or the engine "
             "changed): the next run scores it again",
    "left": "not scored yet",
}


@dataclass
class ModelStatus:
    model: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    #: for a fine-tuned checkpoint: whether its fine-tuning has run (None: a model of the table)
    finetuned: bool | None = None


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="how far a workflow run has got: cells done and left per model",
                       description="How far a run of the workflow has got: for each model the config scores (the "
                       "model table's and every fine-tuned checkpoint's), its cells (probe instance x condition) "
                       "done, kept in the cell cache, stale (written under other settings) and left, and whether a "
                       "checkpoint's fine-tuning has run. Reads the config and its results directory; loads no "
                       "model.")
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"workflow config (default {DEFAULT_CONFIG})")
    p.set_defaults(func=run)


def _key(path: Path) -> str | None:
    from qclm.parquet import read_metadata

    return read_metadata(path).get("cell_key") if path.is_file() else None


def statuses(config: dict, config_name: str) -> list[ModelStatus]:
    """Every model's cells by state (:data:`STATES`), in the order the workflow lists the models (those no probe
    instance scores left out). A checkpoint's cells are read against the checkpoint on disk: where its corpus or
    training settings changed, the workflow fine-tunes it again and they are scored again, which ``snakemake -n``
    shows and this does not."""
    from qclm import plan, settings
    from qclm.contexts import ContextSettings
    from qclm.jobs.score_model import CellSpec, cell_key

    run = plan.Plan.from_config(config, config_name)
    contexts = ContextSettings.from_config(plan.context_settings(config))
    engine = settings.engine_numbers(config)
    out = []
    for name, spec in run.models.items():
        if not run.model_instances[name]:
            continue  # a row no probe instance scores (their `models`)
        status = ModelStatus(name, finetuned=Path(run.derived[name].marker).is_file() if name in run.derived else None)
        for cell in run.cells(run.model_instances[name]):
            key = cell_key(spec, CellSpec(**cell), contexts, engine)
            table = _key(Path(plan.raw_table(run.results, name, cell["probe"], cell["condition"])))
            kept = _key(Path(plan.cell_file(plan.cell_cache(run.results), name, cell["probe"], cell["condition"])))
            state = ("done" if table == key else "cached" if kept == key else "stale" if table else "left")
            status.counts[state] += 1
        out.append(status)
    return out


def render(found: list[ModelStatus], results: str) -> str:
    """The table of :func:`statuses` and a line of totals."""
    width = max([len("model"), *(len(s.model) for s in found)])
    lines = [f"{'model':<{width}}  {'cells':>5}  " + "  ".join(f"{s:>6}" for s in STATES) + "  fine-tuned"]
    for s in found:
        tuned = "" if s.finetuned is None else "yes" if s.finetuned else "not yet"
        lines.append(f"{s.model:<{width}}  {sum(s.counts.values()):>5}  "
                     + "  ".join(f"{s.counts[k]:>6}" for k in STATES) + f"  {tuned}")
    total = {k: sum(s.counts[k] for s in found) for k in STATES}
    cells = sum(total.values())
    checkpoints = [s for s in found if s.finetuned is not None]
    lines.append(f"{results}: {cells} cells of {len(found)} models: "
                 + ", ".join(f"{total[k]} {k}" for k in STATES)
                 + (f"; {sum(1 for s in checkpoints if s.finetuned)} of {len(checkpoints)} checkpoints fine-tuned"
                    if checkpoints else ""))
    lines += [f"  {k}: {WHAT[k]}" for k in STATES if total[k]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from qclm.commands.args import kind_config
    from qclm.experiment import output_dirs

    config = kind_config(args.config)
    print(render(statuses(config, args.config), output_dirs(config)[0]))
    return 0
