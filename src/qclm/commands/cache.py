"""``qclm cache``: what qclm's cache holds (:mod:`qclm.cache`), and clearing it.

- ``qclm cache [list] [--area AREA]``: the cache's directory, then one line per entry: area, name, size, files.
- ``qclm cache dir``: the cache's directory alone (for scripts: ``du -sh "$(qclm cache dir)"``).
- ``qclm cache clear [NAME...] [--area AREA]``: delete entries (all, an area's, or those named), saying each one.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from qclm import cache

    p = sub.add_parser("cache", help="list or clear the cache of prepared models and server answers",
                       description="qclm keeps the models it prepares (GGUF de-quantized for transformers) and the "
                       f"server backends' answers in one cache per user, shared by every run and directory: the "
                       f"user cache directory, or ${cache.ENV} where set. list (the default) prints each entry with "
                       "its size; dir prints the directory; clear deletes entries (every one, an area's, or those "
                       "named). A cleared model is prepared again, and a cleared answer asked again, when a run "
                       "needs it.",
                       usage="qclm cache [list] [--area AREA]\n"
                             "       qclm cache dir\n"
                             "       qclm cache clear [NAME...] [--area AREA]")
    p.add_argument("action", nargs="?", default="list", choices=("list", "dir", "clear"),
                   help="list (default), dir or clear")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="clear: only the entries of these names (a model's name)")
    p.add_argument("--area", choices=tuple(cache.AREAS), action="append",
                   help="only this area (repeatable): " + "; ".join(f"{k}: {v}" for k, v in cache.AREAS.items()))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from qclm import cache
    from qclm.errors import InputError

    if args.names and args.action != "clear":
        raise InputError.one("qclm cache", "arguments", f"names are for clear, not {args.action}")
    if args.action == "dir":
        print(cache.root())
        return 0
    if args.action == "clear":
        gone = cache.clear(args.area, args.names or None)
        missing = sorted(set(args.names) - {e.name for e in gone})
        for entry in gone:
            print(f"deleted {entry.area}/{entry.name} ({cache.human(entry.bytes)})")
        if not gone:
            print(f"nothing to clear in {cache.root()}")
        if missing:
            raise InputError.one("qclm cache", "names", f"no entry named {', '.join(missing)} in "
                                 f"{', '.join(args.area or cache.AREAS)}")
        return 0
    found = cache.entries(args.area)
    total = sum(e.bytes for e in found)
    print(f"{cache.root()}: {len(found)} {'entry' if len(found) == 1 else 'entries'}, {cache.human(total)}")
    for entry in found:
        print(f"  {entry.area:<10} {entry.name:<40} {cache.human(entry.bytes):>10} {entry.files:>6} files")
    return 0
