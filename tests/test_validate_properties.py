"""Property-based: random well-formed questionnaires validate (and give the expected variants),
and a random single-field corruption of one is always caught with a problem whose location names
the item (or level) and the field."""

from __future__ import annotations

import copy
import string
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qclm.inputs import text_problem
from qclm.questionnaire import load_questionnaire
from qclm.errors import InputError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REQUIRED_TOP = ["id", "name", "construct", "framing", "source", "licence", "item_wording", "template", "scale", "items"]
REQUIRED_ITEM = ["id", "ordinal", "description", "keying", "cterms"]

word = st.text(alphabet=string.ascii_lowercase, min_size=2, max_size=7)
phrase = st.lists(word, min_size=1, max_size=3).map(" ".join)
#: template text: any printable character but braces (slots) and YAML-normalized line breaks, and not a text
#: that shows nothing but invisible characters (a zero-width space alone: an error of its own)
free_text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="{}")
                    | st.just("\n"), max_size=30).filter(lambda t: text_problem(t) is None)
before_answer = free_text.filter(lambda t: not t[-1:].isspace())


@st.composite
def templates(draw) -> str:
    return f"{draw(free_text)}{{cterm}}{draw(before_answer)}{{intensifier}}"


@st.composite
def questionnaires(draw) -> dict:
    n_levels = draw(st.integers(2, 5))
    labels = draw(st.lists(phrase, min_size=n_levels, max_size=n_levels, unique=True))
    weights = draw(st.lists(st.integers(-20, 20).map(lambda x: x / 2), min_size=n_levels, max_size=n_levels,
                            unique=True))
    per_level = draw(st.lists(st.integers(1, 3), min_size=n_levels, max_size=n_levels))
    phrases = draw(st.lists(phrase, min_size=sum(per_level), max_size=sum(per_level), unique=True))
    levels, at = [], 0
    for label, weight, k in zip(labels, weights, per_level):
        levels.append({"label": label, "weight": int(weight) if weight.is_integer() else weight,
                       "intensifiers": phrases[at:at + k]})
        at += k
    n_items = draw(st.integers(1, 4))
    ids = draw(st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,5}", fullmatch=True), min_size=n_items,
                        max_size=n_items, unique=True))
    items = []
    for n, ident in enumerate(ids):
        n_plus, n_minus = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        terms = draw(st.lists(phrase, min_size=n_plus + n_minus, max_size=n_plus + n_minus, unique=True))
        item = {"id": ident, "ordinal": n + 1, "description": draw(free_text),
                "keying": draw(st.sampled_from(["direct", "reverse"])),
                "cterms": {"plus": terms[:n_plus], "minus": terms[n_plus:]}}
        if draw(st.booleans()) and draw(st.booleans()):
            item["template"] = draw(templates())
        items.append(item)
    return {"id": "q1", "name": draw(phrase), "construct": draw(word), "framing": draw(st.sampled_from(["state", "trait"])),
            "source": draw(free_text), "licence": draw(free_text),
            "item_wording": draw(st.sampled_from(["reproduced", "described", "written"])), "template": draw(templates()),
            "scale": {"name": draw(word), "levels": levels}, "items": items}


def load(data: dict):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "q1.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
        return load_questionnaire(path)


@SETTINGS
@given(questionnaires())
def test_well_formed_questionnaires_validate(data):
    q = load(data)
    n_phrases = sum(len(lv["intensifiers"]) for lv in data["scale"]["levels"])
    n_terms = sum(len(i["cterms"]["plus"]) + len(i["cterms"]["minus"]) for i in data["items"])
    variants = q.variants()
    assert len(variants) == n_terms * n_phrases
    for v in variants:
        template = next(i.get("template", data["template"]) for i in data["items"] if i["id"] == v.item_id)
        assert v.prefix + "{intensifier}" == template.replace("{cterm}", v.cterm, 1)


# -- corruptions: each changes one field and returns (the location that must be named, a fragment
#    the problem must contain) -----------------------------------------------------------------------

def _item(d, draw):
    i = draw(st.integers(0, len(d["items"]) - 1))
    return i, d["items"][i]


def _level(d, draw):
    j = draw(st.integers(0, len(d["scale"]["levels"]) - 1))
    return j, d["scale"]["levels"][j]


def drop_top_field(d, draw):
    field = draw(st.sampled_from(REQUIRED_TOP))
    del d[field]
    return f"field {field}", "missing required field"


