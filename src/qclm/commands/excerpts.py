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
from pathlib import Path


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
        for path in documents.gather(Path(args.gather), args.run, config):
            print(f"{path}: kept", file=sys.stderr)
        return 0
    texts = {name: documents.render(e) for name, e in documents.EXCERPTS.items()}
    if not args.into:
        sys.stdout.write("\n".join(f"<!-- {name} -->\n{text}" for name, text in texts.items()))
        return 0
    documents.write_blocks(args.into, texts)
    return 0
