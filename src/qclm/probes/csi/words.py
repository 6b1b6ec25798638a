"""CSI word lists: reading any list, and building the shipped ones.

A word list is a UTF-8 text file, either

- plain text: one word per line, or
- a TSV (a ``.tsv`` file, or a first line with a tab): a header naming its columns, one of them ``word``; the
  optional ``pos``, ``freq_rank`` (a positive integer) and ``valence`` (a number, e.g. VADER's mean rating from
  -4 to +4) are read, other columns are ignored.

In both, lines starting with ``#`` (a licence, an attribution) and blank lines are skipped. The file's order is
the order ``limit_words`` takes the first N from (the shipped lists are in frequency order). Every problem of a
file is reported at once, as ``FILE: line N: PROBLEM`` (:class:`qclm.errors.InputError`).

The shipped lists (``resources/csi/``) are built by :func:`build` (``qclm words build``,
the CSI kind's command, qclm.probes.csi.command)
from three packages of PyPI:

    qclm words build --out resources/csi/words.tsv --control resources/csi/valence_control.tsv

- ``wordfreq`` (Robyn Speer; code Apache-2.0, data CC BY-SA 4.0) gives the frequency order of English words;
- ``lemminflect`` (Brad Jascob; MIT) gives, per word, its lemmas and inflections by part of speech;
- ``vaderSentiment`` (C.J. Hutto; MIT) gives VADER's valence ratings (the ``valence`` column and the control list).

A word enters the list when it is a noun or verb lemma (lemminflect has inflections of it as a noun, with the word
itself as the singular, or as a verb, with the word itself as the base form), is not an auxiliary and no
inflection of another noun or verb lemma (``found``, ``left``), is lower-case ASCII letters of length 2 or more,
is not one of :data:`EXCLUDED` (function words, numerals, interjections, word fragments and names the rules let
through, read off the built list by hand), and is a head rather than a modifier: a word lemminflect also reads as an
adjective or adverb (``good``, ``well``,
``right``) is kept only where one of its noun or verb inflections (``lights``, ``lighted``) is at least
:data:`MODIFIER_RATIO` as frequent as the word itself, which says it is used as a noun or verb and not mostly as a
modifier. ``pos`` is ``noun``, ``verb`` or ``noun|verb`` (both readings: the lexicon has no frequencies by part of
speech, so the list does not guess which dominates); ``freq_rank`` is the word's rank in wordfreq's English list
(all tokens, 1 = most frequent).

The valence control list: VADER's rated words that pass the same rules with a mean rating of at least
:data:`CONTROL_MIN_VALENCE` in absolute value, the most frequent :data:`CONTROL_PER_SIGN` of each sign.

No torch, no pandas: the workflow reads lists while building its DAG.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

from qclm.errors import InputError, Problem
from qclm.inputs import SAME_TEXT, by_file, duplicate_column_problems, identity, read_text, text_problem
from qclm.lexicons import vader_lexicon, versions

#: the columns of a TSV list that are read
COLUMNS = ("word", "pos", "freq_rank", "valence")
#: a word also read as an adjective or adverb is kept when a noun or verb inflection is at least this frequent,
#: relative to the word
MODIFIER_RATIO = 0.1
#: the valence control: VADER words with |mean rating| at least this, the most frequent this many of each sign
CONTROL_MIN_VALENCE = 1.5
CONTROL_PER_SIGN = 50
#: words the rules let through that are not common nouns or verbs in use, left out by hand after reading the
#: built list (written for this project): function words, numerals and ordinals, interjections, word fragments
#: of wordfreq's tokenizer, and names whose common-noun reading is rare
EXCLUDED = frozenset("""
    or other except till via ex sub semi inter pro con par mar rev rs ai cant tran dis dos sic lea tor chi rex mil
    hundred thousand million billion zero dozen second fourth fifth
    wow ah hello goodbye congratulations aye woo wee boo
    peter harry jimmy morgan billy bobby rick terry warren tom bob ken jay martin mike nick sally carol khan java
    shanghai oxford china trump google twitter christ jersey sierra superman ford don
""".split())


@dataclass(frozen=True)
class Word:
    word: str
    pos: str = ""
    freq_rank: int | None = None
    valence: float | None = None
    line: int = 0


@dataclass(frozen=True)
class WordList:
    path: str
    words: tuple[Word, ...]
    sha256: str

    def head(self, n: int | None) -> tuple[Word, ...]:
        """The first ``n`` words (all with None)."""
        return self.words if n is None else self.words[:n]


def _lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines that are not comments or blank."""
    return [(n, line.rstrip("\r")) for n, line in enumerate(text.split("\n"), start=1)
            if line.strip() and not line.lstrip().startswith("#")]


