"""``python -m qclm.commands.results CONFIG [--logs]``: print the run's results directory (with ``--logs``, its logs
directory) as the workflow reads it from the config (the ``results`` and ``logs`` keys, their defaults in the
config schema). The Makefile writes the report there."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from qclm.errors import InputError
    from qclm.experiment import output_dirs
    from qclm.inputs import read_yaml

    p = argparse.ArgumentParser(prog="python -m qclm.commands.results", description=__doc__)
    p.add_argument("config", help="a workflow config")
    p.add_argument("--logs", action="store_true", help="the logs directory instead of the results directory")
    args = p.parse_args(argv)
    try:
        config = read_yaml(args.config)
    except InputError as err:
        print("\n".join(err.lines), file=sys.stderr)
        return 2
    results, logs = output_dirs(config if isinstance(config, dict) else {})
    print(logs if args.logs else results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
