"""Argument types shared by the commands: a bad value is argparse's one-line error (exit 2) before any work."""

from __future__ import annotations

import argparse
import re

from qclm import settings
from qclm.errors import InputError
from qclm.inputs import output_problem


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
