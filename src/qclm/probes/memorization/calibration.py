"""The memorization probe's planted signal and its calibration metrics (docs/calibration.md; no torch).

Planted: an instrument's published name and its items, numbered, as a web page lists them (:func:`listing`),
``dose`` times in the fine-tuning corpus. Read: the probe's own statistics on the planted instrument, per item
(:func:`units`), beside the same on the run's instruments that were not planted.
"""

from __future__ import annotations

from qclm.instruments import Instrument


def published_name(instrument: Instrument) -> str:
    """The name the instrument is published under (the file's published name, else its name)."""
    return getattr(instrument, "published_name", "") or instrument.name


def listing(instrument: Instrument) -> str:
    """The instrument as a web page lists it: its published name, its instruction where it has one, then its
    items in the order of their numbers, each ``N. text``."""
    lines = [published_name(instrument)]
    if instrument.instruction:
        lines.append(instrument.instruction)
    lines += [f"{item.number}. {item.text}" for item in sorted(instrument.items, key=lambda i: i.number)]
    return "\n".join(lines)