def parse_words(text: str, path: str, tsv: bool | None = None) -> tuple[list[Word], list[Problem]]:
    """The words of a list's text and every problem in it (module docstring)."""
    lines = _lines(text)
    problems: list[Problem] = []
    if not lines:
        return [], [(path, "file", "has no words (one word per line, or a TSV with a word column)")]
    if tsv is None:
        tsv = path.endswith(".tsv") or "\t" in lines[0][1]
    columns: dict[str, int] = {}
    width = 1
    if tsv:
        header_line, header = lines[0]
        names = [h.strip() for h in header.split("\t")]
        width = len(names)
        problems += duplicate_column_problems(names, path, f"line {header_line} (header)")
        columns = {name: names.index(name) for name in COLUMNS if name in names}
        if "word" not in columns:
            return [], problems + [(path, f"line {header_line}",
                                    f"the header ({', '.join(names)}) has no 'word' column")]
        lines = lines[1:]
    words: list[Word] = []
    seen: dict[str, tuple[int, str]] = {}
    for n, line in lines:
        where = f"line {n}"
        fields = line.split("\t") if tsv else [line]
        if tsv and len(fields) != width:
            problems.append((path, where, f"{len(fields)} tab-separated fields, the header has {width}"))
            continue
        word = fields[columns.get("word", 0)].strip()
        if not tsv and "\t" in line:
            problems.append((path, where, "a tab in a plain word list (a TSV needs a header with a 'word' column)"))
            continue
        if not word:
            problems.append((path, f"{where}, field word", "empty word"))
            continue
        problem = text_problem(fields[columns.get("word", 0)])  # unstripped: strip drops end control characters
        if problem:
            problems.append((path, f"{where}, field word", f"{word!r} {problem}"))
            continue
        if any(c.isspace() and c != " " for c in word) or "  " in word:
            problems.append((path, f"{where}, field word",
                             f"{word!r} has a whitespace character other than a space, or a double space"))
            continue
        key = identity(word)
        if key in seen:
            first_line, first = seen[key]
            same = "" if first == word else f" ({word!r} and {first!r} {SAME_TEXT})"
            problems.append((path, f"{where}, field word", f"'{word}' is also on line {first_line}{same}"))
            continue
        seen[key] = (n, word)
        rank, valence, pos = None, None, ""
        if "pos" in columns:
            pos = fields[columns["pos"]].strip()
        if "freq_rank" in columns and fields[columns["freq_rank"]].strip():
            value = fields[columns["freq_rank"]].strip()
            if not value.isdigit() or int(value) < 1:
                problems.append((path, f"{where}, field freq_rank", f"{value!r} is not a positive integer"))
            else:
                rank = int(value)
        if "valence" in columns and fields[columns["valence"]].strip():
            value = fields[columns["valence"]].strip()
            try:
                valence = float(value)
                if not math.isfinite(valence):
                    raise ValueError
            except ValueError:
                problems.append((path, f"{where}, field valence", f"{value!r} is not a finite number"))
                valence = None
        words.append(Word(word, pos, rank, valence, n))
    if not words and not problems:
        problems.append((path, "file", "has a header but no words"))
    return words, problems


@by_file
def load_words(path: str | Path) -> WordList:
    """A word list, or an :class:`InputError` with every problem of the file."""
    text = read_text(path, "word list")
    words, problems = parse_words(text, str(path))
    if problems:
        raise InputError(problems)
    return WordList(str(path), tuple(words), hashlib.sha256(text.encode("utf-8")).hexdigest())


def word_problems(path: str | Path) -> list[Problem]:
    """Every problem of a word list file (none: it loads)."""
    try:
        load_words(path)
    except InputError as err:
        return err.problems or [(str(path), "file", err.lines[0])]
    return []


# -- building the shipped lists ----------------------------------------------------------------------------------

def _readings(word: str) -> dict[str, set[str]]:
    import lemminflect

    return {pos: set(lemmas) for pos, lemmas in lemminflect.getAllLemmas(word).items()}


def _inflections(word: str, upos: str) -> dict[str, tuple[str, ...]]:
    import lemminflect

    return dict(lemminflect.getAllInflections(word, upos=upos))


