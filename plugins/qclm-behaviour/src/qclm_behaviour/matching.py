"""How the two readings of an interpretation-bias item are matched, and the check that they are.

The interpretation task (``data/interpretation.yaml``) gives a model an ambiguous everyday scenario and reads the
probability it puts on a threatening reading against a benign one. A language model's probability of a sentence
falls with every word it has to produce and with every rare word in it, whatever the sentence means: a longer or
rarer-worded threatening reading would look less likely for reasons that have nothing to do with threat. The two
readings of an item are therefore matched on what drives that probability apart from their meaning:

* the same number of words (:func:`words`: lowercase word tokens, an apostrophe kept inside a word, so "don't"
  and "friend's" are one word each), exactly;
* a similar length in characters: the longer reading at most :data:`MAX_LENGTH_RATIO` times the shorter;
* a similar mean word frequency: the mean Zipf frequency of their words (:func:`mean_zipf`, from
  ``wordfreq.zipf_frequency(word, "en")``) at most :data:`MAX_ZIPF_DIFF` apart.

Their grammar is kept parallel by writing them as the same frame with a few words changed ("It means your friend
is angry with you." against "It means your friend is busy at work."); that part is the writer's, not checked here.

:func:`match` measures one pair; :func:`problems` checks a list of items (the file's ``items``) and returns one line
per malformed item or unmatched pair, ``PATH: item ID: field FIELD: PROBLEM``, an empty list when all is well.

Only numpy, pyyaml and wordfreq are used: no torch and nothing of qclm, so the material can be checked anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import yaml
from wordfreq import zipf_frequency

MAX_LENGTH_RATIO = 1.15
"""The most the longer reading's length in characters may be over the shorter's, as a ratio (15% longer).

Word counts are equal already; this keeps the words themselves of a similar length, so that one reading is not
spelt out in long words (more tokens to a subword tokenizer, so a lower probability) while the other uses short
ones. 15% leaves room to write natural sentences: one word of a ten-word sentence may be a few letters longer."""

MAX_ZIPF_DIFF = 0.25
"""The most the two readings' mean Zipf word frequencies may differ.

A Zipf point is a factor of ten in frequency; a language model finds frequent words more probable, so a reading
of rarer words would be judged less likely for its vocabulary alone. A quarter of a point between the means of two
sentences of about ten words is what one word of the one being two and a half points rarer than its counterpart
moves it: small next to the spread of everyday words (about 3 to 7) and reachable by choosing common words."""

DOMAINS = ("social", "somatic", "work", "home", "travel", "health", "money")
"""The domains of life an item's scenario may come from; the task spreads its items over several of them, so that
a bias found is not one domain's."""

FIELDS = ("id", "domain", "scenario", "threatening", "benign")
"""The fields every item has, and the only ones it may have."""

TEXT_FIELDS = ("scenario", "threatening", "benign")
"""The fields that hold text, which must not be empty."""

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def words(text: str) -> list[str]:
    """The lowercase word tokens of ``text``: runs of letters and digits, an apostrophe kept inside a word
    ("don't", "friend's"; a typographic apostrophe read as a plain one); punctuation and spaces dropped."""
    return _WORD.findall(text.lower().translate(_APOSTROPHES))


def mean_zipf(text: str) -> float:
    """The mean Zipf frequency (``wordfreq.zipf_frequency(word, "en")``; 0 for a word it does not know) of the
    words of ``text``; nan for a text without words."""
    tokens = words(text)
    if not tokens:
        return float("nan")
    return float(np.mean([zipf_frequency(word, "en") for word in tokens]))


