"""Word-order neighbours of an item text: the exposure task's reference of the same text kind (docs/memorization.md).

Contamination detection compares a text's likelihood with that of its neighbours, texts of the same kind that differ
from it only a little (Mattern et al. 2023, "Membership inference attacks against language models via neighbourhood
comparison"): a model that has seen the text prefers it over its neighbours by more than it prefers an unseen text
over its neighbours. The neighbours here are made by a rule that needs no lexicon: each swaps one pair of adjacent
words, at a position drawn from a seed derived from the text, so the same text always gets the same neighbours
(whatever the run, model or instrument file). The sentence keeps its capital initial and its final punctuation where
they were. A text of one word has no neighbour.

No lexicon: a synonym substitution would need a word list, and no well-kept PyPI package ships one offline (NLTK and
``wn`` download WordNet at run time), so none is used.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

#: neighbours per item (the config's ``perturbations``; the schema's default)
PERTURBATIONS = 5
#: the exposure task's word-order neighbours of an item: raw rows of their own, under this task name (the analysis
#: and the calibration pair them with the item)
NEIGHBOUR = "exposure_neighbour"
#: the sentence's final punctuation, kept at the end
_FINAL = re.compile(r"[.!?;:]+[\"')\]]*$")
#: words that keep their capital wherever they stand (the pronoun I and its contractions)
_ALWAYS_CAPITAL = re.compile(r"^I(?:'[a-z]+)?$")


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(("qclm-memorization-neighbours\x1f" + text).encode("utf-8")).digest()[:8],
                          "big")


def _recase(word: str, first: bool) -> str:
    if _ALWAYS_CAPITAL.match(word) or not word[:1].isalpha():
        return word
    return word[:1].upper() + word[1:] if first else word[:1].lower() + word[1:]


def neighbours(text: str, n: int = PERTURBATIONS) -> list[str]:
    """Up to ``n`` distinct texts, each ``text`` with one pair of adjacent words swapped (positions drawn without
    replacement from a seed derived from the text; fewer where the text has fewer pairs, none for one word)."""
    words = text.split()
    if len(words) < 2 or n <= 0:
        return []
    final = _FINAL.search(words[-1])
    suffix = ""
    if final and final.start() > 0:  # "edge." -> "edge" + "."
        suffix = final.group(0)
        words[-1] = words[-1][:final.start()]
    capital = words[0][:1].isupper()
    rng = np.random.default_rng(_seed(text))
    out: list[str] = []
    for i in rng.permutation(len(words) - 1):
        w = list(words)
        w[i], w[i + 1] = w[i + 1], w[i]
        if capital and i == 0:
            w[0], w[1] = _recase(w[0], True), _recase(w[1], False)
        candidate = " ".join(w) + suffix
        if candidate != text and candidate not in out:
            out.append(candidate)
        if len(out) == n:
            break
    return out
