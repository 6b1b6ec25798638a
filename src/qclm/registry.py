"""The one registry type: a name -> reference table, each reference "module:NAME" imported on first use (the
probe kinds, the backends, the commands and the kinds' calibration materials and units are all registered this
way), optionally extended by an installed package's entry points. Light (the standard library only): the workflow
reads registries while it builds its DAG, and nothing is imported before it is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any


class RegistryError(ValueError):
    """A reference that does not load: its module cannot be imported (or fails as it is imported), or has no
    such name. The message names what was looked up and why, in one line."""


class NotImportable(RegistryError):
    """A reference whose module is not there to import (``reason``: the import's own message)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class NoSuchName(RegistryError):
    """A reference whose module imports but defines no such name."""


def split(ref: str) -> tuple[str, str]:
    """("module", "NAME") of a reference "module:NAME"; a ValueError for anything else."""
    module, sep, attr = str(ref).partition(":")
    if not (sep and module and attr):
        raise ValueError(f"a reference is module:NAME, got {ref!r}")
    return module, attr


def resolve(ref: str, what: str = "") -> Any:
    """The object a reference "module:NAME" names, imported now; whatever goes wrong (no such module, an error
    while importing it, no such name) is a :class:`RegistryError` in one line that starts with ``what`` (e.g.
    "probe kind csi: materials:") and names the module, never the import's own exception."""
    label = f"{what} " if what else ""
    try:
        module, attr = split(ref)
    except ValueError as err:
        raise RegistryError(f"{label}{err}") from None
    try:
        found = importlib.import_module(module)
    except SyntaxError as err:
        where = f"{err.filename or module}, line {err.lineno}" if err.lineno else (err.filename or module)
        raise RegistryError(f"{label}module {module} has a syntax error ({where}: {err.msg})") from None
    except ImportError as err:
        raise NotImportable(f"{label}module {module} is not importable ({err})", str(err)) from None
    except Exception as err:  # noqa: BLE001 - a module of a plug-in that fails as it is imported is its author's
        raise RegistryError(f"{label}module {module} cannot be imported: {_one_line(err)}") from None
    if not hasattr(found, attr):
        raise NoSuchName(f"{label}module {module} has no {attr}")
    return getattr(found, attr)


def _one_line(err: BaseException) -> str:
    what = " ".join(f"{type(err).__name__}: {err}".split())
    return what if len(what) <= 200 else what[:197] + "..."


class Registry(Mapping[str, str]):
    """Names and their references ("module:NAME"), in order: the built-in ones, then, where ``group`` is given,
    those installed packages register under that entry point group (read once; a built-in name is never taken
    over). A mapping of name -> reference; :meth:`load` imports one, once."""

    def __init__(self, what: str, builtin: Mapping[str, str], group: str | None = None):
        self.what = what
        self.group = group
        self._builtin = dict(builtin)
        self._all: dict[str, str] | None = None if group else dict(builtin)
        self._loaded: dict[str, Any] = {}

    def _entries(self) -> dict[str, str]:
        if self._all is None:
            from importlib.metadata import entry_points

            found = dict(self._builtin)
            for ep in sorted(entry_points(group=self.group or ""), key=lambda ep: ep.name):
                found.setdefault(ep.name, ep.value)
            self._all = found
        return self._all

    def __getitem__(self, name: str) -> str:
        return self._entries()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())

    @property
    def builtin(self) -> dict[str, str]:
        """The names the package itself registers (no entry point consulted)."""
        return dict(self._builtin)

    def load(self, name: str) -> Any:
        """The object ``name`` refers to, imported on first use (:func:`resolve`); a name that is not registered is
        a KeyError naming the registered ones."""
        if name not in self._loaded:
            if name not in self:
                raise KeyError(f"unknown {self.what} {name!r}: one of {', '.join(self)}")
            self._loaded[name] = resolve(self[name], f"{self.what} {name}:")
        return self._loaded[name]
