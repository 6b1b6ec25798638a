"""The numbers the README and docs print, written from result tables by a command and checked against it.

A document holds a generated part between the lines ``<!-- NAME: begin -->`` and ``<!-- NAME: end -->``
(:func:`block`, :func:`with_block`, :func:`write_blocks`). Two commands write such parts: ``qclm floors --markdown
--into`` (the calibrated floors, :mod:`qclm.analysis.floors`) and ``qclm excerpts`` (the results of the runs the
documents cite, :data:`qclm.commands.excerpts.EXCERPTS`): each excerpt is a table a run's analysis wrote, kept in
``resources/results/RUN/`` by ``qclm excerpts --gather`` (with the config and qclm version it came from), and
rendered by the same code that writes the report's first page, so the documents, the shipped tables and a rerun's
report say one thing. The tests check every document's blocks against what the command writes.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qclm.errors import InputError

#: where the shipped result tables live, one folder per run (relative to the repository root)
SHIPPED = Path("resources/results")


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def block(text: str, name: str) -> str | None:
    """What a document holds between its ``<!-- NAME: begin -->`` and ``<!-- NAME: end -->`` lines (None: no such
    block)."""
    begin, end = _markers(name)
    if begin not in text or end not in text:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n") + "\n"


def with_block(text: str, name: str, content: str) -> str:
    """A document with its block ``name`` holding ``content`` (the document unchanged where it has no such block)."""
    begin, end = _markers(name)
    if block(text, name) is None:
        return text
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{content.strip(chr(10))}\n{end}{rest.split(end, 1)[1]}"


def write_blocks(docs: list[str], blocks: dict[str, str]) -> None:
    """Write each of ``blocks`` (name -> content) into every document that holds its markers; a document that
    holds none of them is an error naming it (nothing is written then). Says each document written on stderr."""
    import sys

    texts = {doc: Path(doc).read_text(encoding="utf-8") for doc in docs}
    for doc, text in texts.items():
        if not any(block(text, name) is not None for name in blocks):
            raise InputError.one(doc, "file", f"holds no marked block ({', '.join(blocks)}) to write into")
    for doc, text in texts.items():
        for name, content in blocks.items():
            text = with_block(text, name, content)
        Path(doc).write_text(text, encoding="utf-8")
        print(f"{doc}: the blocks written", file=sys.stderr)


@dataclass(frozen=True)
class Excerpt:
    """A block the documents hold: a run's table (``run``/``table``.csv, as its analysis wrote it) rendered by
    ``render`` (a DataFrame in, Markdown out)."""

    name: str
    run: str  #: the run's folder under :data:`SHIPPED` (its config: ``config/RUN.yaml``)
    table: str
    render: Callable
    questionnaires: tuple[str, ...] = ()  #: the rows of these questionnaires alone (the README's short form)

    def path(self, root: Path = Path(".")) -> Path:
        return root / SHIPPED / self.run / f"{self.table}.csv"


def render(excerpt: Excerpt, root: Path = Path(".")) -> str:
    """The Markdown of an excerpt from its shipped table, with the line that says where it came from."""
    import pandas as pd

    path = excerpt.path(root)
    if not path.is_file():
        raise InputError.one(path, "file", f"not found: the table of excerpt {excerpt.name} (qclm excerpts --gather "
                             f"results/{excerpt.run}/analysis --run {excerpt.run})")
    source = (path.parent / "SOURCE").read_text(encoding="utf-8").strip() if (path.parent / "SOURCE").is_file() \
        else "source not recorded"
    table = pd.read_csv(path)
    if excerpt.questionnaires:
        table = table[table["questionnaire"].isin(excerpt.questionnaires)]
        rows = f" ({', '.join(excerpt.questionnaires)} alone)"
    else:
        rows = ""
    return excerpt.render(table) + f"\nFrom `{SHIPPED / excerpt.run / path.name}`{rows}: {source}.\n"


def _run_version(analysis: Path) -> str:
    """qclm's version as the run's analysis recorded it (``run_info.json``), "not recorded" without it."""
    import json

    try:
        return str(json.loads((analysis / "run_info.json").read_text(encoding="utf-8"))["versions"]["qclm"])
    except (OSError, ValueError, KeyError, TypeError):
        return "not recorded"


def gather(analysis: Path, run: str, config: Path, excerpts: dict[str, Excerpt],
           root: Path = Path(".")) -> list[Path]:
    """Copy a run's tables that ``excerpts`` read into ``resources/results/RUN/`` with a SOURCE line (the config, its
    digest, qclm's version as the run recorded it and as it keeps the tables)."""
    from qclm import version

    wanted = sorted({e.table for e in excerpts.values() if e.run == run})
    if not wanted:
        raise InputError.one("qclm excerpts", "--run", f"no excerpt reads run {run!r} (runs: "
                             f"{', '.join(sorted({e.run for e in excerpts.values()}))})")
    missing = [t for t in wanted if not (analysis / f"{t}.csv").is_file()]
    if missing:
        raise InputError.one(analysis, "folder", f"holds no {', '.join(t + '.csv' for t in missing)}")
    out = root / SHIPPED / run
    out.mkdir(parents=True, exist_ok=True)
    copied = []
    for table in wanted:
        shutil.copyfile(analysis / f"{table}.csv", out / f"{table}.csv")
        copied.append(out / f"{table}.csv")
    digest = hashlib.sha256(config.read_bytes()).hexdigest()[:16] if config.is_file() else "not found"
    (out / "SOURCE").write_text(f"written by the run of {config} (sha256 {digest}) with qclm {_run_version(analysis)}, "
                                f"kept by qclm {version()}\n", encoding="utf-8")
    return copied
