"""Term-distribution control forms of questionnaires (issue 54, item 1): the rule, its checker and its builder.

A state effect on STAI-S may partly come from the construct terms themselves: state-related terms (*tense*,
*upset*) co-occur with situational contexts in training text, trait-related ones (*steady*, *secure*) with stable
descriptions. A **control form** is a copy of a questionnaire whose construct terms (every item's ``cterms.plus``
and ``cterms.minus``) are rewritten word by word into words of the same part of speech and frequency band that
carry no construct meaning; scored under the same conditions, the original's effect less the control's is the
part of the effect that is specific to the construct. Everything but the terms (item ids, ordinals, keying,
templates, scale) is the original's, so the control is scored exactly as the original.

The rule (stated in every control file's header and in resources/questionnaires/README.md):

- Each construct term is split into words at spaces (a hyphenated compound such as ``self-confident`` is one word).
  A word is **kept** only when it is one of :data:`KEPT_WORDS` (closed-class words: articles, pronouns,
  prepositions and particles, conjunctions, auxiliaries and modals, negation, and the light verbs *get, go, have,
  keep, let, make, put, take, find, become, feel*), is not in VADER's lexicon, and is not, and shares no lemma with,
  a single-word construct term of any shipped instrument. Every other word is **replaced**: every content word,
  so every word in VADER's lexicon and every single-word construct term.
- A replacement (a) has the part of speech the file states for the original word as used in the term, one of
  :data:`TAGS`, and lemminflect lists that tag for both words (:func:`word_tags`: a participle may stand for an
  adjective; a word lemminflect does not list is read through its hyphenated head, an ``un-`` prefix or a
  ``-less``, ``-y``, ``-ly``, ``-ed``, ``-en``, ``-ing`` suffix); (b) has a wordfreq English Zipf frequency within
  :data:`ZIPF_BAND` of the original's; (c) is not in VADER's lexicon (no valence), nor is any part of a hyphenated
  replacement; (d) is not a word of any construct term of any shipped instrument (resources/questionnaires and
  resources/entailment), and shares no lemma with one; (e) is used once per form: no replacement stands for two
  different original words.
- The situational tie: the replacements of a state form name **passing** physical or situational conditions
  (things true of a moment: *dusty, barefoot, sunburnt*), those of a trait form **lasting** physical or descriptive
  attributes (*left-handed, freckled, tall*) (:data:`CLASSES`). The file states each replaced word's class. The
  tools here cannot measure how tied to situations a word is: the class is a design choice of whoever chose the
  words, checked only for being stated and matching the form's framing.

The file records every word of every term (the original word, its tag, its replacement and class, and both Zipf
figures to 2 decimals); :func:`control_problems` recomputes every figure from wordfreq, lemminflect and VADER and
never trusts the file's, and also reports a stated figure that differs from the recomputed one by more than
rounding. The files are generated, not typed: :func:`build_control` writes one from the original and a
replacement mapping, and ``python -m qclm.controls rebuild FILE`` regenerates a control file from its own records
(after a wordfreq update, say).

Light: no torch; wordfreq, lemminflect and vaderSentiment are imported inside the functions that use them.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import textwrap
from pathlib import Path

from qclm.errors import InputError, Problem
from qclm.inputs import labelled_entries, list_strings, typed_field
from qclm.lexicons import versions

#: a replacement's Zipf frequency (wordfreq, English) lies within this of the original word's
ZIPF_BAND = 0.5
#: a stated Zipf figure may differ from the recomputed one by rounding to 2 decimals, no more
ZIPF_ROUNDING = 0.005
#: the parts of speech a replaced word is stated under (lemminflect's universal tags)
TAGS = ("ADJ", "NOUN", "VERB", "ADV")
#: the class of a control form's replacements by the original's framing: a state form's replacements name passing
#: conditions (true of a moment), a trait form's lasting attributes
CLASSES = {"state": "passing", "trait": "lasting"}
#: the words a term may keep: closed-class words and light verbs (the rest of a term is replaced)
KEPT_WORDS = frozenset("""
    a an the this that these those what which who whom whose something anything nothing everything someone anyone
    everyone anyone's everyone's else other others own enough very too so such
    i me my myself you your yours yourself we us our it its they them their
    of at in on by with without about over under up out off away around behind between to for into onto from
    through after before down across along against among upon within
    and or but nor because as than when while if though
    not no cannot can could will would shall should may might must
    is are am was were be been being do does did done
    get gets got getting go goes going gone have has had having keep keeps kept keeping let lets letting
    make makes made making put puts putting take takes took taken taking find finds found finding
    become becomes became becoming feel feels felt feeling
