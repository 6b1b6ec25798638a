"""``qclm validate``: the config, the model table, every questionnaire and stimulus file it uses, checked at
once (:mod:`qclm.validation`)."""

from __future__ import annotations

import argparse
import sys

from qclm.validation import DEFAULT_CONFIG, validate_config_file
from qclm.errors import format_problems


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check the config, model table, questionnaires and stimulus files",
                       description="Check the config, the model table, every questionnaire and stimulus file "
                       "it uses. Exit 0 when all is well; else print one FILE: LOCATION: PROBLEM line per "
                       "problem and exit 2.")
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"workflow config (default {DEFAULT_CONFIG})")
    p.add_argument("--schema", default=None,
                   help="config schema (default: the one qclm ships, qclm/schemas/config.schema.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problems = validate_config_file(args.config, args.schema)
    if problems:
        print("\n".join(format_problems(problems)))
        print(f"qclm validate: {len(problems)} problem{'s' if len(problems) != 1 else ''}", file=sys.stderr)
        return 2
    print(f"{args.config}: ok")
    return 0
