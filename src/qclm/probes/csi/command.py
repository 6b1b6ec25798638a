"""``qclm words``: the CSI word lists (:mod:`qclm.probes.csi.words`, docs/csi.md).

    qclm words check FILE...        # every problem of a word list as FILE: LOCATION: PROBLEM (exit 2), else exit 0
    qclm words build --out resources/csi/words.tsv --control resources/csi/valence_control.tsv

``build`` makes the shipped lists from wordfreq, lemminflect and vaderSentiment (requirements.txt; the rules are
the module's docstring); ``check`` reads any list as the CSI kind reads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from qclm.argtypes import plain, positive_int

#: what ``build`` writes unless told
DEFAULT_OUT = "resources/csi/words.tsv"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("words", help="check a CSI word list, or build the shipped ones", description=plain(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = p.add_subparsers(dest="step", required=True)
    b = steps.add_parser("build", help="build the word list (and the valence control list) from wordfreq, "
                                       "lemminflect and vaderSentiment")
    b.add_argument("--size", type=positive_int, default=5000, help="number of words (default 5000, the paper's size)")
    b.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help=f"the word list (default {DEFAULT_OUT})")
    b.add_argument("--control", type=Path, default=None, help="also write the valence control list here")
    b.add_argument("--scan", type=positive_int, default=60000,
                   help="how many of wordfreq's most frequent words to scan (default 60000)")
    c = steps.add_parser("check", help="check word list files: every problem as FILE: LOCATION: PROBLEM")
    c.add_argument("files", nargs="+", help="word lists: text files (one word per line) or TSVs with a word column")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from qclm.errors import InputError
    from qclm.probes.csi.words import build, word_problems

    if args.step == "build":
        n, k = build(args.size, args.out, args.control, args.scan)
        print(f"{args.out}: {n} words" + (f"; {args.control}: {k} words" if args.control else ""))
        return 0
    problems = [p for f in args.files for p in word_problems(f)]
    if problems:
        raise InputError(problems)
    print("\n".join(f"{f}: ok" for f in args.files))
    return 0