""".split())
#: a word of a term or a replacement: lower-case letters, hyphens inside, an apostrophe before a final s
WORD = re.compile(r"[a-z]+(?:-[a-z]+)*(?:'s)?")
#: the YAML schema's name for the top-level block and the per-item record
BLOCK, RECORD = "control", "replacements"
SIDES = ("plus", "minus")


# -- the tools ----------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def vader() -> dict[str, float]:
    """VADER's lexicon: word -> mean valence rating (vaderSentiment's vader_lexicon.txt)."""
    from qclm.lexicons import vader_lexicon

    return {w.lower(): v for w, v in vader_lexicon().items()}


@functools.lru_cache(maxsize=65536)
def zipf(word: str) -> float:
    """wordfreq's English Zipf frequency of a word (0 for a word it does not know)."""
    import wordfreq

    return float(wordfreq.zipf_frequency(word, "en"))


def _lemmas(word: str) -> dict[str, tuple[str, ...]]:
    import lemminflect

    return dict(lemminflect.getAllLemmas(word))


def _participle(word: str, lemma: str) -> bool:
    import lemminflect

    return any(word in lemminflect.getInflection(lemma, tag=t) for t in ("VBN", "VBG"))


@functools.lru_cache(maxsize=65536)
def word_tags(word: str) -> frozenset[str]:
    """The parts of speech (of :data:`TAGS`) lemminflect lists for a word: the keys of ``getAllLemmas``, and ADJ for
    a participle (a VBN or VBG form of a verb it lists, *frustrated*, *shaken*, *unsettling*). A word lemminflect
    does not list is read through its form: a hyphenated compound by its last part (*self-confident*:
    *confident*), an ``un-`` word by the rest (*unflustered*), a ``-less`` word made from a noun and a ``-y`` word
    made from a noun or verb as ADJ (*shoeless*, *twitchy*), a ``-ly`` word made from an adjective as ADV, and an
    ``-ed``/``-en``/``-ing`` word that is a participle of a verb lemminflect lists as VERB and ADJ (*tattooed*)."""
    lemmas = _lemmas(word)
    tags = {t for t in lemmas if t in TAGS}
    if any(_participle(word, lemma) for lemma in lemmas.get("VERB", ())):
        tags.add("ADJ")
    if tags:
        return frozenset(tags)
    if "-" in word:
        return word_tags(word.rsplit("-", 1)[1])
    if word.startswith("un") and len(word) > 4:
        rest = word_tags(word[2:])
        if rest:
            return rest
    if word.endswith("ly") and len(word) > 4 and "ADJ" in word_tags(word[:-2]):
        return frozenset({"ADV"})
    if word.endswith("less") and len(word) > 6 and "NOUN" in word_tags(word[:-4]):
        return frozenset({"ADJ"})
    if word.endswith("y") and len(word) > 3:
        stems = {word[:-1]} | ({word[:-2]} if word[-2] == word[-3] else set())
        if any({"NOUN", "VERB"} & word_tags(s) for s in stems):
            return frozenset({"ADJ"})
    if word.endswith(("ed", "en", "ing")):
        import lemminflect

        for lemma in lemminflect.getAllLemmasOOV(word, upos="VERB").get("VERB", ()):
            if lemma != word and "VERB" in _lemmas(lemma) and _participle(word, lemma):
                return frozenset({"VERB", "ADJ"})
    return frozenset()


def lemma_set(word: str) -> frozenset[str]:
    """The word and every lemma lemminflect gives it (any part of speech)."""
    return frozenset({word, *(lemma for lemmas in _lemmas(word).values() for lemma in lemmas)})


def term_words(term: str) -> list[str]:
    """The words of a construct term (split at spaces; a hyphenated compound is one word)."""
    return term.split()


