"""The word tools the project's word material is built and checked with (requirements.txt), in one home: the CSI
word lists (:mod:`qclm.probes.csi.words`) and the control forms (:mod:`qclm.controls`) both read them here.

- ``wordfreq`` (Robyn Speer; its data CC BY-SA 4.0, doi:10.5281/zenodo.7199437): word frequencies;
- ``lemminflect`` (Brad Jascob; MIT): lemmas and inflections by part of speech;
- ``vaderSentiment`` (C.J. Hutto; MIT): VADER's valence ratings.

Light: each tool is imported on first use.
"""

from __future__ import annotations

#: the packages the figures come from, as their versions are printed
TOOLS = ("wordfreq", "lemminflect", "vaderSentiment")


def vader_lexicon() -> dict[str, float]:
    """VADER's mean valence rating of each word of its lexicon (the package's vader_lexicon.txt)."""
    from importlib import resources

    text = resources.files("vaderSentiment").joinpath("vader_lexicon.txt").read_text(encoding="utf-8")
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            out[parts[0]] = float(parts[1])
    return out


def versions() -> str:
    """The versions of the word tools, as the generated files' headers state them."""
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in TOOLS)