def drop_item_field(d, draw):
    i, item = _item(d, draw)
    field = draw(st.sampled_from(REQUIRED_ITEM))
    del item[field]
    return (f"item #{i + 1}: field id" if field == "id" else f"item {item['id']}: field {field}"), \
        "missing required field"


def unknown_item_field(d, draw):
    _, item = _item(d, draw)
    field = draw(word.filter(lambda w: w not in REQUIRED_ITEM + ["template", "templates", "text"]))
    item[field] = draw(free_text)
    return f"item {item['id']}: field {field}", "unknown field"


def unknown_top_field(d, draw):
    field = draw(word.filter(lambda w: w not in REQUIRED_TOP + ["templates"]))
    d[field] = draw(free_text)
    return f"field {field}", "unknown field"


def weight_not_a_number(d, draw):
    _, level = _level(d, draw)
    level["weight"] = draw(st.one_of(st.none(), st.booleans(), free_text, st.lists(st.integers(), max_size=2)))
    return f"level {level['label']}: field weight", "must be a number"


def weight_not_finite(d, draw):
    _, level = _level(d, draw)
    level["weight"] = draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
    return f"level {level['label']}: field weight", "must be a finite number"


def weight_repeated(d, draw):
    levels = d["scale"]["levels"]
    j = draw(st.integers(1, len(levels) - 1))
    i = draw(st.integers(0, j - 1))
    levels[j]["weight"] = levels[i]["weight"]
    return f"level {levels[j]['label']}: field weight", f"repeats level {levels[i]['label']}"


def too_few_levels(d, draw):
    d["scale"]["levels"] = d["scale"]["levels"][:draw(st.integers(0, 1))]
    return "field scale.levels", "needs at least 2 entries"


def no_intensifiers(d, draw):
    _, level = _level(d, draw)
    level["intensifiers"] = []
    return f"level {level['label']}: field intensifiers", "must not be empty"


def phrase_in_two_levels(d, draw):
    levels = d["scale"]["levels"]
    j = draw(st.integers(1, len(levels) - 1))
    levels[j]["intensifiers"].append(levels[0]["intensifiers"][0])
    return f"level {levels[j]['label']}: field intensifiers", "appears twice"


def duplicate_item_id(d, draw):
    if len(d["items"]) == 1:
        d["items"].append(copy.deepcopy(d["items"][0]) | {"ordinal": 2})
    j = draw(st.integers(1, len(d["items"]) - 1))
    i = draw(st.integers(0, j - 1))
    d["items"][j]["id"] = d["items"][i]["id"]
    return f"item {d['items'][j]['id']} (#{j + 1}): field id", "duplicate item id"


def template_without_cterm(d, draw):
    d["template"] = draw(before_answer) + "{intensifier}"
    return "top level", "template has no {cterm} slot"


def template_text_after_intensifier(d, draw):
    d["template"] += draw(free_text.filter(bool))
    return "top level", "template has no {intensifier} slot at its end"


def template_space_before_intensifier(d, draw):
    d["template"] = d["template"][: -len("{intensifier}")] + draw(st.sampled_from([" ", "\n", "  ", "\t"])) \
        + "{intensifier}"
    return "top level", "template ends in whitespace"


def item_template_two_cterms(d, draw):
    _, item = _item(d, draw)
    item["template"] = "{cterm} " + draw(templates())
    return f"item {item['id']}", "template has 2 {cterm} slots"


def empty_terms(d, draw):
    _, item = _item(d, draw)
    side = draw(st.sampled_from(["plus", "minus"]))
    item["cterms"][side] = []
    return f"item {item['id']}: field cterms.{side}", "must not be empty"


def term_in_both(d, draw):
    _, item = _item(d, draw)
    term = draw(st.sampled_from(item["cterms"]["plus"]))
    item["cterms"]["minus"].append(term)
    return f"item {item['id']}: field cterms", f"term '{term}' is in both plus (S+) and minus (S-)"


def bad_framing(d, draw):
    d["framing"] = draw(word.filter(lambda w: w not in ("state", "trait")))
    return "field framing", "must be one of state, trait"


def id_not_file_name(d, draw):
    d["id"] = draw(st.from_regex(r"[a-z][a-z0-9_]{1,8}", fullmatch=True).filter(lambda s: s != "q1"))
    return "field id", "differs from the file name 'q1'"


def bad_ordinal(d, draw):
    _, item = _item(d, draw)
    item["ordinal"] = draw(st.one_of(st.integers(max_value=0), word, st.just(1.5)))
    return f"item {item['id']}: field ordinal", "must be"


