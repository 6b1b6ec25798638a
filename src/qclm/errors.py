"""The one error type for bad input, and how problems are shown.

Every problem with something a user gave (a file, a config key, a table, a command-line argument) is a
``(file, location, problem)`` triple, shown as one line ``FILE: LOCATION: PROBLEM``; an :class:`InputError`
holds all the problems found at once. Nothing here imports more than the standard library.
"""

from __future__ import annotations

from pathlib import Path

Problem = tuple[str, str, str]


class InputError(ValueError):
    """One or more problems in the input a user gave: ``InputError([(file, location, problem), ...])``, or a
    single message that already says where (``InputError("results/x.csv: column score: ...")``)."""

    def __init__(self, problems: list[Problem] | str):
        if isinstance(problems, str):
            self.problems: list[Problem] = []
            self._lines = [problems]
        else:
            self.problems = list(problems)
            self._lines = format_problems(self.problems)
        super().__init__("\n".join(self._lines))

    @classmethod
    def one(cls, file: str | Path, location: str, problem: str) -> "InputError":
        return cls([(str(file), location, problem)])

    @property
    def lines(self) -> list[str]:
        return list(self._lines)


def format_problems(problems: list[Problem]) -> list[str]:
    """One line per problem (newlines inside a message would break the one-line format)."""
    return [" ".join(f"{f}: {loc}: {msg}".split("\n")) for f, loc, msg in problems]
