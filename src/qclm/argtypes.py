"""Argument types shared by the commands (qclm.commands, and the kinds' own commands): a bad value is argparse's
one-line error (exit 2) before any work; and their help text as a user reads it (:func:`plain`)."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from qclm import settings
from qclm.errors import InputError
from qclm.inputs import (
    CONDITION_MAX, CONDITION_PATTERN, SAFE_NAME_RULE, SIZES, output_problem,
    safe_name_problem,
)


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def non_negative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def sized(name: str):
    """An argparse type for a shared size of a run (qclm.inputs.SIZES: the bounds the config's keys have)."""
    low, high = SIZES[name]["minimum"], SIZES[name]["maximum"]

    def parse(text: str) -> int:
        value = _integer(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more, got {value}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
        return value

    parse.__name__ = name  # argparse names the type in its messages
    return parse


def columns(text: str) -> dict[str, str]:
    """``COLUMN=VALUE,COLUMN=VALUE`` (lm-eval's ``--model_args``): the columns, in order, each given once."""
    out: dict[str, str] = {}
    for pair in text.split(","):
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise argparse.ArgumentTypeError(f"must be COLUMN=VALUE pairs separated by commas, got {pair!r}")
        if key in out:
            raise argparse.ArgumentTypeError(f"column {key} is given twice")
        out[key] = value.strip()
    return out


def safe_name(text: str) -> str:
    """A name that becomes part of file and directory names (``qclm probe --id``): the rule of every such name in a
    config (qclm.inputs.SAFE_NAME_PATTERN: no path separator, no ``..``, no control character, bounded length)."""
    problem = safe_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def device(text: str) -> str:
    """auto, cpu, mps, cuda or cuda:N: the pattern of ``engine.device`` in the config schema (one home)."""
    pattern = settings.config_schema()["properties"][settings.ENGINE]["properties"]["device"]["pattern"]
    if not re.fullmatch(pattern, text):
        raise argparse.ArgumentTypeError(f"must be auto, cpu, mps, cuda or cuda:N, got {text!r}")
    return text


def check_output(path: str, option: str, directory: bool = False) -> None:
    """An InputError naming the option when the command could not write its output there (checked before the
    work: nothing is computed and then lost)."""
    problem = output_problem(path, directory)
    if problem:
        raise InputError.one(path, option, problem)


def threads(text: str) -> int:
    """CPU threads: 0 (torch's default) or the bounds of ``engine.threads`` in the config schema (one home)."""
    bounds = settings.config_schema()["properties"][settings.ENGINE]["properties"]["threads"]
    value = _integer(text)
    if value != 0 and not bounds["minimum"] <= value <= bounds["maximum"]:
        raise argparse.ArgumentTypeError(f"must be 0 (torch's default) or {bounds['minimum']} to {bounds['maximum']}, "
                                         f"got {value}")
    return value


def conditions(text: str) -> list[str]:
    """Conditions, comma-separated: at least one, each one a condition as the config writes it
    (qclm.inputs.CONDITION_PATTERN: vanilla, a class, classes joined by +), none twice. (Whether the experiment
    declares them is checked once the config is read.)"""
    names = [c.strip() for c in text.split(",")]
    if not any(names):
        raise argparse.ArgumentTypeError(f"must name at least one condition (comma-separated), got {text!r}")
    out: list[str] = []
    for n, name in enumerate(names):
        if not re.search(CONDITION_PATTERN, name):
            what = "an empty entry" if not name else repr(name)
            if len(name) > CONDITION_MAX:
                what = f"{name[:20]!r}... ({len(name)} characters; at most {CONDITION_MAX})"
            raise argparse.ArgumentTypeError(f"entry {n + 1} is {what}, not a condition: vanilla, a class name, or "
                                             f"class names joined by + (each {SAFE_NAME_RULE})")
        if name in out:
            raise argparse.ArgumentTypeError(f"names condition {name!r} twice")
        out.append(name)
    return out


def output_dir(text: str) -> str:
    """A directory a command fills (created if missing): not an existing file, and inside a directory this user
    can write. Checked as the arguments are read, before any model loads; nothing is created here."""
    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a directory, got an empty path")
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory: name a directory (it is created "
                                         "if missing)")
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be written: {existing} is not writable")
    return text


def plain(doc: str | None) -> str:
    """A command module's docstring as its ``--help`` shows it to a user: reST's double backquotes and roles
    (:func:`x` and the like) as plain text."""
    return re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc or "").replace("``", "")

