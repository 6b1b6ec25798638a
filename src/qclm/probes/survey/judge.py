"""Post-processing of a generated answer, every step recorded (written for this project; R.U.Psycho's cleaners,
validators and judge were read to understand them, none of their code or word lists is used):

1. **cleaning** (:func:`clean`): the text up to the first chat-markup token (a model that runs on into another
   turn), typographic quotes and dashes as ASCII, emoji and invisible characters dropped, markdown emphasis
   dropped, line breaks and runs of white space as one space;
2. **JSON** (:func:`json_answer`), where the variant asks for it: the first JSON object in the text that has an
   ``answer`` field; its value is what the judge reads (without one, the judge reads the cleaned text, as
   R.U.Psycho's extractor falls back to it);
3. **the validator** (:func:`validator`): a refusal or a model stepping out of the respondent's role
   (:data:`REFUSAL_PHRASES`, :data:`AI_PHRASES`, anywhere in the text), or an answer that opens with an apology
   (:data:`APOLOGY_OPENING`) -- what R.U.Psycho's rule-based validator flags, with phrases of this project's own;
4. **the judge** (:func:`judge`): each option's mentions in the text, an option's number (as shown) or its label,
   with four rules of this project's own: a number and the label of the same option next to each other counted
   once, a number that is a quantity not counted ("2 weeks" is a duration, not option 2), a mention after a
   negation in its clause not counted ("not several days"), and the item restated not read (its words, and a
   number right before them: "1. Feeling nervous, ..." numbers the item, it does not choose option 1); a label
   inside a longer option's label counts for the longer one only; the option with the most mentions is the
   answer, a tie is ``inconclusive``, none is ``not_present``;
5. **status** (:func:`process`): ``invalid`` (the validator flagged it: R.U.Psycho's "invalid"), ``no_json`` (the
   json variant without a JSON answer: this project's stricter parse), else the judge's: ``answered``,
   ``inconclusive`` or ``not_present`` (the last two are R.U.Psycho's "rejected"; an empty text is
   ``not_present``, as their judge finds nothing in it).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

#: the statuses of a response, in the order tables and figures show them (module docstring, step 5)
STATUSES = ("answered", "inconclusive", "not_present", "no_json", "invalid")
#: the judge's verdicts besides an option
INCONCLUSIVE, NOT_PRESENT = "inconclusive", "not_present"
#: the verdicts R.U.Psycho calls "rejected" (its Table 1): the judge found no single option in what it read
REJECTED = (INCONCLUSIVE, NOT_PRESENT)

#: chat markup that ends a response: a model that generates past its turn writes the next turn's header
_MARKUP = re.compile(r"<\|[A-Za-z0-9_]{1,40}\|>|<(?:start|end)_of_turn>|</s>|<eos>|\[/?INST\]")
_ASCII = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u201c": '"', "\u201d": '"',
                        "\u201e": '"', "\u2032": "'", "\u2013": "-", "\u2014": "-", "\u2212": "-", "\u00a0": " ",
                        "\u2026": "..."})
#: unicode categories dropped: other symbols (emoji), controls, format (zero-width), private use, surrogates
_DROP = {"So", "Cc", "Cf", "Co", "Cs", "Cn"}
_EMPHASIS = re.compile(r"[*_`#~]+")

#: phrases by which a model answers as an AI rather than as a respondent (lower case, apostrophes as ASCII); found
#: anywhere in the cleaned text
AI_PHRASES = (
    "as an ai", "as an artificial intelligence", "as a language model", "as an assistant", "as a machine",
    "i am an ai", "i'm an ai", "i am just an ai", "i'm just an ai", "i am a language model", "i'm a language model",
    "i am an artificial", "i'm an artificial", "i don't have personal", "i do not have personal",
    "i don't have feelings", "i do not have feelings", "i don't have emotions", "i do not have emotions",
    "i don't experience", "i do not experience", "i am not a human", "i'm not a human", "i am not human",
    "i'm not human",
)
#: phrases by which a model declines to answer (lower case, apostrophes as ASCII); found anywhere in the cleaned
#: text. "I cannot" alone is not one: "I cannot stop worrying" answers GAD-7's second item
REFUSAL_PHRASES = (
    "i'm not able to answer", "i am not able to answer", "i'm unable to answer", "i am unable to answer",
    "i cannot answer", "i can't answer", "i cannot respond", "i can't respond", "i cannot provide", "i can't provide",
    "i cannot choose", "i can't choose", "i cannot pick", "i can't pick", "i cannot select", "i can't select",
    "i cannot rate", "i can't rate", "i cannot fill", "i can't fill", "i cannot comply", "i can't comply",
    "i won't answer", "i will not answer", "i prefer not to answer", "i'd rather not answer",
    "i would rather not answer", "i'm sorry, but", "i am sorry, but", "sorry, but i",
)
#: an answer that opens with an apology ("Sorry, ...", "I'm really sorry", "I apologise", "My apologies"): only at
#: the opening, since "sorry" later in an answer may be what it says ("I feel sorry for myself")
APOLOGY_OPENING = re.compile(r"^(?:(?:i'm|i am|we're|we are|so)\s+)?(?:(?:very|really|so|terribly|truly)\s+)?sorry\b"
                             r"|^(?:i|we)\s+(?:do\s+)?apologi[sz]e\b|^(?:my|our)?\s*apologies\b")

#: words that negate what follows them in their clause ("not several days"); two-word ones as tuples
NEGATORS = frozenset({"not", "never", "no", "nor", "neither", "without", "hardly"})
NEGATOR_PAIRS = frozenset({("rather", "than"), ("instead", "of"), ("other", "than"), ("except", "for")})
#: words after a number that make it a quantity, not an option ("the last 2 weeks", "3 times")
UNITS = frozenset({"second", "seconds", "minute", "minutes", "hour", "hours", "day", "days", "night", "nights",
                   "week", "weeks", "weekend", "weekends", "month", "months", "year", "years", "time", "times",
                   "occasion", "occasions", "percent", "people", "person", "persons", "hundred", "thousand"})
#: how many words before a mention a negation reaches
NEGATION_REACH = 3
#: how many of the item's first words a restatement must repeat (fewer where the item is shorter)
RESTATED_WORDS = 3
#: what may stand between an item's number and the item restated ("1. Feeling ...", "(2) Trouble ...", "3: ...")
_ITEM_NUMBER_GAP = re.compile(r"\s*[.):\-]?\s*")
#: what ends a clause between two words (a negation does not reach across it)
_CLAUSE_END = re.compile(r"[.,;:!?()\[\]{}\"]|\bbut\b")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def clean(text: str) -> str:
    """The cleaned text (module docstring, step 1)."""
    cut = _MARKUP.search(text)
    text = text[:cut.start()] if cut else text
    text = unicodedata.normalize("NFKC", text.translate(_ASCII))
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in _DROP)
    text = _EMPHASIS.sub("", text)
    return re.sub(r"\s+", " ", text).strip()


def json_answer(text: str) -> tuple[str, str | None]:
    """The JSON step: ("parsed", the answer as text) for the first JSON object with an ``answer`` field,
    ("malformed", None) when the text has a ``{`` but no such object, ("absent", None) when it has none."""
    if "{" not in text:
        return "absent", None
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text[start:])
        except ValueError:
            continue
        if isinstance(value, dict) and "answer" in value and isinstance(value["answer"], (str, int, float)) \
                and not isinstance(value["answer"], bool):
            answer = value["answer"]
            return "parsed", (f"{answer:g}" if isinstance(answer, float) else str(answer))
    return "malformed", None


def validator(text: str) -> tuple[str, str]:
    """What the validator flags in a cleaned text: (``refusal``, ``ai`` or ``apology``, the phrase found), or
    ("", "") for none (module docstring, step 3)."""
    lowered = text.lower()
    for category, phrases in (("refusal", REFUSAL_PHRASES), ("ai", AI_PHRASES)):
        for phrase in phrases:
            if re.search(rf"(?<![a-z]){re.escape(phrase)}(?![a-z])", lowered):
                return category, phrase
    found = APOLOGY_OPENING.search(lowered.lstrip(" \"'([-"))
    if found:
        return "apology", found.group(0)
    return "", ""


def refusal(text: str) -> str:
    """The phrase the validator flags in the text ("" if none)."""
    return validator(text)[1]


@dataclass(frozen=True)
class Verdict:
    """The judge's verdict: the option's index (0-based, in the order shown) or None, the verdict's name (the
    option's label, ``inconclusive`` or ``not_present``) and each option's counted mentions (negated ones apart)."""

    index: int | None
    name: str
    mentions: tuple[int, ...]
    negated: tuple[int, ...]


def _words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    found = [(m.group(0), m.span()) for m in _WORD.finditer(text)]
    return [w for w, _ in found], [s for _, s in found]


def _is_decimal_part(text: str, start: int, end: int) -> bool:
    """A number that is part of a decimal or a larger figure ("2.5", "1,000", "3/4")."""
    before = text[max(0, start - 2):start]
    after = text[end:end + 2]
    return bool(re.fullmatch(r"\d[.,/]", before) or re.match(r"[.,/]\d", after))


def _same_word(a: str, b: str) -> bool:
    """Two words the same in a restatement: equal, or one the other with an ending ("trouble", "troubles")."""
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def restatements(text: str, item: str) -> list[tuple[int, int]]:
    """Where a text restates the item: word spans (first word, last word + 1) that repeat the item's opening words,
    at least :data:`RESTATED_WORDS` of them (all of a shorter item's), case and punctuation ignored."""
    item_words = _words(item.lower())[0]
    if not item_words:
        return []
    words = _words(text.lower())[0]
    need = min(RESTATED_WORDS, len(item_words))
    out, i = [], 0
    while i < len(words):
        n = 0
        while i + n < len(words) and n < len(item_words) and _same_word(words[i + n], item_words[n]):
            n += 1
        if n >= need:
            out.append((i, i + n))
            i += n
        else:
            i += 1
    return out


def judge(text: str, labels: Sequence[str], negation: bool = True, quantities: bool = True, pairs: bool = True,
          item: str = "", restated: bool = True) -> Verdict:
    """The option a text chooses among options shown as ``1 = labels[0]; 2 = labels[1]; ...`` (module docstring,
    step 4). ``negation``, ``quantities``, ``pairs``, ``restated``: the rules that discount a negated mention, a
    number that is a quantity (followed by a unit, or part of a decimal), the second half of a number-label pair,
    and the item restated (``item``: its text; its words and a number right before them are not read). All on;
    switched off one by one, they show what each rule changes against a judge without it
    (tests/test_survey_peers.py)."""
    lowered = text.lower()
    words, spans = _words(lowered)
    label_words = [_words(label.lower())[0] for label in labels]
    # every mention: (option, first word, last word + 1, is a number)
    mentions: list[tuple[int, int, int, bool]] = []
    for k, lw in enumerate(label_words):
        n = len(lw)
        for i in range(len(words) - n + 1 if n else 0):
            if words[i:i + n] == lw:
                mentions.append((k, i, i + n, False))
    numbers = {str(k + 1): k for k in range(len(labels))}
    for i, w in enumerate(words):
        if w not in numbers or (quantities and _is_decimal_part(lowered, *spans[i])):
            continue
        k = numbers[w]
        nxt = i + 1
        if (quantities and nxt < len(words) and words[nxt] in UNITS
                and lowered[spans[i][1]:spans[nxt][0]].strip() == ""
                and words[nxt:nxt + len(label_words[k])] != label_words[k]):
            continue  # "2 weeks": a quantity, not the option
        mentions.append((k, i, i + 1, True))
    # the item restated, and its number, are not an answer (a run of the item's words that is no more than an
    # option's label, "Not at all" for an item opening "Not at all interested ...", is the label)
    skipped: set[int] = set()
    if restated and item:
        for start, end in restatements(lowered, item):
            if any(not m[3] and m[1] <= start and end <= m[2] for m in mentions):
                continue
            skipped.update(range(start, end))
            if start > 0 and words[start - 1].isdigit() \
                    and _ITEM_NUMBER_GAP.fullmatch(lowered[spans[start - 1][1]:spans[start][0]]):
                skipped.add(start - 1)
    mentions = [m for m in mentions if not skipped.intersection(range(m[1], m[2]))]
    # a label inside a longer option's label ("agree" in "strongly agree") counts for the longer one only
    labels_found = [m for m in mentions if not m[3]]
    mentions = [m for m in mentions if m[3] or not any(
        o[0] != m[0] and o[1] <= m[1] and m[2] <= o[2] and o[2] - o[1] > m[2] - m[1] for o in labels_found)]
    # a number and the same option's label next to each other ("2 = Several days", "several days (2)") are one
    # mention
    mentions.sort(key=lambda m: (m[1], m[2]))
    merged: list[tuple[int, int, int, bool]] = []
    for m in mentions:
        if merged:
            p = merged[-1]
            between = lowered[spans[p[2] - 1][1]:spans[m[1]][0]] if m[1] >= p[2] else None
            if pairs and p[0] == m[0] and p[3] != m[3] and between is not None and m[1] == p[2] \
                    and re.fullmatch(r"\s*[=:.)\-(]?\s*\(?\s*", between):
                merged[-1] = (p[0], p[1], m[2], False)
                continue
        merged.append(m)
    counts, negated = [0] * len(labels), [0] * len(labels)
    for k, start, _, _ in merged:
        (negated if negation and _negated(lowered, words, spans, start) else counts)[k] += 1
    best = max(counts) if counts else 0
    if best == 0:
        return Verdict(None, NOT_PRESENT, tuple(counts), tuple(negated))
    winners = [k for k, c in enumerate(counts) if c == best]
    if len(winners) > 1:
        return Verdict(None, INCONCLUSIVE, tuple(counts), tuple(negated))
    return Verdict(winners[0], labels[winners[0]], tuple(counts), tuple(negated))


def _negated(text: str, words: list[str], spans: list[tuple[int, int]], start: int) -> bool:
    """Whether a negation in the same clause reaches the mention that starts at word ``start``."""
    for j in range(start - 1, max(-1, start - 1 - NEGATION_REACH), -1):
        if _CLAUSE_END.search(text[spans[j][1]:spans[j + 1][0]]):
            return False
        w = words[j]
        if w in NEGATORS or w.endswith("n't") or (j > 0 and (words[j - 1], w) in NEGATOR_PAIRS
                                                   and not _CLAUSE_END.search(text[spans[j - 1][1]:spans[j][0]])):
            return True
    return False


@dataclass(frozen=True)
class Processed:
    """Every step of one response: the cleaned text, the JSON step (``""`` where the variant asks for none), what
    the judge read, what the validator flagged (its category and phrase, "" for none), the judge's verdict and the
    status."""

    cleaned: str
    json: str
    judged_text: str
    validator: str
    validator_phrase: str
    verdict: Verdict
    status: str


def process(text: str, labels: Sequence[str], wants_json: bool, item: str = "") -> Processed:
    """A response through every step (module docstring); ``item``: the item's text (the judge does not read it
    restated)."""
    cleaned = clean(text)
    json_status, answer = json_answer(cleaned) if wants_json else ("", None)
    judged_text = answer if answer is not None else cleaned
    verdict = judge(judged_text, labels, item=item)
    category, phrase = validator(cleaned)
    if category:
        status = "invalid"
    elif wants_json and json_status != "parsed":
        status = "no_json"
    elif verdict.index is not None:
        status = "answered"
    else:
        status = verdict.name
    return Processed(cleaned, json_status, judged_text, category, phrase, verdict, status)