def invisible_term(d, draw):
    _, item = _item(d, draw)
    side = draw(st.sampled_from(["plus", "minus"]))
    k = draw(st.integers(0, len(item["cterms"][side]) - 1))
    item["cterms"][side][k] = draw(st.text(st.sampled_from("\u200b\u200c\u200d\u2060\ufeff\u00ad"), min_size=1,
                                           max_size=3))
    return f"item {item['id']}: field cterms.{side}, entry {k + 1}", "has only invisible characters"


def control_character(d, draw):
    # (not U+0085: YAML reads a raw NEL as a line break, so it never reaches the loader as a character)
    field = draw(st.sampled_from(["name", "source", "licence", "template"]))
    at = draw(st.integers(0, len(d[field])))
    d[field] = d[field][:at] + draw(st.sampled_from(["\x00", "\x07", "\x1b", "\x7f", "\x9b", "\r"])) + d[field][at:]
    return f"field {field}", "has the control character"


CORRUPTIONS = [invisible_term, control_character, drop_top_field, drop_item_field, unknown_item_field, unknown_top_field, weight_not_a_number,
               weight_not_finite, weight_repeated, too_few_levels, no_intensifiers, phrase_in_two_levels,
               duplicate_item_id, template_without_cterm, template_text_after_intensifier,
               template_space_before_intensifier, item_template_two_cterms, empty_terms, term_in_both, bad_framing,
               id_not_file_name, bad_ordinal]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(questionnaires(), st.sampled_from(CORRUPTIONS), st.data())
def test_single_field_corruption_is_named(data, corrupt, draw):
    data = copy.deepcopy(data)
    location, fragment = corrupt(data, draw.draw)
    try:
        load(data)
    except InputError as err:
        assert all(f.endswith("q1.yaml") for f, _, _ in err.problems)
        named = [msg for _, loc, msg in err.problems if loc == location]
        assert any(fragment in msg for msg in named), (corrupt.__name__, location, fragment, err.lines)
    else:
        raise AssertionError(f"{corrupt.__name__}: not caught (expected {location}: {fragment})")


# -- any value of any type anywhere: a problem line, never a crash --------------------------------------

junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def _paths(node, prefix=()):
    yield prefix
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in children:
        yield from _paths(value, prefix + (key,))


def _replace(data, path, value):
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(questionnaires(), junk, st.data())
def test_junk_in_a_questionnaire_is_an_input_error(data, value, draw):
    data = copy.deepcopy(data)
    path = draw.draw(st.sampled_from(list(_paths(data))[1:]))
    _replace(data, path, value)
    try:
        load(data)
    except InputError as err:
        assert err.problems and all(loc and msg and "\n" not in msg for _, loc, msg in err.problems)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk, st.data())
def test_junk_in_the_config_is_reported_not_raised(value, draw):
    from qclm.validation import validate_config

    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    config["models"] = str(root / config["models"])
    config["questionnaires"] = {k: str(root / v) for k, v in config["questionnaires"].items()}
    config["stimuli"]["classes"] = {k: str(root / v) for k, v in config["stimuli"]["classes"].items()}
    path = draw.draw(st.sampled_from(list(_paths(config))[1:]))
    _replace(config, path, value)
    problems = validate_config(config, "config.yaml", root / "src" / "qclm" / "schemas" / "config.schema.yaml")
    assert all(isinstance(p, str) and p for problem in problems for p in problem)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk, st.data())
def test_junk_in_a_stimulus_file_is_an_input_error(value, draw):
    from qclm.stimuli import load_stimuli

    data = {"class": "stress", "description": "d", "stimuli": [
        {"id": f"stress0{i}", "topic": "t", "long": "A long text.", "brief": "Brief."} for i in (1, 2)]}
    path = draw.draw(st.sampled_from(list(_paths(data))[1:]))
    _replace(data, path, value)
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "stress.yaml"
        file.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        try:
            load_stimuli(file, expected_class="stress")
        except InputError as err:
            assert err.problems and all(loc and msg for _, loc, msg in err.problems)


cell = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
               max_size=12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(cell, min_size=1, max_size=9).map("\t".join), max_size=4), st.booleans())
def test_junk_in_the_model_table_is_an_input_error(rows, keep_header):
    from qclm.models.table import load_model_table

    header = "name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\n" if keep_header else ""
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "models.tsv"
        file.write_text(header + "\n".join(rows) + "\n", encoding="utf-8")
        try:
            load_model_table(file)
        except InputError as err:
            assert err.problems and all(loc and msg for _, loc, msg in err.problems)
