"""Command line: ``qclm <command>``. One module per command (``add_parser`` and ``run``); the logic each
command runs lives in the package (config checking, the engine, the probes, the analysis)."""

from __future__ import annotations

import argparse
import importlib
import sys

#: command name -> module of qclm.commands that defines it (imported only when its parser is built)
COMMANDS = ("analyze", "validate", "render", "loglik", "probe")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qclm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"qclm.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
