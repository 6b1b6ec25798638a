"""``qclm list``: what this qclm can run, as lm-eval's ``--tasks list`` and inspect's listings show theirs.

- ``qclm list kinds``: every probe kind, built in or installed (entry point group ``qclm.kinds``), and its summary.
- ``qclm list instruments [--kind KIND]``: the shipped files each kind's options take by name (``qclm probe likert
  --questionnaire gad7``), with their items and titles.
- ``qclm list models [--models FILE]``: the embedded models (installed or not, prepared in the cache or not) and the
  rows of the model table (default ``config/models.tsv``, where there is one).
"""

from __future__ import annotations

import argparse
from pathlib import Path

WHAT = ("kinds", "instruments", "models")


def add_parser(sub: argparse._SubParsersAction) -> None:
    from qclm.commands.args import DEFAULT_MODELS

    p = sub.add_parser("list", help="list the probe kinds, the shipped instruments or the models",
                       description="List what this qclm can run: the probe kinds (built in and installed), the "
                       "instruments that ship with it (each kind's options take them by name), or the models (the "
                       "embedded ones and the model table's rows).",
                       usage="qclm list kinds\n"
                             "       qclm list instruments [--kind KIND]\n"
                             "       qclm list models [--models FILE]")
    p.add_argument("what", choices=WHAT, help="kinds, instruments or models")
    p.add_argument("--kind", help="instruments: only this kind's")
    p.add_argument("--models", default=None,
                   help=f"models: the model table (default {DEFAULT_MODELS}, where it exists)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from qclm.errors import InputError

    if args.kind and args.what != "instruments":
        raise InputError.one("qclm list", "--kind", f"is for instruments, not {args.what}")
    if args.models and args.what != "models":
        raise InputError.one("qclm list", "--models", f"is for models, not {args.what}")
    rows = {"kinds": _kinds, "instruments": _instruments, "models": _models}[args.what](args)
    _print(rows)
    return 0


def _print(rows: list[list[str]]) -> None:
    """Rows as aligned columns (the last one as it is), the first row a header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([c.ljust(w) for c, w in zip(row, widths)] + [row[-1]]).rstrip())


def _kinds(args: argparse.Namespace) -> list[list[str]]:
    from qclm import probes
    from qclm.probes.registry import KINDS

    rows = [["KIND", "FROM", "SUMMARY"]]
    for name, target in probes.registered().items():
        try:
            summary = probes.kind_class(name).summary
        except probes.UnknownKind as err:
            summary = f"does not load: {err}"
        rows.append([name, "built in" if name in KINDS else target.split(":")[0], summary])
    return rows


def _title(path: Path) -> tuple[str, str]:
    """A shipped file's items (or rows) and title: a YAML file's ``items`` and ``name``; a TSV file's data rows and
    its heading (its comment lines up to their first parenthesis' end)."""
    from qclm.inputs import file_lines, read_text, read_tsv, read_yaml

    if path.suffix == ".tsv":
        text = " ".join(line.lstrip("# ").strip() for line in file_lines(read_text(path, "word list"))
                        if line.startswith("#"))
        if "(" in text and ")" in text[text.index("("):]:  # the heading and its first parenthesis
            text = text[:text.index(")", text.index("(")) + 1]
        return str(len(read_tsv(path, "word list")[2])), text
    data = read_yaml(path)
    if not isinstance(data, dict):
        return "", ""
    items = data.get("items")
    return str(len(items)) if isinstance(items, list) else "", str(data.get("name", ""))


def _instruments(args: argparse.Namespace) -> list[list[str]]:
    from qclm import probes, shipped
    from qclm.commands.args import command_kind
    from qclm.commands.probe import kind_parser

    kinds = {args.kind: command_kind(args.kind)} if args.kind else probes.loaded()
    rows = [["KIND", "OPTION", "NAME", "ITEMS", "TITLE"]]
    for kind, cls in kinds.items():
        # the option of `qclm probe KIND` that sets the key: of its name, or of its singular where the option is
        # given once per file (memorization's instruments: --instrument, repeated)
        flags = {a.dest: a.option_strings[0] for a in kind_parser(cls)._actions if a.option_strings}
        for key, folder in cls.shipped.items():
            option = flags.get(key) or flags.get(key.removesuffix("s")) or "--" + key.replace("_", "-")
            for name in shipped.names(folder):
                items, title = _title(Path(shipped.resolve(name, folder)))
                rows.append([kind, option, name, items, title])
    return rows


def _models(args: argparse.Namespace) -> list[list[str]]:
    from qclm import cache
    from qclm.commands.args import DEFAULT_MODELS
    from qclm.models.table import EMBEDDED, PREPARED_MARKER, load_model_table

    rows = [["MODEL", "SOURCE", "BACKEND", "PARAMS_B", "TYPE", "STATE"]]
    for name, package in EMBEDDED.items():
        prepared = (cache.models_dir() / name / PREPARED_MARKER).exists()
        state = ("prepared in the cache" if prepared else "installed") if package.installed \
            else f"not installed: {package.install}"
        rows.append([f"embedded:{name}", f"PyPI {package.package}", "local", "", "", state])
    table = args.models or DEFAULT_MODELS
    if args.models or Path(table).is_file():  # a table given that is not there: load_model_table says so
        for spec in load_model_table(table).values():
            rows.append([spec.name, spec.source, spec.backend, f"{spec.params_b:g}" if spec.params_b else "",
                         spec.type, f"row of {table}"])
    return rows
