"""``qclm excerpts``: the results the README and docs cite, kept as tables and written into the documents
(:mod:`qclm.analysis.documents`).

- ``qclm excerpts --gather results/RUN/analysis --run RUN [--config config/RUN.yaml]``: keep the tables the
  documents cite of a finished run in ``resources/results/RUN/`` with the config and qclm version it came from.
- ``qclm excerpts [--into DOC...]``: print every excerpt (Markdown, rendered as the report's first page renders the
  same table), or write them into the documents' marked blocks (``<!-- NAME: begin -->`` ... ``<!-- NAME: end -->``;
  a test checks that the documents hold what this writes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from qclm.analysis.documents import Excerpt


def _likert_md(lines: str) -> Callable:
    def render(df) -> str:
        from qclm.probes.likert.analysis import overview

        shown = getattr(overview, lines)(df)
        return "\n".join(shown).strip("\n") + "\n" if shown else "No rows: the run wrote an empty table.\n"
    return render


def _behaviour_md(lines: str) -> Callable:
    """The behaviour kind's (plugins/qclm-behaviour, installed by ``make env``) lines of its first-page section."""
    def render(df) -> str:
        from qclm_behaviour import validity

        return "\n".join(getattr(validity, lines)(df)) + "\n"
    return render


#: every excerpt the documents of this repository hold, by block name (here, at the top of the house: the renderers
#: are the probe kinds' own first-page functions)
EXCERPTS = {e.name: e for e in (
    Excerpt("constructs_control", "constructs", "per_model_control", _likert_md("control_table_md")),
    Excerpt("constructs_types", "constructs", "stimulus_types", _likert_md("types_table_md")),
    Excerpt("validity_readouts", "validity", "behaviour_readouts", _behaviour_md("readout_lines")),
    Excerpt("validity", "validity", "validity", _behaviour_md("validity_lines")),
    # the README's: STAI-S alone (docs/constructs.md has every row)
    Excerpt("constructs_control_stai_s", "constructs", "per_model_control", _likert_md("control_table_md"),
            ("stai_s",)),
    Excerpt("constructs_types_stai_s", "constructs", "stimulus_types", _likert_md("types_table_md"),
            ("stai_s", "stai_s_control")),
)}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("excerpts", help="keep the tables the documents cite and write them into the documents",
                       description="The numbers the README and docs print come from tables a run wrote, kept in "
                       "resources/results/RUN/ (--gather), and are written into the documents' marked blocks by "
                       "this command (--into); without --into it prints them.",
                       usage="qclm excerpts --gather ANALYSIS_DIR --run RUN [--config FILE]\n"
                             "       qclm excerpts [--into DOC...]")
    p.add_argument("--gather", metavar="ANALYSIS_DIR", help="a finished run's analysis folder to keep the tables of")
    p.add_argument("--run", help="--gather: the run's name (its folder under resources/results)")
    p.add_argument("--config", help="--gather: the run's config (default config/RUN.yaml)")
    p.add_argument("--into", nargs="+", metavar="DOC", help="write the excerpts into these documents' marked blocks")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from qclm.analysis import documents
    from qclm.errors import InputError

    if args.gather:
        if not args.run or args.into:
            raise InputError.one("qclm excerpts", "arguments", "--gather needs --run and takes no --into")
        config = Path(args.config or f"config/{args.run}.yaml")
        for path in documents.gather(Path(args.gather), args.run, config, EXCERPTS):
            print(f"{path}: kept", file=sys.stderr)
        return 0
    if not args.into:
        sys.stdout.write("\n".join(f"<!-- {name} -->\n{documents.render(e)}" for name, e in EXCERPTS.items()))
        return 0
    held = "\n".join(Path(doc).read_text(encoding="utf-8") for doc in args.into)  # render what the documents hold
    documents.write_blocks(args.into, {name: documents.render(e) for name, e in EXCERPTS.items()
                                       if documents.block(held, name) is not None} or
                           {name: "" for name in EXCERPTS})  # none held: write_blocks names the documents
    return 0
