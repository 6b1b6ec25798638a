"""Argument types shared by the commands: a bad value is argparse's one-line error (exit 2) before any work."""

from __future__ import annotations

import argparse
import re

from qclm import settings
from qclm.errors import InputError
from qclm.inputs import SIZES, output_problem, safe_name_problem


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
