"""The instruments, stimuli, word lists and corpora that ship with qclm (light).

They live in the repository's ``resources/``, and the wheel carries them as package data (``qclm/data``, a link to
``resources/`` in a clone; pyproject.toml's package-data lists the folders), so that an installed qclm finds them
outside any clone. A command line may name a shipped file by its name in the folder its option reads (``qclm probe
likert --questionnaire gad7``: :attr:`qclm.probes.base.ProbeKind.shipped`), and a kind's default that names a file
under ``resources/`` is read from the shipped copy where the working directory has none (:func:`resolve`).
"""

from __future__ import annotations

import re
from pathlib import Path

#: where the shipped files are (the package's ``data``: the repository's ``resources/`` in a clone)
DATA = Path(__file__).resolve().parent / "data"
#: the folder a default path names the shipped files by (relative to the working directory in a clone)
PREFIX = "resources/"
#: a name, not a path: what a command line may give for a shipped file
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: the suffixes a shipped file's name may leave out, in the order they are tried
SUFFIXES = (".yaml", ".tsv")


def names(folder: str) -> list[str]:
    """The shipped files of a folder, by name (without suffix), sorted."""
    here = DATA / folder
    return sorted(p.stem for p in here.iterdir() if p.suffix in SUFFIXES) if here.is_dir() else []


def resolve(value: str, folder: str | None = None) -> str:
    """The file a value names: itself where it exists; else, with ``folder``, the shipped file of that name there
    (``gad7``, ``gad7.yaml``); else, where it is a path under ``resources/`` (a kind's default), the shipped copy;
    else itself (the caller's check says it does not exist)."""
    if not isinstance(value, str) or Path(value).expanduser().exists():
        return value
    if folder and NAME.fullmatch(value):
        for candidate in (value, *(value + s for s in SUFFIXES)):
            if (DATA / folder / candidate).is_file():
                return str(DATA / folder / candidate)
    if value.startswith(PREFIX) and (DATA / value[len(PREFIX):]).is_file():
        return str(DATA / value[len(PREFIX):])
    return value
