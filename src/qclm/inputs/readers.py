"""One reader per format, used for every file the project reads (probe material included): UTF-8 text, YAML with
its keys given twice, hostile aliases and control characters as problems, tab-separated tables with their columns
given twice; and whether an output path can be written."""

from __future__ import annotations

import csv
import functools
import hashlib
import os
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import yaml

from qclm.errors import InputError, Problem
from qclm.inputs.messages import char_name, show


#: At most this many values (scalars, lists, mappings) that YAML aliases add to a document when expanded: a
#: few reused blocks are fine (stai_t.yaml shares its templates), a "billion laughs" file is refused
#: before anything walks its expansion.
ALIAS_EXPANSION_LIMIT = 100_000


_BOM = "\ufeff"


def read_text(path: str | Path, kind: str) -> str:
    """A user file's text; a missing file, a directory or non-UTF-8 bytes become an InputError. A UTF-8
    byte-order mark at the start (Excel, Notepad) is dropped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.one(path, "file", "does not exist") from None
    except IsADirectoryError:
        raise InputError.one(path, "file", f"is a directory, not a {kind}") from None
    except UnicodeDecodeError as err:
        raise InputError.one(path, f"byte {err.start}", f"not UTF-8 text (save the {kind} as UTF-8)") from None
    except OSError as err:
        raise InputError.one(path, "file", f"cannot be read ({err.strerror or err})") from None
    return text[1:] if text.startswith(_BOM) else text


def line_column(text: str, position: int) -> str:
    """'line L, column C' (both from 1) of a character position in a text."""
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return f"line {line}, column {column}"


# -- YAML -------------------------------------------------------------------------------------------------

class _AliasProblem(Exception):
    def __init__(self, mark, message: str):
        super().__init__(message)
        self.mark, self.message = mark, message


class _Loader(yaml.SafeLoader):
    """PyYAML's SafeLoader that records every key given twice in one mapping (YAML says keys are unique;
    PyYAML keeps the last value) and every alias it composes. Merge keys (``<<: *base``) may be overridden
    by the mapping's own keys, as YAML intends."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[Any, Any, Any]] = []  # (key, first mark, repeated mark)
        self.first_alias = None

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent) and self.first_alias is None:
            self.first_alias = self.peek_event().start_mark
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # unhashable: the constructor reports it
                if first is not key_node:
                    self.duplicates.append((key, first.start_mark, key_node.start_mark))
        return super().construct_mapping(node, deep=deep)


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_aliases(root, first_alias) -> None:
    """Refuse a document whose aliases expand it by more than ALIAS_EXPANSION_LIMIT values, or refer to a
    node that contains them (a recursive structure): linear in the document's own nodes (sizes memoized)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _AliasProblem(node.start_mark, "an alias refers to a node that contains it (a recursive "
                                "structure): write the values out")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    added = sizes[id(root)] - len(sizes)
    if added > ALIAS_EXPANSION_LIMIT:
        raise _AliasProblem(first_alias, f"aliases (*name) expand this file by {added:,} values, more than the "
                            f"{ALIAS_EXPANSION_LIMIT:,} allowed: write the values out or reuse less")


def _yaml_problem(err: yaml.YAMLError, text: str) -> tuple[str, str]:
    """(location, problem) of a YAML error."""
    if isinstance(err, yaml.reader.ReaderError):
        ch = chr(err.character) if isinstance(err.character, int) else str(err.character)
        kind = " (a control character)" if unicodedata.category(ch) == "Cc" else ""
        return line_column(text, err.position), f"{char_name(ch)} is not allowed in YAML text{kind}: remove it"
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
    problem = getattr(err, "problem", None) or str(err)
    context = getattr(err, "context", None)
    if context:
        problem = f"{problem} ({context})"
    return where, f"YAML syntax error: {problem}"


def parse_yaml(text: str, file: str | Path) -> Any:
    """The document in a YAML text, with the rules of :func:`read_yaml`; problems name ``file``."""
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        if loader.first_alias is not None:
            _check_aliases(node, loader.first_alias)
        data = loader.construct_document(node)
    except yaml.YAMLError as err:
        raise InputError.one(file, *_yaml_problem(err, text)) from None
    except _AliasProblem as err:
        where = f"line {err.mark.line + 1}, column {err.mark.column + 1}" if err.mark else "YAML"
        raise InputError.one(file, where, err.message) from None
    except RecursionError:
        raise InputError.one(file, "YAML", "nested too deeply to read (lists or mappings inside each other "
                             "hundreds of levels deep)") from None
    finally:
        if loader is not None:
            loader.dispose()
    if loader.duplicates:
        raise InputError([(str(file), f"line {again.line + 1}, column {again.column + 1}",
                           f"key {show(key)} is given twice in one mapping (first on line {first.line + 1}); "
                           "YAML keeps only the last value: give it once")
                          for key, first, again in sorted(loader.duplicates, key=lambda d: d[2].index)])
    return data


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file a user gave (configs, questionnaires, stimuli, probe material, schemas): syntax
    errors and control characters with line and column, keys given twice, hostile aliases and nesting too
    deep for the parser are InputErrors."""
    path = Path(path)
    return parse_yaml(read_text(path, "YAML file"), path)