# -- the construct terms of the shipped instruments ---------------------------------------------------------------

def shipped_folders() -> tuple[Path, ...]:
    """The folders of the shipped instruments whose construct terms the rule refers to."""
    from qclm import shipped

    return shipped.DATA / "questionnaires", shipped.DATA / "entailment"


class Vocabulary:
    """The words of the construct terms of a set of instrument files: ``words`` (word -> where it first occurs, as
    'FILE item ID term'), ``single`` (the single-word terms, the same way), and the lemmas of both (lemma -> the
    word it is a lemma of)."""

    def __init__(self, terms: list[tuple[str, str, str]]):
        self.words: dict[str, str] = {}
        self.single: dict[str, str] = {}
        for source, item, term in terms:
            where = f"{source} item {item} ('{term}')"
            words = [w.lower() for w in term_words(term)]
            for w in words:
                self.words.setdefault(w, where)
            if len(words) == 1:
                self.single.setdefault(words[0], where)
        self.word_lemmas = {lemma: w for w in self.words for lemma in lemma_set(w)}
        self.single_lemmas = {lemma: w for w in self.single for lemma in lemma_set(w)}

    def construct_word(self, word: str) -> str | None:
        """Why a word (or one of its lemmas) belongs to a construct term, or None."""
        return self._match(word, self.words, self.word_lemmas, "a word of the construct term")

    def single_term(self, word: str) -> str | None:
        """Why a word (or one of its lemmas) is a single-word construct term, or None."""
        return self._match(word, self.single, self.single_lemmas, "the single-word construct term")

    @staticmethod
    def _match(word: str, table: dict[str, str], lemmas: dict[str, str], what: str) -> str | None:
        if word in table:
            return f"{what} of {table[word]}"
        for lemma in sorted(lemma_set(word)):
            if lemma in lemmas:
                other = lemmas[lemma]
                return f"shares the lemma '{lemma}' with '{other}', {what} of {table[other]}"
        return None


def _file_terms(path: Path) -> list[tuple[str, str, str]]:
    """(file name, item id, term) for every construct term of an instrument file, read from its items' ``cterms``
    (the shape every Likert and entailment file shares: ``plus`` and ``minus`` lists), whether or not the file's own
    loader accepts the rest of it (the terms still count); none for a control form or a file without items. Read
    raw, not through the loaders, which run this module's check on control forms: no import circle."""
    from qclm.inputs import read_yaml

    try:
        data = read_yaml(path)
    except InputError:
        return []
    if not isinstance(data, dict) or BLOCK in data or not isinstance(data.get("items"), list):
        return []
    name = f"{path.parent.name}/{path.name}"
    out = []
    for it in data["items"]:
        cterms = it.get("cterms") if isinstance(it, dict) else None
        if isinstance(cterms, dict):
            out += [(name, str(it.get("id")), t) for side in SIDES for t in (cterms.get(side) or [])
                    if isinstance(t, str)]
    return out