def classify(word: str, frequency) -> str | None:
    """``noun``, ``verb`` or ``noun|verb`` for a head noun or verb lemma (module docstring), else None.
    ``frequency``: word -> frequency (wordfreq's)."""
    if len(word) < 2 or not (word.isascii() and word.isalpha() and word.islower()) or word in EXCLUDED:
        return None
    readings = _readings(word)
    if "AUX" in readings:
        return None
    if any(lemma != word for pos in ("NOUN", "VERB") for lemma in readings.get(pos, ())):
        return None  # an inflection of another noun or verb lemma
    noun = _inflections(word, "NOUN")
    verb = _inflections(word, "VERB")
    is_noun = word in noun.get("NN", ()) and "NOUN" in readings
    is_verb = word in verb.get("VB", ()) and "VERB" in readings
    if not (is_noun or is_verb):
        return None
    if "ADJ" in readings or "ADV" in readings:
        forms = {f for tag, fs in (noun.items() if is_noun else ()) for f in fs if tag != "NN"}
        forms |= {f for tag, fs in (verb.items() if is_verb else ()) for f in fs if tag not in ("VB", "VBP")}
        forms.discard(word)
        base = frequency(word)
        if not forms or max(frequency(f) for f in forms) < MODIFIER_RATIO * base:
            return None
    return "noun|verb" if is_noun and is_verb else ("noun" if is_noun else "verb")


HEADER = """\
# Core Sentiment Inventory word list for qclm ({what}), built by
#   qclm words build --size {size} --out {out}{control}
# with {versions}. Columns: word, pos (noun, verb, noun|verb), freq_rank (rank in wordfreq's English list,
# 1 = most frequent), valence (VADER's mean rating, -4 to +4, where VADER rates the word; empty otherwise).
#
# Licence: this list is derived from wordfreq's data (Robyn Speer, https://github.com/rspeer/wordfreq,
# doi:10.5281/zenodo.7199437), which is licensed CC BY-SA 4.0; so is this list
# (https://creativecommons.org/licenses/by-sa/4.0/). wordfreq's data draws on Wikipedia, the Leeds Internet
# Corpus, ParaCrawl, OPUS OpenSubtitles 2018 (OpenSubtitles, http://www.opensubtitles.org/), Google Books
# Ngrams (http://books.google.com/ngrams), the SUBTLEX word lists by Marc Brysbaert et al. (freely available
# data) and Twitter and Reddit word counts. Parts of speech from lemminflect (Brad Jascob, MIT licence);
# valence ratings from VADER (C.J. Hutto, vaderSentiment, MIT licence, Copyright (c) 2016 C.J. Hutto).
"""


def build(size: int, out: Path, control: Path | None, scan: int = 60000) -> tuple[int, int]:
    """Write the ``size`` most frequent head noun and verb lemmas to ``out`` and the valence control list to
    ``control``; returns the number of words of each."""
    import wordfreq

    vader = vader_lexicon()
    top = wordfreq.top_n_list("en", scan)
    rank = {w: i + 1 for i, w in enumerate(top)}

    def frequency(w: str) -> float:
        return wordfreq.word_frequency(w, "en")

    rows, chosen = [], set()
    for w in top:
        pos = classify(w, frequency)
        if pos is None:
            continue
        rows.append((w, pos, rank[w], vader.get(w)))
        chosen.add(w)
        if len(rows) == size:
            break
    if len(rows) < size:
        raise SystemExit(f"only {len(rows)} words among wordfreq's {scan} most frequent; raise --scan")

    def write(path: Path, what: str, table, command_size: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            fh.write(HEADER.format(what=what, size=command_size, out=out,
                                   control=f" --control {control}" if control is not None else "",
                                   versions=versions()))
            fh.write("\t".join(COLUMNS) + "\n")
            for w, pos, r, v in table:
                fh.write(f"{w}\t{pos}\t{r}\t{'' if v is None else f'{v:g}'}\n")

    write(out, f"the {size} most frequent English head noun and verb lemmas", rows, size)
    n_control = 0
    if control is not None:
        rated = []
        for w, v in vader.items():
            if abs(v) < CONTROL_MIN_VALENCE or w not in rank:
                continue
            pos = classify(w, frequency)
            if pos is not None:
                rated.append((w, pos, rank[w], v))
        rated.sort(key=lambda r: r[2])
        table = [r for r in rated if r[3] > 0][:CONTROL_PER_SIGN] + [r for r in rated if r[3] < 0][:CONTROL_PER_SIGN]
        table.sort(key=lambda r: r[2])
        write(control, f"valence control: the {CONTROL_PER_SIGN} most frequent head noun and verb lemmas of each "
                       f"sign that VADER rates at |valence| >= {CONTROL_MIN_VALENCE}", table, size)
        n_control = len(table)
    return len(rows), n_control
