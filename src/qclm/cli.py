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
    p = sub.add_parser("analyze", help="statistics, tables and figures from an item-score table")
    p.add_argument("--scores", required=True, help="CSV or Parquet item-score table")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap iterations (default 10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size-classes", default="3,8", help="size-class boundaries in billions of parameters")
    p.add_argument("--silhouette", default=None, help="optional per-item silhouette table from scoring")
    p.add_argument("--variant-probs", default=None, help="optional variant probability table (heatmap figure)")
    p.add_argument("--heatmap-item", default=None,
                   help="item of the heatmap figure: ITEM or QUESTIONNAIRE:ITEM (default: first item)")
    p.add_argument("--no-figures", action="store_true")

    def run(args: argparse.Namespace) -> int:
        from qclm.analysis.cli import run_analyze

        return run_analyze(args)

    p.set_defaults(func=run)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    from qclm.validate import add_parser

    add_parser(sub)


def _add_loglik(sub: argparse._SubParsersAction) -> None:
    from qclm.loglik import add_parser

    add_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qclm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_analyze(sub)
    _add_validate(sub)
    _add_loglik(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
