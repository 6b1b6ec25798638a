"""Command line: ``qclm <command>``. Each command lives with the module that owns its logic."""

from __future__ import annotations

import argparse
import logging
import sys


def configure_logging(log_file: str | None = None, level: int = logging.INFO) -> None:
    """Log to a file (workflow jobs: snakemake.log[0]) or to stderr, with timestamps. With a
    file, stderr goes there too: progress bars, warnings and tracebacks land in the job's log."""
    if log_file:
        sys.stderr = open(log_file, "w", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the job
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)


def _add_analyze(sub: argparse._SubParsersAction) -> None:
    from qclm.experiment import MIN_MODELS, MIN_STIMULI, TEMPLATE_DEFAULTS

    p = sub.add_parser("analyze", help="statistics, tables and figures from an item-score table")
    p.add_argument("--scores", required=True, help="CSV or Parquet item-score table")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap iterations (default 10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size-classes", default="3,8", help="size-class boundaries in billions of parameters")
    p.add_argument("--contrasts", default=None,
                   help="contrasts FIRST:SECOND,... (differences are first minus second; default: the paper's "
                   "vanilla:stress,vanilla:neutral,neutral:stress where their conditions are present)")
    p.add_argument("--min-models", type=int, default=MIN_MODELS,
                   help=f"across-model analyses with fewer models are marked underpowered (default {MIN_MODELS})")
    p.add_argument("--min-stimuli", type=int, default=MIN_STIMULI,
                   help=f"per-model analyses with fewer stimuli per condition are marked underpowered "
                   f"(default {MIN_STIMULI})")
    p.add_argument("--templates", default=TEMPLATE_DEFAULTS["select"],
                   help="wordings the questionnaire scores use: first (the default wording), all (their mean; "
                   f"default {TEMPLATE_DEFAULTS['select']}), or a template id")
    p.add_argument("--silhouette", default=None, help="optional per-item silhouette table from scoring")
    p.add_argument("--variant-probs", default=None, help="optional variant probability table (heatmap figure)")
    p.add_argument("--heatmap-item", default=None,
                   help="item of the heatmap figure: ITEM or QUESTIONNAIRE:ITEM (default: first item)")
    p.add_argument("--instruments", default=None,
                   help="optional instrument table (questionnaire, construct, framing): expected signs of the "
                        "construct map, framing in the spectrum")
    p.add_argument("--no-figures", action="store_true")

    def run(args: argparse.Namespace) -> int:
        from qclm.analysis.cli import run_analyze

        return run_analyze(args)

    p.set_defaults(func=run)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    from qclm.validate import add_parser

    add_parser(sub)


def _add_render(sub: argparse._SubParsersAction) -> None:
    from qclm.render import add_parser

    add_parser(sub)


def _add_loglik(sub: argparse._SubParsersAction) -> None:
    from qclm.loglik import add_parser

    add_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qclm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_analyze(sub)
    _add_validate(sub)
    _add_render(sub)
    _add_loglik(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