def match(threatening: str, benign: str) -> dict:
    """How well the two readings of an item are matched.

    Returns the word counts (``words_threatening``, ``words_benign``, ``word_diff`` = threatening less benign),
    the lengths in characters (``chars_threatening``, ``chars_benign``, ``length_ratio`` = longer over shorter,
    1.0 for equal lengths), the mean Zipf frequencies (``zipf_threatening``, ``zipf_benign``, ``zipf_diff`` =
    threatening less benign) and ``matched``: whether all three are within the module's tolerances."""
    n_threat, n_benign = len(words(threatening)), len(words(benign))
    chars_threat, chars_benign = len(threatening.strip()), len(benign.strip())
    shorter, longer = sorted((chars_threat, chars_benign))
    ratio = longer / shorter if shorter else float("inf")
    zipf_threat, zipf_benign = mean_zipf(threatening), mean_zipf(benign)
    zipf_diff = zipf_threat - zipf_benign
    return {
        "words_threatening": n_threat,
        "words_benign": n_benign,
        "word_diff": n_threat - n_benign,
        "chars_threatening": chars_threat,
        "chars_benign": chars_benign,
        "length_ratio": ratio,
        "zipf_threatening": zipf_threat,
        "zipf_benign": zipf_benign,
        "zipf_diff": zipf_diff,
        "matched": bool(
            n_threat == n_benign and ratio <= MAX_LENGTH_RATIO and abs(zipf_diff) <= MAX_ZIPF_DIFF
        ),
    }


def problems(items: object, path: str | Path) -> list[tuple[str, str, str]]:
    """Every problem with the task's ``items`` (the file's ``items`` list), each a (file, location, problem) triple
    of qclm's errors, shown as ``PATH: item ID: field FIELD: PROBLEM``; an empty list when there are none.

    An item is named by its id, or by its place (``#3``, from 1) when it has no usable id. Malformed items: not a
    mapping, a field missing or not a string, an empty text, an unexpected field, a duplicate id, a domain not in
    :data:`DOMAINS`. Unmatched readings (field ``threatening/benign``): word counts that differ, a length ratio
    beyond :data:`MAX_LENGTH_RATIO`, a mean Zipf difference beyond :data:`MAX_ZIPF_DIFF`."""
    out: list[tuple[str, str, str]] = []

    def report(name: str, field: str, problem: str) -> None:
        out.append((str(path), f"item {name}: field {field}", problem))

    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        return [(str(path), "item -: field items", "not a list of items")]
    seen: dict[str, int] = {}
    for place, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            report(f"#{place}", "-", "not a mapping of fields")
            continue
        item_id = item.get("id")
        name = item_id if isinstance(item_id, str) and item_id.strip() else f"#{place}"
        for field in FIELDS:
            if field not in item or item[field] is None:
                report(name, field, "missing")
            elif not isinstance(item[field], str):
                report(name, field, f"not a string ({type(item[field]).__name__})")
            elif not item[field].strip():
                report(name, field, "empty text")
        for field in item:
            if field not in FIELDS:
                report(name, str(field), "unexpected field")
        if name == item_id:
            if item_id in seen:
                report(name, "id", f"duplicate id (also item #{seen[item_id]})")
            else:
                seen[item_id] = place
        domain = item.get("domain")
        if isinstance(domain, str) and domain.strip() and domain not in DOMAINS:
            report(name, "domain", f"unknown domain {domain!r} (not one of {', '.join(DOMAINS)})")
        threatening, benign = item.get("threatening"), item.get("benign")
        if not (isinstance(threatening, str) and threatening.strip() and isinstance(benign, str) and benign.strip()):
            continue
        m = match(threatening, benign)
        if m["word_diff"]:
            report(name, "threatening/benign",
                   f"word counts differ ({m['words_threatening']} against {m['words_benign']})")
        if m["length_ratio"] > MAX_LENGTH_RATIO:
            report(name, "threatening/benign",
                   f"length ratio {m['length_ratio']:.3f} beyond {MAX_LENGTH_RATIO} "
                   f"({m['chars_threatening']} against {m['chars_benign']} characters)")
        if abs(m["zipf_diff"]) > MAX_ZIPF_DIFF:
            report(name, "threatening/benign",
                   f"Zipf difference {m['zipf_diff']:+.3f} beyond {MAX_ZIPF_DIFF} "
                   f"({m['zipf_threatening']:.3f} against {m['zipf_benign']:.3f})")
    return out


def problems_in_file(path: str | Path) -> list[tuple[str, str, str]]:
    """:func:`problems` of the task file at ``path`` (read with ``yaml.safe_load``), with a line for a file that
    is not a mapping or lacks its ``name``, ``description``, ``licence`` or ``items``."""
    document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(document, Mapping):
        return [(str(path), "item -: field -", "not a mapping of name, description, licence and items")]
    out = [(str(path), f"item -: field {key}", "missing") for key in ("name", "description", "licence", "items")
           if not document.get(key)]
    return out + problems(document.get("items") or [], path)
