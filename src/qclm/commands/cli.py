"""The command line's entry point (``qclm``, :func:`main`): the parser of every shared command and every probe
kind's own, and the one place that turns what goes wrong into one line and an exit status (the rules are
:mod:`qclm.commands`'s)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback

from qclm.registry import Registry, resolve

#: the shared commands, each a module of qclm.commands whose ``add_parser`` builds its parser (imported only then); a
#: probe kind adds its own (ProbeKind.commands: ``qclm analyze`` is the Likert kind's, ``qclm words`` the CSI kind's)
COMMANDS = Registry("command", {**{name: f"qclm.commands.{name}:add_parser" for name in (
    "validate", "status", "render", "loglik", "probe", "finetune", "floors", "excerpts", "cache")},
    "list": "qclm.commands.listing:add_parser"})  # a module named list would hide the built-in in its package
#: exit status of a run that failed for another reason than its input (bad input: 2)
INTERNAL_ERROR = 1


#: what ``qclm --help`` says (the module docstring is for developers)
DESCRIPTION = """Measure psychological constructs in causal language models from their next-token probabilities.
Each command below has its own --help. Bad input is reported as FILE: LOCATION: PROBLEM lines (exit 2); any
other failure in one line, with the full traceback written to a file for a bug report (exit 1). The workflow
itself runs with snakemake (README.md)."""


class _Version(argparse.Action):
    """``qclm --version``: qclm's version with its commit where it runs from a checkout (:func:`qclm.version`, asked
    of git only when the option is given)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print qclm's version and exit", **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        import qclm

        print(f"qclm {qclm.version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qclm", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        COMMANDS.load(name)(sub)
    for name, module in kind_commands().items():
        resolve(f"{module}:add_parser", f"command {name}:")(sub)
    return parser


def kind_commands() -> dict[str, str]:
    """The probe kinds' own commands, name -> module (:attr:`qclm.probes.base.ProbeKind.commands`), of every
    registered kind (built in, or installed under the entry point group), in the kinds' order. A kind that does
    not load adds none (its error is said where it is used); a name a shared command or an earlier kind has is
    not taken over."""
    from qclm import probes

    out: dict[str, str] = {}
    for cls in probes.loaded().values():
        for name, module in cls.commands.items():
            if name not in COMMANDS:
                out.setdefault(name, module)
    return out


def _traceback_file(command: str) -> str:
    """Write the current exception's traceback to a new file; its path (or why it could not be written)."""
    directory = os.environ.get("QCLM_TRACEBACK_DIR") or tempfile.gettempdir()
    try:
        os.makedirs(directory, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=f"qclm-{command}-{time.strftime('%Y%m%d-%H%M%S')}-",
                                    suffix=".traceback.txt", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"qclm {' '.join(sys.argv[1:])}\n\n")
            traceback.print_exc(file=f)
        return path
    except OSError as err:
        return f"(nowhere: {err})"


def main(argv: list[str] | None = None) -> int:
    from qclm.engine.remote import RemoteError, RowProblem
    from qclm.errors import InputError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except InputError as err:
        print("\n".join(err.lines), file=sys.stderr)
        return 2
    except RowProblem as err:  # a missing or rejected key, an unknown model: the user's to fix, as bad input
        print(f"qclm {args.command}: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except RemoteError as err:  # the server's, not the code's: no traceback
        print(f"qclm {args.command}: {' '.join(str(err).split())}", file=sys.stderr)
        return INTERNAL_ERROR
    except KeyboardInterrupt:
        print(f"qclm {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped reading (qclm list instruments | head): nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush goes nowhere
        return 0
    except OSError as err:  # the machine, not the input: a full disk, a file that vanished, a permission
        where = _traceback_file(args.command)
        print(f"qclm {args.command}: {' '.join(str(err).split())}; the full traceback is in {where}", file=sys.stderr)
        return INTERNAL_ERROR
    except MemoryError:
        where = _traceback_file(args.command)
        print(f"qclm {args.command}: out of memory; the full traceback is in {where}", file=sys.stderr)
        return INTERNAL_ERROR
    except Exception as err:  # noqa: BLE001 - the one place that turns a crash into one line
        where = _traceback_file(args.command)
        what = " ".join(f"{type(err).__name__}: {err}".split())
        what = what if len(what) <= 300 else what[:297] + "..."
        print(f"qclm {args.command}: internal error: {what}; the full traceback is in {where}", file=sys.stderr)
        return INTERNAL_ERROR