def vocabulary(folders: tuple[Path, ...] | None = None) -> Vocabulary:
    """The construct-term vocabulary of every instrument file (``*.yaml``) in ``folders`` (default: the shipped
    ones, :func:`shipped_folders`), control forms left out; remembered while the files stay the same."""
    folders = tuple(Path(f).resolve() for f in (folders or shipped_folders()))
    files = tuple(sorted({p for f in folders if f.is_dir() for p in f.glob("*.yaml")}))
    stamp = tuple((p, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    return _vocabulary(stamp)


@functools.lru_cache(maxsize=8)
def _vocabulary(stamp: tuple) -> Vocabulary:
    return Vocabulary([t for path, _, _ in stamp for t in _file_terms(path)])


# -- the checker --------------------------------------------------------------------------------------------------

def _fig(value: float) -> str:
    return f"{value:.2f}"


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def _mappings(value) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _records(item: dict, side: str) -> list:
    record = item.get(RECORD)
    value = record.get(side) if isinstance(record, dict) else None
    return value if isinstance(value, list) else []


def control_problems(data: dict, path: str | Path, original: dict | None = None,
                     folders: tuple[Path, ...] | None = None) -> list[Problem]:
    """Every breach of the rule (module docstring) in a control form's data (the parsed YAML of ``path``), as
    ``(file, location, problem)`` triples naming the item, the field and the word. ``original``: the parsed
    original the form controls, where it was found (its item ids, term counts, keying, templates and scale must be
    the control's). ``folders``: where the instruments whose construct terms count are (default: the shipped ones,
    with the control's own folder). The schema (questionnaire.schema.json) has checked the shapes; what it let
    through malformed is passed over here."""
    f = str(path)
    problems: list[Problem] = []
    block = data.get(BLOCK)
    if not isinstance(block, dict):
        return [(f, f"field {BLOCK}", "a control form needs the control block (of, class, rule)")]
    form_class = block.get("class")
    framing = data.get("framing")
    if framing in CLASSES and form_class in CLASSES.values() and CLASSES[framing] != form_class:
        problems.append((f, f"field {BLOCK}.class", f"'{form_class}', but the replacements of a {framing} form are "
                         f"{CLASSES[framing]} (passing: conditions true of a moment, for a state form; lasting: "
                         "attributes, for a trait form)"))
    if framing in CLASSES:  # each word's class is the framing's, whatever the block says (one problem above)
        form_class = CLASSES[framing]
    if isinstance(block.get("of"), str) and block["of"] == data.get("id"):
        problems.append((f, f"field {BLOCK}.of", "names the control form itself; it names the original's id"))
    if folders is None:
        folders = (*shipped_folders(), Path(path).resolve().parent)
    vocab = vocabulary(folders)
    items = typed_field(data, "items", list, [])
    used: dict[str, tuple[str, str]] = {}  # replacement -> (original word, where first used)
    for _, where, item in labelled_entries("item", items):
        cterms = _mapping(item.get("cterms"))
        if not isinstance(item.get(RECORD), dict):
            problems.append((f, f"{where}: field {RECORD}", "missing: every item of a control form records how "
                             "each of its terms was made (replacements: plus, minus)"))
            continue
        for side in SIDES:
            terms = list_strings(cterms.get(side))
            records = _records(item, side)
            loc = f"{where}: field {RECORD}.{side}"
            if len(records) != len(terms):
                problems.append((f, loc, f"{len(records)} record(s) for the {len(terms)} term(s) of cterms.{side}: "
                                 "one record per term, in the same order"))
            for k, (term, record) in enumerate(zip(terms, records)):
                if isinstance(record, dict):
                    problems += _term_problems(term, record, form_class, vocab, used, f, f"{loc}[{k + 1}]")
    if original is not None:
        problems += _original_problems(data, original, f, str(block.get("of")))
    return problems


def _term_problems(term: str, record: dict, form_class, vocab: Vocabulary, used: dict, f: str,
                   loc: str) -> list[Problem]:
    """The problems of one term's record: its words rebuild the original and the control term, each kept word may
    be kept, each replacement follows (a)-(e)."""
    problems: list[Problem] = []
    words = _mappings(record.get("words"))
    original = record.get("original")
    if isinstance(original, str) and [w.get("word") for w in words] != term_words(original):
        problems.append((f, loc, f"the words {[w.get('word') for w in words]} are not the words of the original "
                         f"term '{original}'"))
    rebuilt = " ".join(str(w.get("word") if w.get("kept") else w.get("replacement")) for w in words)
    if rebuilt != term:
        problems.append((f, loc, f"the term '{term}' is not its record's words with their replacements "
                         f"('{rebuilt}')"))
    for w in words:
        word = w.get("word")
        if not isinstance(word, str):
            continue
        wloc = f"{loc}: word '{word}'"
        if w.get("kept"):
            problems += [(f, wloc, p) for p in _kept_problems(word, vocab)]
            if "replacement" in w:
                problems.append((f, wloc, "kept, but also given a replacement: a word is kept or replaced"))
            continue
        replacement = w.get("replacement")
        if not isinstance(replacement, str):
            problems.append((f, wloc, "neither kept (kept: true) nor replaced (replacement, tag, class, zipf, "
                             "replacement_zipf)"))
            continue
        problems += [(f, wloc, p) for p in _replacement_problems(w, word, replacement, form_class, vocab)]
        first = used.setdefault(replacement, (word, wloc))
        if first[0] != word:
            problems.append((f, wloc, f"replacement '{replacement}' is also the replacement of '{first[0]}' "
                             f"({first[1]}): a replacement stands for one original word per form"))
    return problems


def _kept_problems(word: str, vocab: Vocabulary) -> list[str]:
    problems = []
    if word not in KEPT_WORDS:
        problems.append("is kept, but only closed-class words and light verbs may be (qclm.controls.KEPT_WORDS): "
                        "replace it")
    if word in vader():
        problems.append(f"is kept, but it is in VADER's lexicon (valence {vader()[word]:+.1f}): replace it")
    single = vocab.single_term(word)
    if single:
        problems.append(f"is kept, but it {single}: replace it")
    return problems


def _replacement_problems(w: dict, word: str, replacement: str, form_class, vocab: Vocabulary) -> list[str]:
    """Rules (a)-(d) on one replacement, and the stated figures against the recomputed ones."""
    problems = []
    r = f"replacement '{replacement}'"
    if not WORD.fullmatch(replacement):
        problems.append(f"{r} is not one word of lower-case letters (a hyphenated compound is one word)")
    if replacement == word:
        problems.append(f"{r} is the original word itself")
    tag = w.get("tag")
    if tag in TAGS:
        for which, text in (("original", word), ("replacement", replacement)):
            tags = word_tags(text)
            if tag not in tags:
                listed = ", ".join(sorted(tags)) if tags else "no part of speech"
                problems.append(f"the {which} '{text}' is not listed as {tag} by lemminflect (it lists {listed}); "
                                f"a replacement has the part of speech of the original as used in the term")
    z_word, z_rep = zipf(word), zipf(replacement)
    if abs(z_rep - z_word) > ZIPF_BAND + 1e-9:
        problems.append(f"{r} has Zipf {_fig(z_rep)}, outside {_fig(z_word)} ± {ZIPF_BAND} (the original's band)")
    for key, value, text in (("zipf", z_word, word), ("replacement_zipf", z_rep, replacement)):
        stated = w.get(key)
        if isinstance(stated, (int, float)) and not isinstance(stated, bool) and \
                abs(stated - value) > ZIPF_ROUNDING + 1e-9:
            problems.append(f"{key} is stated as {stated}, but wordfreq gives '{text}' {_fig(value)}")
    parts = [replacement, *(replacement.split("-") if "-" in replacement else [])]
    for part in parts:
        what = r if part == replacement else f"{r} (its part '{part}')"
        if part in vader():
            problems.append(f"{what} is in VADER's lexicon (valence {vader()[part]:+.1f}): a replacement carries "
                            "no valence")
    construct = vocab.construct_word(replacement)
    if construct:
        problems.append(f"{r} is {construct}" if construct.startswith("a word") else f"{r} {construct}")
    if form_class in CLASSES.values() and w.get("class") != form_class:
        problems.append(f"{r} has class {w.get('class')!r}; every replacement of this form is {form_class}")
    return problems


def _original_problems(data: dict, original: dict, f: str, of: str) -> list[Problem]:
    """The control has the original's items (ids in order, ordinals, keying, the number of terms per side, each
    record's original term), templates, scale and framing."""
    problems: list[Problem] = []
    name = f"{of}.yaml"
    for key in ("framing", "template", "templates", "scale"):
        if data.get(key) != original.get(key):
            problems.append((f, f"field {key}", f"differs from the original's ({name}): a control form is scored "
                             "exactly as the original"))
    ours = _mappings(data.get("items"))
    theirs = {it.get("id"): it for it in _mappings(original.get("items"))}
    ids, their_ids = [it.get("id") for it in ours], list(theirs)
    if ids != their_ids:
        missing = [i for i in their_ids if i not in ids]
        extra = [i for i in ids if i not in theirs]
        detail = (f"missing {missing}" if missing else "") + ("; " if missing and extra else "") + \
            (f"not in the original {extra}" if extra else "")
        problems.append((f, "field items", f"the item ids differ from the original's ({name}): "
                         f"{detail or 'the order differs'}"))
    for item in ours:
        other = theirs.get(item.get("id"))
        if other is None:
            continue
        where = f"item {item.get('id')}"
        for key in ("ordinal", "keying", "template", "templates"):
            if item.get(key) != other.get(key):
                problems.append((f, f"{where}: field {key}", f"{item.get(key)!r} differs from the original's "
                                 f"({name}: {other.get(key)!r})"))
        ours_c, theirs_c = _mapping(item.get("cterms")), _mapping(other.get("cterms"))
        for side in SIDES:
            mine, orig = list_strings(ours_c.get(side)), list_strings(theirs_c.get(side))
            if len(mine) != len(orig):
                problems.append((f, f"{where}: field cterms.{side}", f"{len(mine)} term(s), the original "
                                 f"({name}) has {len(orig)}: one control term per original term"))
            for k, (record, term) in enumerate(zip(_records(item, side), orig)):
                if isinstance(record, dict) and record.get("original") != term:
                    problems.append((f, f"{where}: field {RECORD}.{side}[{k + 1}]", f"original "
                                     f"{record.get('original')!r} is not the original's term {term!r} ({name})"))
    return problems


def original_beside(path: str | Path, data: dict) -> tuple[Path, dict | None]:
    """The original a control form names (``control.of``), read from the control's folder where it is there."""
    from qclm.inputs import read_yaml

    of = _mapping(data.get(BLOCK)).get("of")
    candidate = Path(path).parent / f"{of}.yaml"
    if not isinstance(of, str) or not candidate.is_file():
        return candidate, None
    try:
        original = read_yaml(candidate)
    except InputError:
        return candidate, None
    return candidate, original if isinstance(original, dict) else None


# -- the builder --------------------------------------------------------------------------------------------------

#: the rule, as a control file states it in its control block
RULE = (f"Every construct term is rewritten word by word. Kept: closed-class words and light verbs "
        f"(qclm.controls.KEPT_WORDS) that are not in VADER's lexicon and share no lemma with a single-word construct "
        f"term of any shipped instrument; every other word is replaced by a word that lemminflect lists with the "
        f"same part of speech (ADJ, NOUN, VERB, ADV; a participle may stand for an adjective), whose wordfreq Zipf "
        f"is within {ZIPF_BAND} of the original's, that is not in VADER's lexicon, is not (and shares no lemma with) "
        f"a word of any construct term of any shipped instrument, and stands for one original word only. A state "
        f"form's replacements name passing physical or situational conditions, a trait form's lasting physical or "
        f"descriptive attributes: a design choice, not measured.")


def _key(item: str, word: str, mapping: dict) -> tuple[str, str]:
    for key in (f"{item}/{word}", word):
        if key in mapping:
            value = mapping[key]
            return str(value[0]), str(value[1])
    raise KeyError(word)


def build_control(original_path: str | Path, mapping: dict[str, tuple[str, str] | list[str]],
                  control_id: str | None = None) -> dict:
    """A control form (as data) of the questionnaire at ``original_path``: every word of every construct term that
    is not kept (:data:`KEPT_WORDS`) is replaced by ``mapping[word]`` = (replacement, tag), or by
    ``mapping["ITEM/word"]`` where that is given (the same word under another part of speech in one item); the
    figures are computed here. Raises KeyError naming the words without a replacement."""
    from qclm.inputs import read_yaml

    original_path = Path(original_path)
    original = read_yaml(original_path)
    of = original["id"]
    form_class = CLASSES[original["framing"]]
    missing: list[str] = []
    items = []
    for item in original["items"]:
        record: dict[str, list] = {}
        cterms: dict[str, list] = {}
        for side in SIDES:
            record[side], cterms[side] = [], []
            for term in item["cterms"][side]:
                words: list[dict] = []
                for word in term_words(term):
                    if word in KEPT_WORDS and (f"{item['id']}/{word}" not in mapping and word not in mapping):
                        words.append({"word": word, "kept": True})
                        continue
                    try:
                        replacement, tag = _key(item["id"], word, mapping)
                    except KeyError:
                        missing.append(f"{item['id']}: '{word}' in '{term}'")
                        continue
                    words.append({"word": word, "tag": tag, "replacement": replacement, "class": form_class,
                                  "zipf": round(zipf(word), 2), "replacement_zipf": round(zipf(replacement), 2)})
                record[side].append({"original": term, "words": words})
                cterms[side].append(" ".join(str(w["word"] if w.get("kept") else w["replacement"]) for w in words))
        out = {k: item[k] for k in ("id", "ordinal", "description", "keying") if k in item}
        for k in ("template", "templates"):
            if k in item:
                out[k] = item[k]
        out["cterms"] = cterms
        out[RECORD] = record
        items.append(out)
    if missing:
        raise KeyError("no replacement for: " + "; ".join(missing))
    data = {
        "id": control_id or f"{of}_control",
        "name": f"{original['name'].split(',')[0]}: term-distribution control form",
        "construct": f"{original['construct']} (term-distribution control)",
        "framing": original["framing"],
        "source": f"Control form of {of}.yaml (qclm, issue 54): its construct terms rewritten by qclm.controls. "
                  f"Original: {original['source']}",
        "licence": "MIT (qclm): the control terms were generated for this project from the construct terms of "
                   f"{of}.yaml, which were written for this project. {original['licence']}",
        "item_wording": original["item_wording"],
        BLOCK: {"of": of, "class": form_class, "rule": RULE},
    }
    for k in ("template", "templates", "scale"):
        if k in original:
            data[k] = original[k]
    data["items"] = items
    return data


def mapping_of(data: dict) -> dict[str, tuple[str, str]]:
    """The replacement mapping a control form's records hold (the inverse of :func:`build_control`): word ->
    (replacement, tag), and "ITEM/word" where a word is replaced otherwise in that item than its first time."""
    mapping: dict[str, tuple[str, str]] = {}
    for item in data["items"]:
        for side in SIDES:
            for record in _records(item, side):
                for w in record["words"]:
                    if w.get("kept"):
                        continue
                    value = (w["replacement"], w["tag"])
                    if mapping.setdefault(w["word"], value) != value:
                        mapping[f"{item['id']}/{w['word']}"] = value
    return mapping


def _s(value) -> str:
    """A scalar in YAML (JSON's double-quoted strings are YAML's: no word reads as a boolean)."""
    return json.dumps(value, ensure_ascii=False)


def control_text(data: dict) -> str:
    """The YAML text of a control form, with its header (what it is, the rule, the tools' versions)."""
    of = data[BLOCK]["of"]
    form_class = data[BLOCK]["class"]
    examples = "dusty, damp, sunburnt, barefoot" if form_class == "passing" else "left-handed, freckled, tall"
    kind = ("passing physical or situational conditions, things true of a moment" if form_class == "passing"
            else "lasting physical or descriptive attributes")
    paragraphs = [
        (f"Term-distribution control form of {of}.yaml (issue 54, item 1), written for qclm (MIT) and generated by "
         f"qclm.controls (regenerate: python -m qclm.controls rebuild <this file>; do not edit by hand). Every item, "
         f"keying, template and level is {of}.yaml's; only the construct terms differ: each word of a term is kept "
         f"or replaced, and each item's `replacements` records how (original word, tag, replacement, class, and the "
         f"Zipf frequency of both, 2 decimals). `qclm validate` recomputes every figure and refuses a file that "
         f"breaks the rule. The rule:", ""),
        ("- kept: closed-class words and light verbs (qclm.controls.KEPT_WORDS) that are not in VADER's lexicon and "
         "share no lemma with a single-word construct term of any shipped instrument; every other word is replaced;",
         "  "),
        (f"- a replacement has the part of speech stated for the original word as used in the term (ADJ, NOUN, VERB, "
         f"ADV; lemminflect lists it for both words; a participle may stand for an adjective), a wordfreq Zipf "
         f"within ±{ZIPF_BAND} of the original's, is not in VADER's lexicon, is not (and shares no lemma with) a "
         f"word of any construct term of any shipped questionnaire or entailment instrument, and stands for one "
         f"original word only;", "  "),
        (f"- the situational tie: the replacements of this {data['framing']} form are all {form_class}: they name "
         f"{kind} ({examples}). This is a design choice, made by reading the words: wordfreq, lemminflect and VADER "
         f"cannot measure how tied to situations a word is, and nothing checks it but that each replaced word's "
         f"class is stated and is the form's.", "  "),
        (f"Tools: {versions()}; the Zipf figures come from wordfreq's data (Robyn Speer, CC BY-SA 4.0, "
         f"doi:10.5281/zenodo.7199437).", ""),
    ]
    header = "\n".join(textwrap.fill(text, width=116, initial_indent="# ", subsequent_indent="# " + indent)
                       for text, indent in paragraphs)
    top = [f"{k}: {_s(data[k])}" for k in ("id", "name", "construct", "framing", "source", "licence",
                                           "item_wording")]
    block = data[BLOCK]
    lines = [header.rstrip("\n"), *top, f"{BLOCK}:", f"  of: {_s(block['of'])}", f"  class: {_s(block['class'])}",
             f"  rule: {_s(block['rule'])}"]
    if "template" in data:
        lines.append(f"template: {_s(data['template'])}")
    if "templates" in data:
        lines.append("templates:")
        for t in data["templates"]:
            lines.append(f"  - id: {_s(t['id'])}")
            if "description" in t:
                lines.append(f"    description: {_s(t['description'])}")
            lines.append(f"    template: {_s(t['template'])}")
    scale = data["scale"]
    lines += ["scale:"] + ([f"  name: {_s(scale['name'])}"] if "name" in scale else []) + ["  levels:"]
    for lv in scale["levels"]:
        lines += [f"    - label: {_s(lv['label'])}", f"      weight: {_s(lv['weight'])}",
                  f"      intensifiers: [{', '.join(_s(p) for p in lv['intensifiers'])}]"]
    lines.append("items:")
    for item in data["items"]:
        lines += [f"  - id: {_s(item['id'])}", f"    ordinal: {_s(item['ordinal'])}",
                  f"    description: {_s(item['description'])}", f"    keying: {_s(item['keying'])}"]
        if "template" in item:
            lines.append(f"    template: {_s(item['template'])}")
        if "templates" in item:
            lines.append("    templates:")
            lines += [f"      {k}: {_s(v)}" for k, v in item["templates"].items()]
        lines.append("    cterms:")
        lines += [f"      {side}: [{', '.join(_s(t) for t in item['cterms'][side])}]" for side in SIDES]
        lines.append(f"    {RECORD}:")
        for side in SIDES:
            lines.append(f"      {side}:")
            for record in item[RECORD][side]:
                lines += [f"        - original: {_s(record['original'])}", "          words:"]
                for w in record["words"]:
                    fields = ", ".join(f"{k}: {v:.2f}" if k in ("zipf", "replacement_zipf") else f"{k}: {_s(v)}"
                                       for k, v in w.items())
                    lines.append(f"            - {{{fields}}}")
    return "\n".join(lines) + "\n"


def write_control(original_path: str | Path, mapping: dict, out: str | Path) -> dict:
    """Build a control form (:func:`build_control`) and write it to ``out``; returns its data."""
    data = build_control(original_path, mapping, Path(out).stem)
    Path(out).write_text(control_text(data), encoding="utf-8")
    return data


def _main(argv: list[str]) -> int:
    """``python -m qclm.controls rebuild CONTROL.yaml``: regenerate a control form from its own records and the
    original beside it; ``python -m qclm.controls check CONTROL.yaml``: print its problems."""
    if len(argv) != 2 or argv[0] not in ("rebuild", "check"):
        print("usage: python -m qclm.controls rebuild|check CONTROL.yaml", file=sys.stderr)
        return 2
    from qclm.inputs import read_yaml

    path = Path(argv[1])
    data = read_yaml(path)
    original_path, original = original_beside(path, data)
    if argv[0] == "rebuild":
        if original is None:
            print(f"{path}: the original {original_path} is not there", file=sys.stderr)
            return 2
        write_control(original_path, mapping_of(data), path)
        data = read_yaml(path)
    problems = control_problems(data, path, original)
    for f, loc, msg in problems:
        print(f"{f}: {loc}: {msg}", file=sys.stderr)
    return 2 if problems else 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