def file_lines(text: str) -> list[str]:
    """A user file's lines: they end at "\\n" only (a "\\r" before it is dropped). str.splitlines also breaks at
    NEL, form feed, vertical tab and the file/group/record separators, which would turn a control character inside
    a line into two lines instead of a problem."""
    return [line.removesuffix("\r") for line in text.split("\n")]


# -- tab-separated tables ------------------------------------------------------------------------------------

def read_tsv(path: str | Path, kind: str = "tab-separated table") -> tuple[int, list[str], list[tuple[int, dict]]]:
    """A tab-separated table: (header line number, column names, [(line number, row)]). Blank lines and lines
    starting with '#' are skipped; a row is ``{column: value}`` as :class:`csv.DictReader` gives it (values
    beyond the header under ``None``, missing values ``None``). A column named twice in the header is an
    InputError (a reader would keep one of the two silently)."""
    path = Path(path)
    lines = file_lines(read_text(path, kind))
    numbered = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]
    if not numbered:
        raise InputError.one(path, "file", "no header and no rows")
    header_line, header = numbered[0]
    columns = next(csv.reader([header], delimiter="\t"))
    problems = duplicate_column_problems(columns, path, f"line {header_line} (header)")
    if problems:
        raise InputError(problems)
    rows = []
    for line, text in numbered[1:]:
        values = next(csv.reader([text], delimiter="\t"), [])
        row: dict = dict(zip(columns, values))
        for col in columns[len(values):]:
            row[col] = None
        if len(values) > len(columns):
            row[None] = values[len(columns):]
        rows.append((line, row))
    return header_line, columns, rows


def duplicate_column_problems(columns: list[str], file: str | Path, where: str) -> list[Problem]:
    """One problem per column name given twice in a table's header."""
    first: dict[str, int] = {}
    problems = []
    for n, name in enumerate(columns):
        if name in first:
            problems.append((str(file), where, f"column {name!r} is given twice (columns {first[name] + 1} and "
                             f"{n + 1}); a reader would keep only one: rename or remove one"))
        else:
            first[name] = n
    return problems


# -- output paths ------------------------------------------------------------------------------------------

def output_problem(path: str | Path, directory: bool = False) -> str | None:
    """Why a command could not write its output at ``path`` (a file, or with ``directory`` a directory it
    fills), or None; checked before the work, so that nothing is computed and then lost. Creates the missing
    parent directories (the command would create them anyway) and writes and removes a probe file there."""
    path = Path(path)
    if directory:
        if path.exists() and not path.is_dir():
            return "exists and is not a directory: name a directory (it is created if missing)"
        target = path
    else:
        if path.is_dir():
            return "is a directory: name the output file"
        target = path.parent
    try:
        target.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=target, prefix=".qclm-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return f"cannot be written ({err.strerror or err})"
    return None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)


class Remembering(Protocol[_T_co]):
    """What by_file makes of a loader: the loader, and cache_clear, which forgets every file (as lru_cache's)."""

    cache_clear: Callable[[], None]

    def __call__(self, path: str | Path) -> _T_co: ...


def by_file(loader: Callable[[str | Path], _T]) -> Remembering[_T]:
    """A loader of one user file, remembered by the file as given and its bytes (their SHA-256: a modification time
    can stay the same over two quick writes of the same size): a file read again unchanged is not parsed and checked
    again (validating the calibration config loaded each instrument once per plant, run and exposure: 6 s of its
    6.3), a file changed since is. Problems are raised on every call (an exception is not remembered), and a file
    that cannot be read goes to the loader, which says what is wrong with it. For loaders whose results are frozen
    (dataclasses of tuples)."""
    remembered = functools.lru_cache(maxsize=256)(lambda path, content: loader(path))

    @functools.wraps(loader)
    def load(path: str | Path) -> _T:
        try:
            content = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except (OSError, TypeError, ValueError):
            return loader(path)
        return remembered(path, content)

    remembering = cast("Remembering[_T]", load)  # a function; its cache_clear is given on the next line
    remembering.cache_clear = remembered.cache_clear
    return remembering
