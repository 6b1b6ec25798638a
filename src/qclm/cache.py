"""Where qclm keeps what it downloads, prepares and asks: one cache per user, shared by every run, every clone and
every directory a command runs from, never the current directory (``qclm cache`` lists and clears it).

The cache is the user cache directory (platformdirs: ``~/.cache/qclm`` on Linux, ``~/Library/Caches/qclm`` on macOS,
``%LOCALAPPDATA%\\qclm\\Cache`` on Windows); the environment variable ``QCLM_CACHE`` overrides it (a cluster's
scratch disk). It holds one directory per :data:`AREAS`:

- ``models``: GGUF models de-quantized for transformers, one directory per model name, and the GGUF files an
  embedded model package assembles (``_gguf``). A config's ``models_dir`` or ``--models-dir`` puts them elsewhere.
- ``responses``: the server backends' answers (``engine.response_cache``), one SQLite file per model name under a
  key of everything that determines the answer (:class:`qclm.engine.remote.ResponseCache`), so a rerun, a resumed
  run and another run on the same model send no request one of them sent before.

Nothing here imports torch.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

#: the environment variable that overrides the user cache directory
ENV = "QCLM_CACHE"
#: the cache's areas -> what each holds (``qclm cache``)
AREAS = {
    "models": "prepared (de-quantized) GGUF models and assembled GGUF files",
    "responses": "the server backends' answers (engine.response_cache)",
}


def root() -> Path:
    """The cache directory: ``QCLM_CACHE`` where set (``~`` expanded), else the user cache directory."""
    override = os.environ.get(ENV, "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("qclm", appauthor=False))


def area(name: str) -> Path:
    """One area's directory (:data:`AREAS`; not created)."""
    if name not in AREAS:
        raise ValueError(f"unknown cache area {name!r}; known: {', '.join(AREAS)}")
    return root() / name


def models_dir(configured: str | Path | None = None) -> Path:
    """Where prepared models go: ``configured`` (a config's ``models_dir``, ``--models-dir``) where given, else the
    cache's ``models`` area. The one home of that default (commands, the workflow, validation)."""
    return Path(configured).expanduser() if configured else area("models")


def responses_dir(model: str) -> Path:
    """The response cache of one model (a model-table name)."""
    return area("responses") / model


@dataclass(frozen=True)
class Entry:
    """One entry of the cache: an area's direct child (a model's directory, a model's response cache)."""

    area: str
    name: str
    path: Path
    bytes: int
    files: int


def _size(path: Path) -> tuple[int, int]:
    if path.is_file():
        return path.stat().st_size, 1
    total = files = 0
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
            files += 1
    return total, files


def entries(areas: list[str] | None = None) -> list[Entry]:
    """The cache's entries, by area then name (an area not yet created has none)."""
    out = []
    for name in areas or list(AREAS):
        directory = area(name)
        if not directory.is_dir():
            continue
        for child in sorted(directory.iterdir()):
            size, files = _size(child)
            out.append(Entry(name, child.name, child, size, files))
    return out


def clear(areas: list[str] | None = None, names: list[str] | None = None) -> list[Entry]:
    """Delete the entries of these areas (every area where None), only those named where ``names`` is given; the
    entries deleted."""
    gone = [e for e in entries(areas) if names is None or e.name in names]
    for entry in gone:
        if entry.path.is_dir() and not entry.path.is_symlink():
            shutil.rmtree(entry.path)
        else:
            entry.path.unlink(missing_ok=True)
    return gone


def human(n: int) -> str:
    """A size in bytes as people read it (1.2 GB)."""
    if n < 1000:
        return f"{n} B"
    size = n / 1000
    for unit in ("kB", "MB"):
        if size < 1000:
            return f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"
