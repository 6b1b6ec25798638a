"""`qclm validate` and the loaders behind it: every mistake a researcher makes while editing the
config, the model table, a questionnaire or a stimulus file gives one `FILE: LOCATION: PROBLEM`
line naming the file, the item (or stimulus, level, row) and the field; all problems of all files
come out in one run; the workflow stops `snakemake -n` with the same lines and no traceback."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import workflow_env

from qclm.commands import main
from qclm.models.table import load_model_table
from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli
from qclm.validation import validate_config, validate_config_file
from qclm.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
HEADER = "name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\n"

#: the one-item example of resources/questionnaires/README.md
WORRY1 = {
    "id": "worry1",
    "name": "Single-item worry probe (example)",
    "construct": "anxiety",
    "framing": "state",
    "source": "Written for the qclm project as a format example.",
    "licence": "Original text, free to use.",
    "item_wording": "written",
    "template": "Question: At this moment, do you feel {cterm}?\nAnswer:{intensifier}",
    "scale": {"name": "intensity", "levels": [
        {"label": "not at all", "weight": -2, "intensifiers": ["not at all", "not in the least"]},
        {"label": "somewhat", "weight": -1, "intensifiers": ["somewhat", "a little"]},
        {"label": "moderately", "weight": 1, "intensifiers": ["moderately", "quite a bit"]},
        {"label": "very much", "weight": 2, "intensifiers": ["very much", "extremely"]},
    ]},
    "items": [
        {"id": "W1", "ordinal": 1, "description": "Feeling worried at the moment.", "keying": "direct",
         "cterms": {"plus": ["worried", "anxious", "uneasy"], "minus": ["unworried", "carefree", "relaxed"]}},
        {"id": "W2", "ordinal": 2, "description": "Feeling calm at the moment.", "keying": "reverse",
         "cterms": {"plus": ["agitated", "tense"], "minus": ["calm", "peaceful"]}},
    ],
}

STIMULI = {
    "class": "stress",
    "description": "Two short stress texts.",
    "stimuli": [
        {"id": "stress01", "topic": "exam", "long": "I failed the exam and my heart raced.",
         "brief": "I failed the exam."},
        {"id": "stress02", "topic": "fire", "long": "Smoke filled the hall and I could not breathe.",
         "brief": "Smoke filled the hall."},
    ],
}


def case_id(value):
    """Test ids from the expected message (the edits are lambdas)."""
    if isinstance(value, list) and value:
        return value[0][:70]
    if isinstance(value, str):
        return value[:70]
    return None


def write_yaml(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def lines(load, *args, **kwargs) -> list[str]:
    """The problem lines a loader raises (it must raise)."""
    with pytest.raises(InputError) as info:
        load(*args, **kwargs)
    assert str(info.value) == "\n".join(info.value.lines)
    return info.value.lines


def q_lines(tmp_path: Path, edit) -> tuple[str, list[str]]:
    data = copy.deepcopy(WORRY1)
    edit(data)
    path = write_yaml(tmp_path / "worry1.yaml", data)
    return str(path), lines(load_questionnaire, path)


# -- questionnaires ---------------------------------------------------------------------------------

def test_example_questionnaire_loads(tmp_path):
    q = load_questionnaire(write_yaml(tmp_path / "worry1.yaml", WORRY1))
    assert [i.id for i in q.items] == ["W1", "W2"]
    assert len(q.variants()) == (6 + 4) * 8


def test_shipped_inputs_validate():
    assert validate_config_file(ROOT / "config" / "config.yaml", ROOT / "src/qclm/schemas/config.schema.yaml") == []


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "config").glob("*.yaml")))
def test_every_shipped_config_validates(name, monkeypatch):
    """Every config the repository ships passes `qclm validate` as `make run CONFIG=...` reads it (from the
    repository root): a key renamed or a file moved cannot leave one of them broken until someone runs it."""
    monkeypatch.chdir(ROOT)
    assert validate_config_file(Path("config") / name) == []


TWO_TEMPLATES = [
    {"id": "question", "template": "Question: At this moment, do you feel {cterm}?\nAnswer:{intensifier}"},
    {"id": "statement", "template": "Statement: I feel {cterm} right now.\nHow much does this apply?\nAnswer:{intensifier}"},
]


def _two_templates(d):
    d.pop("template")
    d["templates"] = copy.deepcopy(TWO_TEMPLATES)


def test_several_templates_give_variants_per_template(tmp_path):
    data = copy.deepcopy(WORRY1)
    _two_templates(data)
    data["items"][1]["templates"] = {"question": "Question: Right now, are you {cterm}?\nAnswer:{intensifier}",
                                     "statement": "Statement: Right now I am {cterm}.\nAnswer:{intensifier}"}
    q = load_questionnaire(write_yaml(tmp_path / "worry1.yaml", data))
    assert q.templates == ("question", "statement")
    assert len(q.variants()) == (6 + 4) * 8, "the first template only by default"
    both = q.variants(templates=["question", "statement"])
    assert len(both) == 2 * (6 + 4) * 8
    assert [v.template for v in both[:1]] == ["question"] and both[-1].template == "statement"
    w2 = [v for v in both if v.item_id == "W2" and v.template == "statement"]
    assert w2[0].prefix == "Statement: Right now I am agitated.\nAnswer:"
    with pytest.raises(InputError, match=r"unknown template id\(s\) \['wording3'\]"):
        q.variants(templates=["wording3"])


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d.update(templates=copy.deepcopy(TWO_TEMPLATES)),
     ["field templates: give either template (one wording) or templates (several wordings, each with an id), "
      "not both"]),
    (lambda d: d.pop("template"),
     ["field template: missing required field: give template (one wording) or templates (several wordings, each with an id)"]),
    (lambda d: (_two_templates(d), d["templates"][1].update(id="question")),
     ["template question: field id: duplicate template id (template #2)"]),
    (lambda d: (_two_templates(d), d["items"][0].update(templates={"question": "Q: {cterm}?\nA:{intensifier}",
                                                                   "statment": "S: {cterm}.\nA:{intensifier}"})),
     ["item W1: field templates.statment: unknown template id 'statment'; the file's templates are question, "
      "statement",
      "item W1: field templates: no wording for template(s) statement: an item with its own templates gives one "
      "for every template id of the file"]),
    (lambda d: (_two_templates(d), d["items"][0].update(template="Q: {cterm}?\nA:{intensifier}")),
     ["item W1: field template: this questionnaire has 2 templates (question, statement): give the item's own "
      "wording for each under templates (template id: template)"]),
    (lambda d: (_two_templates(d), d["templates"][1].update(template="S: {cterm}.\nA: {intensifier}")),
     ["template statement: template ends in whitespace before {intensifier} (the phrase brings its own leading "
      "space)"]),
    (lambda d: d.update(item_wording="copied"),
     ["field item_wording: must be one of reproduced, described, written; got 'copied'"]),
], ids=case_id)
def test_template_problems_name_the_template_or_item(tmp_path, edit, expected):
    f, got = q_lines(tmp_path, edit)
    assert got == [f"{f}: {e}" for e in expected]


def test_yaml_syntax_error_names_line_and_column(tmp_path):
    path = tmp_path / "worry1.yaml"
    path.write_text("id: worry1\nname: [unclosed\nitems: 3\n")
    assert lines(load_questionnaire, path) == [
        f"{path}: line 3, column 6: YAML syntax error: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence)"]


def test_yaml_tab_indentation(tmp_path):
    path = tmp_path / "worry1.yaml"
    path.write_text("id: worry1\nitems:\n\t- id: W1\n")
    assert lines(load_questionnaire, path) == [
        f"{path}: line 3, column 1: YAML syntax error: found character '\\t' that cannot start any token "
        "(while scanning for the next token)"]


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d["items"][0].pop("keying"), ["item W1: field keying: missing required field"]),
    (lambda d: d.pop("licence"), ["field licence: missing required field"]),
    (lambda d: d["items"][1].update(keyng="direct"),
     ["item W2: field keyng: unknown field (did you mean keying?)"]),
    (lambda d: d.update(colour="blue"),
     ["field colour: unknown field (known: id, name, published_name, construct, framing, source, licence, "
      "item_wording, template, templates, scale, items, original_scale, control)"]),
    (lambda d: d["items"][1].update(id="W1"),
     ["item W1 (#2): field id: duplicate item id (item #1 has it too)"]),
    (lambda d: d.update(template="Question: do you feel it?\nAnswer:{intensifier}"),
     ["top level: template has no {cterm} slot; it needs exactly one"]),
    (lambda d: d["items"][1].update(template="Is it {cterm} or {cterm}?\nAnswer:{intensifier}"),
     ["item W2: template has 2 {cterm} slots; it needs exactly one"]),
    (lambda d: d["items"][0].update(template="Do you feel {cterm}?\nAnswer:{intensifier} now"),
     ["item W1: template has no {intensifier} slot at its end"]),
    (lambda d: d["items"][0].update(template="Do you feel {cterm}?\nAnswer: {intensifier}"),
     ["item W1: template ends in whitespace before {intensifier} (the phrase brings its own leading space)"]),
    (lambda d: d["items"][0].update(template="Do you feel {cterm} {today}?\nAnswer:{intensifier}"),
     ["item W1: template has a { or } outside the slots (only {cterm} and {intensifier} are allowed)"]),
    (lambda d: d["items"][0]["cterms"].update(plus=[]), ["item W1: field cterms.plus: must not be empty"]),
    (lambda d: d["items"][0]["cterms"].pop("minus"), ["item W1: field cterms.minus: missing required field"]),
    (lambda d: d["items"][0]["cterms"]["minus"].append("worried"),
     ["item W1: field cterms: term 'worried' is in both plus (S+) and minus (S-)"]),
    (lambda d: d["items"][0]["cterms"]["plus"].append("uneasy"),
     ["item W1: field cterms.plus: term 'uneasy' is listed twice"]),
    (lambda d: d["items"][0]["cterms"]["plus"].append(" jumpy"),
     ["item W1: field cterms.plus: term ' jumpy' has leading or trailing space"]),
    (lambda d: d["items"][0]["cterms"]["plus"].append(""),
     ["item W1: field cterms.plus, entry 4: must not be empty"]),
    (lambda d: d["scale"].update(levels=d["scale"]["levels"][:1]),
     ["field scale.levels: needs at least 2 entries, got 1"]),
    (lambda d: d["scale"]["levels"][1].update(weight="abc"),
     ["level somewhat: field weight: must be a number, got 'abc'"]),
    (lambda d: d["scale"]["levels"][1].update(weight=None),
     ["level somewhat: field weight: must be a number, got nothing (empty)"]),
    (lambda d: d["scale"]["levels"][1].update(weight=float("nan")),
     ["level somewhat: field weight: must be a finite number, got nan"]),
    (lambda d: d["scale"]["levels"][2].update(weight=-1),
     ["level moderately: field weight: weight -1 repeats level somewhat"]),
    (lambda d: d["scale"]["levels"][2].update(label="somewhat"),
     ["level somewhat (#3): field label: repeats an earlier level's label"]),
    (lambda d: d["scale"]["levels"][3]["intensifiers"].append("a little"),
     ["level very much: field intensifiers: phrase 'a little' appears twice"]),
    (lambda d: d["scale"]["levels"][0].update(intensifiers=[]),
     ["level not at all: field intensifiers: must not be empty"]),
    (lambda d: d.update(framing="mood"), ["field framing: must be one of state, trait; got 'mood'"]),
    (lambda d: d.update(id="worry2"), ["field id: id 'worry2' differs from the file name 'worry1'"]),
    (lambda d: d["items"][0].update(id="W 1"),
     ["item W 1: field id: 'W 1' is not a safe name: use letters, digits, '_', '.', '-', starting with a "
      "letter or digit"]),
    (lambda d: d["items"][0].update(ordinal="first"),
     ["item W1: field ordinal: must be an integer, got 'first'"]),
    (lambda d: d.update(items={"id": "W1"}), ["field items: must be a list, got {\"id\": \"W1\"}"]),
    # invisible text: a term of zero-width spaces, a control character in a template or a phrase
    (lambda d: d["items"][0]["cterms"]["plus"].append("\u200b\u200b"),
     ["item W1: field cterms.plus, entry 4: has only invisible characters (U+200B (ZERO WIDTH SPACE)): it is "
      "empty to a reader, not to a model"]),
    (lambda d: d["items"][1].update(template="Do you feel\x00 {cterm}?\nAnswer:{intensifier}"),
     ["item W2: field template: has the control character U+0000 (NULL) at character 12: remove it"]),
    (lambda d: d["scale"]["levels"][0]["intensifiers"].append("not\x1b[0m at all"),
     ["level not at all: field intensifiers, entry 3: has the control character U+001B (ESCAPE) at character 4: "
      "remove it"]),
    (lambda d: d["items"][0].update(description="\u2060\ufeff "),
     ["item W1: field description: has only invisible characters (U+2060 (WORD JOINER)): it is empty to a "
      "reader, not to a model"]),
    # the licence: described items carry no original wording (written ones may carry the statements written for qclm)
    (lambda d: (d.update(item_wording="described"), d["items"][1].update(text="I feel calm.")),
     ["item W2: field text: item_wording is described: the original wording is not reproduced (paraphrase it in "
      "description); remove text"]),
], ids=case_id)
def test_questionnaire_problem(tmp_path, edit, expected):
    file, got = q_lines(tmp_path, edit)
    assert got == [f"{file}: {e}" for e in expected]


def test_questionnaire_reports_all_problems_at_once(tmp_path):
    """Schema violations do not hide the rules checked on the rest of the file."""
    def edit(d):
        d["items"][0].pop("description")
        d["items"][1]["cterms"]["minus"].append("tense")
        d["scale"]["levels"][3]["weight"] = 1
        d["template"] = "Do you feel {cterm}?\nAnswer:{intensifier}."
    file, got = q_lines(tmp_path, edit)
    assert got == [
        f"{file}: item W1: field description: missing required field",
        f"{file}: top level: template has no {{intensifier}} slot at its end",
        f"{file}: level very much: field weight: weight 1 repeats level moderately",
        f"{file}: item W2: field cterms: term 'tense' is in both plus (S+) and minus (S-)",
    ]


def test_questionnaire_not_a_mapping(tmp_path):
    path = tmp_path / "worry1.yaml"
    path.write_text("- just\n- a list\n")
    assert lines(load_questionnaire, path) == [
        f"{path}: top level: expected a mapping with id, name, template, scale, items"]


def test_missing_file(tmp_path):
    assert lines(load_questionnaire, tmp_path / "nope.yaml") == [f"{tmp_path / 'nope.yaml'}: file: does not exist"]


# -- stimuli --------------------------------------------------------------------------------------

@pytest.mark.parametrize("edit, expected", [
    (lambda d: d["stimuli"][0].update(brief=""), ["stimulus stress01: field brief: must not be empty or only whitespace"]),
    (lambda d: d["stimuli"][0].update(long="   \n "),
     ["stimulus stress01: field long: must not be empty or only whitespace"]),
    (lambda d: d["stimuli"][1].update(long=None),
     ["stimulus stress02: field long: must be a string, got nothing (empty)"]),
    (lambda d: d["stimuli"][1].update(id="stress01"),
     ["stimulus stress01 (#2): field id: duplicate stimulus id (stimulus #1 has it too)"]),
    (lambda d: d.update({"class": "vanilla"}),
     ["field class: 'vanilla' is the condition without a stimulus; name the class otherwise"]),
    (lambda d: d.update({"class": "stress+calm"}),
     ["field class: 'stress+calm' is not a safe name: use letters, digits, '_', '.', '-', starting with a "
      "letter or digit"]),
    (lambda d: d["stimuli"][0].pop("brief"), ["stimulus stress01: field brief: missing required field"]),
    (lambda d: d["stimuli"][0].update(short="x"),
     ["stimulus stress01: field short: unknown field (known: id, topic, long, brief)"]),
    (lambda d: d["stimuli"][0].update(long="Think of {cterm}."), ["stimulus stress01: field long: text contains { or }"]),
    (lambda d: d.update(stimuli=[]), ["field stimuli: must not be empty"]),
    (lambda d: d["stimuli"][1].update(brief="\u200b\u200c\u200d"),
     ["stimulus stress02: field brief: has only invisible characters (U+200B (ZERO WIDTH SPACE)): it is empty to "
      "a reader, not to a model"]),
    (lambda d: d["stimuli"][0].update(long="My heart raced.\x07\r\nThen nothing."),
     ["stimulus stress01: field long: has the control character U+0007 (BELL) at character 16: remove it"]),
    (lambda d: d["stimuli"][0].update(topic="\ud83d"),
     ["stimulus stress01: field topic: has a lone surrogate U+D83D at character 1: not a character (broken "
      "UTF-16)"]),
], ids=case_id)
def test_stimulus_problem(tmp_path, edit, expected):
    data = copy.deepcopy(STIMULI)
    edit(data)
    path = write_yaml(tmp_path / "stress.yaml", data)
    assert lines(load_stimuli, path) == [f"{path}: {e}" for e in expected]


def test_stimulus_class_must_match_its_use(tmp_path):
    path = write_yaml(tmp_path / "neutral.yaml", STIMULI)
    assert lines(load_stimuli, path, expected_class="neutral") == [
        f"{path}: field class: is 'stress' but the config uses this file for 'neutral'"]


# -- the model table --------------------------------------------------------------------------------

@pytest.mark.parametrize("row, expected", [
    ("bad/name\torg/model\t\t1\tbase\tf\tauto", "line 2 (model bad/name): column name: 'bad/name' is not "
     "filesystem-safe: use letters, digits, '_', '.', '-', starting with a letter or digit"),
    ("m1\tnot a hub id\t\t1\tbase\tf\tauto",
     "line 2 (model m1): column source: 'not a hub id' is neither a hub id (org/name), an existing path nor "
     "embedded:NAME"),
    ("m1\t/no/such/dir\t\t1\tbase\tf\tauto", "line 2 (model m1): column source: path /no/such/dir does not exist"),
    ("m1\tmodels/x.gguf\t\t1\tbase\tf\tauto",
     "line 2 (model m1): column source: path models/x.gguf does not exist"),
    ("m1\tembedded:gpt5\t\t1\tbase\tf\tauto", "line 2 (model m1): column source: unknown embedded model "
     "'embedded:gpt5'; known: embedded:gemma3-270m, embedded:smollm2-135m-instruct"),
    ("m1\torg/model\t\t-1\tbase\tf\tauto", "line 2 (model m1): column params_b: must be a positive number, got '-1'"),
    ("m1\torg/model\t\t0\tbase\tf\tauto", "line 2 (model m1): column params_b: must be a positive number, got '0'"),
    ("m1\torg/model\t\tseven\tbase\tf\tauto",
     "line 2 (model m1): column params_b: must be a positive number, got 'seven'"),
    ("m1\torg/model\t\tinf\tbase\tf\tauto", "line 2 (model m1): column params_b: must be a positive number, got 'inf'"),
    ("m1\torg/model\t\tnan\tbase\tf\tauto", "line 2 (model m1): column params_b: must be a positive number, got 'nan'"),
    ("m1\torg/model\t\t1\tchat\tf\tauto", "line 2 (model m1): column type: must be base or instruct; got 'chat'"),
    ("m1\torg/model\t\t1\tbase\tf\tfp8", "line 2 (model m1): column dtype: must be one of auto, float32, "
     "bfloat16, float16; got 'fp8'"),
    ("m1\torg/model\t\t1\tbase", "line 2 (model m1): column family: missing (fewer values than the header has "
     "columns; columns are separated by tabs)"),
    ("m1 org/model 1 base f auto", "line 2 (model m1 org/model 1 base f auto): column source: missing (fewer "
     "values than the header has columns; columns are separated by tabs)"),
], ids=case_id)
def test_model_table_problem(tmp_path, row, expected):
    path = tmp_path / "models.tsv"
    path.write_text(HEADER + row + "\n")
    assert lines(load_model_table, path)[0] == f"{path}: {expected}"


def test_model_table_repeated_name_and_flags(tmp_path):
    path = tmp_path / "models.tsv"
    path.write_text("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\ttrust_remote_code\n"
                    "# a comment line\n"
                    "m1\torg/a\t\t1\tbase\tf\tauto\t\n"
                    "m1\torg/b\t\t2\tbase\tf\tauto\tmaybe\n"
                    "m2\torg/c\t\t2\tbase\tf\tauto\tyes\n"
                    "m1\torg/d\t\t2\tbase\tf\tauto\tno\n")
    assert lines(load_model_table, path) == [
        f"{path}: line 4 (model m1): column trust_remote_code: must be true or false (or empty); got 'maybe'",
        f"{path}: line 6 (model m1): column name: repeats the model on line 3",
    ]


def test_model_table_header(tmp_path):
    path = tmp_path / "models.tsv"
    path.write_text("name\tsource\tparams_b\ttype\tfamily\tdtype\tlicense\nm\torg/m\t1\tbase\tf\tauto\tMIT\n")
    assert lines(load_model_table, path) == [f"{path}: line 1 (header): missing column(s) ['revision']"]


def test_model_table_accepts_hub_ids_paths_and_embedded(tmp_path):
    (tmp_path / "local").mkdir()
    path = tmp_path / "models.tsv"
    path.write_text(HEADER + f"a\torg/name\tmain\t7\tinstruct\tf\tbfloat16\nb\t{tmp_path / 'local'}\t\t0.5\tbase\tf\t\n"
                    "c\tembedded:gemma3-270m\tQ4_K_M\t0.268\tbase\tgemma3\tfloat32\n")
    models = load_model_table(path)
    assert [(m.name, m.kind, m.trust_remote_code, m.allow_pickle) for m in models.values()] == [
        ("a", "hub", False, False), ("b", "local", False, False), ("c", "embedded", False, False)]


# -- the config and everything it names, in one run ----------------------------------------------------

def make_config(tmp_path: Path, **changes) -> dict:
    """A valid config in tmp_path (relative paths, as in config/config.yaml), changed by `changes`."""
    write_yaml(tmp_path / "q" / "worry1.yaml", WORRY1)
    write_yaml(tmp_path / "s" / "stress.yaml", STIMULI)
    write_yaml(tmp_path / "s" / "neutral.yaml", {**STIMULI, "class": "neutral", "stimuli": [
        {**s, "id": s["id"].replace("stress", "neutral")} for s in STIMULI["stimuli"]]})
    (tmp_path / "models.tsv").write_text(HEADER + "m1\torg/model\t\t1\tbase\tf\tauto\n")
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config.update(models="models.tsv", questionnaires={"worry1": "q/worry1.yaml"})
    config["stimuli"]["classes"] = {"stress": "s/stress.yaml", "neutral": "s/neutral.yaml"}
    config.update(changes)
    return config


def check(tmp_path, monkeypatch, config) -> list[str]:
    monkeypatch.chdir(tmp_path)
    write_yaml(tmp_path / "config.yaml", config)
    problems = validate_config_file("config.yaml", ROOT / "src/qclm/schemas/config.schema.yaml")
    return [f"{f}: {loc}: {msg}" for f, loc, msg in problems]


def test_valid_config(tmp_path, monkeypatch):
    assert check(tmp_path, monkeypatch, make_config(tmp_path)) == []


@pytest.mark.parametrize("edit, expected", [
    (lambda c: c.update(limit_item=2), ["config.yaml: field limit_item: unknown field (did you mean limit_items?)"]),
    (lambda c: c.pop("conditions"), ["config.yaml: field conditions: missing required field"]),
    (lambda c: c.update(conditions=["vanilla", "stres"], contrasts=[["vanilla", "stres"]]),
     ["config.yaml: field conditions, entry 2: 'stres' names class 'stres', which has no stimulus file (add it "
      "under stimuli.classes; classes: stress, neutral)"]),
    (lambda c: c.update(conditions=["vanilla", "stress+"], contrasts=[["vanilla", "stress+"]]),
     ["config.yaml: field conditions, entry 2: 'stress+' is not a condition: vanilla, a class name, or class "
      "names joined by + (each letters, digits, '_', '.', '-', starting with a letter or digit)"]),
    (lambda c: c.update(conditions=["vanilla", "vanilla+stress"], contrasts=[["vanilla", "vanilla+stress"]]),
     ["config.yaml: field conditions, entry 2: 'vanilla+stress': vanilla is the item alone and cannot be combined "
      "with a class"]),
    (lambda c: c.update(contrasts=[["vanilla", "stress"], ["vanilla", "calm"]]),
     ["config.yaml: field contrasts, entry 2: condition 'calm' is not declared (conditions: vanilla, stress, "
      "neutral)"]),
    (lambda c: c.update(contrasts=[["vanilla", "stress"], ["vanilla", "stress"]]),
     ["config.yaml: field contrasts, entry 2: repeats entry 1 (vanilla vs stress)"]),
    (lambda c: c.update(contrasts=[["stress", "stress"]]),
     ["config.yaml: field contrasts, entry 1: compares condition 'stress' with itself"]),
    (lambda c: c.update(contrasts=[["vanilla"]]),
     ["config.yaml: field contrasts, entry 1: needs at least 2 entries, got 1"]),
    (lambda c: c.update(stimulus_types=["stress", "calm"]),
     ["config.yaml: field stimulus_types, entry 2: condition 'calm' is not declared (conditions: vanilla, stress, "
      "neutral)"]),
    (lambda c: c.update(stimulus_types=["vanilla", "stress"]),
     ["config.yaml: field stimulus_types, entry 1: vanilla has no stimulus: a stimulus type is a condition with "
      "stimuli"]),
    (lambda c: c.update(stimulus_types=["stress"]),
     ["config.yaml: field stimulus_types: needs at least 2 entries, got 1"]),
    (lambda c: (c.update(conditions=["vanilla", "neutral+stress"]), c.pop("contrasts")),
     ["config.yaml: field contrasts: missing: none of the paper's contrasts (vanilla vs stress, vanilla vs "
      "neutral, neutral vs stress) applies to these conditions; list the contrasts to analyse as [first, second] "
      "pairs"]),
    (lambda c: c["engine"].update(method="fast"),
     ["config.yaml: field engine.method: must be one of auto, prefix-tree, full; got 'fast'"]),
    (lambda c: c["engine"].update(pack_tokens="lots"),
     ["config.yaml: field engine.pack_tokens: must be an integer of at least 1 or 'auto'; got 'lots'"]),
    (lambda c: c["engine"].update(device="gpu"),
     ["config.yaml: field engine.device: 'gpu' does not match the pattern ^(auto|cpu|mps|cuda(:[0-9]+)?)$"]),
    (lambda c: c.update(limit_items=0), ["config.yaml: field limit_items: must be at least 1, got 0"]),
    (lambda c: c["analysis"].update(bootstrap="many"),
     ["config.yaml: field analysis.bootstrap: must be an integer, got 'many'"]),
    (lambda c: c["stimuli"].update(anxious="s/stress.yaml"),
     ["config.yaml: field stimuli.anxious: unknown field; a stimulus class goes under stimuli.classes "
      "(anxious: FILE); other keys: version, separator, classes"]),
    (lambda c: c["stimuli"]["classes"].pop("stress"),
     ["config.yaml: field conditions, entry 2: 'stress' names class 'stress', which has no stimulus file (add it "
      "under stimuli.classes; classes: neutral)"]),
    (lambda c: c["stimuli"]["classes"].update(stress="s/neutral.yaml"),
     ["s/neutral.yaml: field class: is 'neutral' but the config uses this file for 'stress'"]),
    (lambda c: c["stimuli"].update(stress="s/stress.yaml"),
     ["config.yaml: field stimuli.stress: class 'stress' is also under stimuli.classes; give it once"]),
    (lambda c: c["stimuli"]["classes"].update({"a b": "s/stress.yaml"}),
     ["config.yaml: field stimuli.classes: key 'a b' is not a safe name: use letters, digits, '_', '.', '-', "
      "starting with a letter or digit",
      "s/stress.yaml: field class: is 'stress' but the config uses this file for 'a b'"]),
    (lambda c: c.update(models="nope.tsv"), ["config.yaml: field models: file nope.tsv does not exist"]),
    (lambda c: c.update(questionnaires={"worry1": "q"}), ["config.yaml: field questionnaires.worry1: q is a "
                                                          "directory, not a file"]),
    (lambda c: c.update(questionnaires={"worry": "q/worry1.yaml"}),
     ["config.yaml: field questionnaires.worry: q/worry1.yaml has id 'worry1'; the key must be the same "
      "('worry1: q/worry1.yaml')"]),
    (lambda c: c.update(questionnaires={"a b": "q/worry1.yaml"}),
     ["config.yaml: field questionnaires: key 'a b' is not a safe name: use letters, digits, '_', '.', '-', "
      "starting with a letter or digit",
      "config.yaml: field questionnaires.a b: q/worry1.yaml has id 'worry1'; the key must be the same "
      "('worry1: q/worry1.yaml')"]),
    (lambda c: c.update(questionnaires={}), ["config.yaml: field questionnaires: must not be empty"]),
    # numbers are finite where a number is expected (JSON Schema's minimum lets NaN and infinity through)
    (lambda c: c["equations"].update(normalization_epsilon=float("nan")),
     ["config.yaml: field equations.normalization_epsilon: must be a finite number, got nan"]),
    (lambda c: c["equations"].update(normalization="sinkhorn"),
     ["config.yaml: field equations.normalization: must be one of one_pass, iterated; got 'sinkhorn'"]),
    (lambda c: c["engine"].update(batch_size=float("inf")),
     ["config.yaml: field engine.batch_size: must be a finite number, got inf"]),
    (lambda c: c["analysis"].update(size_classes=[3, float("-inf")]),
     ["config.yaml: field analysis.size_classes, entry 2: must be a finite number, got -inf"]),
    # what qclm analyze refused only after all scoring
    (lambda c: c["analysis"].update(size_classes=[8, 3]),
     ["config.yaml: field analysis.size_classes: boundaries must be increasing, got [8, 3]"]),
    (lambda c: c["analysis"].update(size_classes=[0, 3]),
     ["config.yaml: field analysis.size_classes, entry 1: must be more than 0, got 0"]),
    (lambda c: c["analysis"].update(seed=-1), ["config.yaml: field analysis.seed: must be at least 0, got -1"]),
    (lambda c: c["analysis"].update(heatmap_item="W9"),
     ["config.yaml: field analysis.heatmap_item: 'W9' is not an item the run scores; write ITEM or "
      "QUESTIONNAIRE:ITEM"]),
    (lambda c: c["analysis"].update(heatmap_item="worry2:W1"),
     ["config.yaml: field analysis.heatmap_item: 'worry2:W1': no questionnaire 'worry2' (questionnaires: worry1)"]),
    (lambda c: (c.update(limit_items=1), c["analysis"].update(heatmap_item="worry1:W2")),
     ["config.yaml: field analysis.heatmap_item: 'worry1:W2': questionnaire worry1 scores no item 'W2' "
      "(limit_items: 1)"]),
    (lambda c: c.update(conditions=["stress", "neutral"], contrasts=[["neutral", "stress"]]),
     ["config.yaml: field conditions: must include vanilla: the item alone is the baseline of the z-scores and "
      "of the analysis (add it, e.g. [vanilla, stress])"]),
    (lambda c: c["engine"].update(answer_preamble="My answer is "),
     ["config.yaml: field engine.answer_preamble: 'My answer is ' ends in whitespace: the intensifier brings its "
      "own leading space, so the model would read two"]),
    (lambda c: c["stimuli"].update(separator="\n\x0c"),
     ["config.yaml: field stimuli.separator: has the control character U+000C (FORM FEED) at character "
      "2: remove it"]),
], ids=case_id)
def test_config_problem(tmp_path, monkeypatch, edit, expected):
    config = make_config(tmp_path)
    edit(config)
    assert check(tmp_path, monkeypatch, config) == expected


def test_heatmap_item_in_two_questionnaires_needs_its_questionnaire(tmp_path, monkeypatch):
    config = make_config(tmp_path)
    write_yaml(tmp_path / "q" / "worry2.yaml", {**WORRY1, "id": "worry2"})
    config["questionnaires"]["worry2"] = "q/worry2.yaml"
    config["analysis"]["heatmap_item"] = "W1"
    assert check(tmp_path, monkeypatch, config) == [
        "config.yaml: field analysis.heatmap_item: 'W1' is an item of worry1, worry2: write QUESTIONNAIRE:ITEM"]
    config["analysis"]["heatmap_item"] = "worry2:W1"
    assert check(tmp_path, monkeypatch, config) == []


def test_a_floors_file_that_is_not_there_or_not_a_floors_table_is_named(tmp_path, monkeypatch):
    """analysis.floors (the calibrated floors of the report's first page): a missing file is the config's field, a
    table without a floors file's columns is the file's header; null turns them off; the default is the shipped
    file, read from the package where the working directory has none."""
    config = make_config(tmp_path)
    config["analysis"]["floors"] = "no/floors.csv"
    assert check(tmp_path, monkeypatch, config) == [
        "config.yaml: field analysis.floors: file no/floors.csv does not exist"]
    (tmp_path / "f.csv").write_text("# a comment line\nbase_model,kind,instrument,metric,tier,plant\n")
    config["analysis"]["floors"] = "f.csv"
    problems = check(tmp_path, monkeypatch, config)
    assert len(problems) == 1 and problems[0].startswith(
        "f.csv: column status: missing from the header (missing: status, dose, effect, ") and problems[0].endswith(
        "qclm_version, source; qclm floors writes a floors file)")
    for value in (None, "resources/calibration/floors.csv"):
        config["analysis"]["floors"] = value
        assert check(tmp_path, monkeypatch, config) == []


def test_quantization_on_a_cpu_run(tmp_path, monkeypatch):
    """A quantized model (bitsandbytes) needs CUDA: with engine.device cpu its job could only fail."""
    config = make_config(tmp_path)
    (tmp_path / "models.tsv").write_text(HEADER.rstrip("\n") + "\tquantization\n"
                                         "m1\torg/model\t\t1\tbase\tf\tauto\t\nm2\torg/big\t\t70\tbase\tf\tauto\t4bit\n")
    assert check(tmp_path, monkeypatch, config) == []  # device auto: decided where the job runs
    config["engine"]["device"] = "cpu"
    assert check(tmp_path, monkeypatch, config) == [
        "models.tsv: line 3 (model m2): column quantization: 4bit needs a CUDA GPU (bitsandbytes), and "
        "engine.device is cpu in config.yaml: leave quantization empty, or run on cuda"]


def test_the_4bit_type_double_quantization_and_compute_dtype_are_columns_in_the_cell_key(tmp_path):
    """nf4 or fp4, nested quantization and the compute dtype (issue 38, item 5): columns of the model table, in the
    row's identity (the cell key and the provenance are made from it) only where set, so a row of before keeps its
    cells; `4bit` stays transformers' default type (fp4); a setting that applies to 4-bit alone is refused
    elsewhere, naming the column. Loading itself needs CUDA (bitsandbytes): refused on the CPU as before."""
    import torch

    from qclm.models.loading import bnb_config, bnb_settings

    table = tmp_path / "models.tsv"
    table.write_text(HEADER.rstrip("\n") + "\tquantization\tdouble_quant\tcompute_dtype\n"
                     "old\torg/big\t\t70\tbase\tf\tauto\t4bit\t\t\n"
                     "new\torg/big\t\t70\tbase\tf\tauto\tnf4\ttrue\tbfloat16\n"
                     "eight\torg/big\t\t70\tbase\tf\tauto\t8bit\t\t\n")
    rows = load_model_table(table)
    old, new, eight = rows["old"], rows["new"], rows["eight"]
    assert "double_quant" not in old.as_row() and "compute_dtype" not in old.as_row()
    assert new.as_row()["double_quant"] == "true" and new.as_row()["compute_dtype"] == "bfloat16"
    assert bnb_settings(old, "float16") == {"load_in_4bit": True, "bnb_4bit_quant_type": "fp4",
                                            "bnb_4bit_use_double_quant": False, "bnb_4bit_compute_dtype": "float16"}
    assert bnb_settings(new, "float16") == {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                                            "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16"}
    assert bnb_settings(eight, "float16") == {"load_in_8bit": True}
    built = bnb_config(bnb_settings(new, "float16"))  # what load_model passes on a GPU
    assert (built.bnb_4bit_quant_type, built.bnb_4bit_use_double_quant, built.bnb_4bit_compute_dtype) == (
        "nf4", True, torch.bfloat16) and built.load_in_4bit
    assert bnb_config(bnb_settings(eight, "float16")).load_in_8bit
    table.write_text(HEADER.rstrip("\n") + "\tquantization\tdouble_quant\tcompute_dtype\n"
                     "a\torg/big\t\t70\tbase\tf\tauto\t8bit\ttrue\t\n"
                     "b\torg/big\t\t70\tbase\tf\tauto\t\t\tfloat16\n"
                     "c\torg/big\t\t70\tbase\tf\tauto\tint4\tmaybe\tint8\n")
    with pytest.raises(InputError) as err:
        load_model_table(table)
    lines = [f"{loc}: {msg}" for _, loc, msg in err.value.problems]
    assert lines == [
        "line 2 (model a): column double_quant: applies to a 4-bit quantization (4bit, nf4, fp4); this row's "
        "quantization is 8bit: leave it empty",
        "line 3 (model b): column compute_dtype: applies to a 4-bit quantization (4bit, nf4, fp4); this row's "
        "quantization is none: leave it empty",
        "line 4 (model c): column quantization: must be empty, none, 8bit or a 4-bit type (4bit, nf4, fp4); got 'int4'",
        "line 4 (model c): column double_quant: must be true or false (or empty); got 'maybe'",
        "line 4 (model c): column compute_dtype: must be one of bfloat16, float16, float32 (or empty: the row's dtype "
        "as resolved); got 'int8'"], lines


def test_any_class_name_composed_conditions_and_the_shorthand(tmp_path, monkeypatch):
    config = make_config(tmp_path)
    write_yaml(tmp_path / "s" / "calm.yaml", {**STIMULI, "class": "calm", "stimuli": [
        {**s, "id": s["id"].replace("stress", "calm")} for s in STIMULI["stimuli"]]})
    config["stimuli"]["classes"]["calm"] = "s/calm.yaml"
    config.update(conditions=["vanilla", "stress", "calm", "stress+calm"],
                  contrasts=[["vanilla", "stress"], ["stress", "stress+calm"]])
    assert check(tmp_path, monkeypatch, config) == []
    # the old form: classes stress and neutral directly under stimuli
    old = make_config(tmp_path)
    old["stimuli"] = {"version": "long", "stress": "s/stress.yaml", "neutral": "s/neutral.yaml"}
    old.pop("contrasts")
    assert check(tmp_path, monkeypatch, old) == []


def test_composed_condition_whose_classes_differ_in_stimulus_count(tmp_path, monkeypatch):
    config = make_config(tmp_path)
    write_yaml(tmp_path / "s" / "calm.yaml", {**STIMULI, "class": "calm", "stimuli": [
        {**STIMULI["stimuli"][0], "id": "calm01"}]})
    config["stimuli"]["classes"]["calm"] = "s/calm.yaml"
    config.update(conditions=["vanilla", "stress", "stress+calm"], contrasts=[["stress", "stress+calm"]])
    assert check(tmp_path, monkeypatch, config) == [
        "config.yaml: field conditions, entry 3: 'stress+calm' pairs its classes' stimuli by position, but they "
        "differ in number: stress has 2, calm has 1"]
    config["limit_stimuli"] = 1  # the first stimulus of each class: now they pair
    assert check(tmp_path, monkeypatch, config) == []


def test_vanilla_only_needs_no_stimulus_files(tmp_path, monkeypatch):
    config = make_config(tmp_path, conditions=["vanilla"])
    config.pop("contrasts")
    config["stimuli"] = {"version": "long"}
    assert check(tmp_path, monkeypatch, config) == []


def test_all_problems_of_all_files_in_one_run(tmp_path, monkeypatch):
    config = make_config(tmp_path, conditions=["vanilla", "stress", "neutral"])
    config["questionnaires"]["other"] = "q/other.yaml"
    config["engine"]["boundary"] = "merge"
    (tmp_path / "q" / "other.yaml").write_text("id: other\nitems: [\n")
    (tmp_path / "models.tsv").write_text(HEADER + "m1\torg/model\t\t1\tbase\tf\tauto\nm1\torg/x\t\t2\tbase\tf\tauto\n")
    broken = copy.deepcopy(WORRY1)
    broken["items"][1]["id"] = "W1"
    write_yaml(tmp_path / "q" / "worry1.yaml", broken)
    stim = copy.deepcopy(STIMULI)
    stim["stimuli"][1]["brief"] = " "
    write_yaml(tmp_path / "s" / "stress.yaml", stim)
    assert check(tmp_path, monkeypatch, config) == [
        "config.yaml: field engine.boundary: must be one of error, split, first_divergence; got 'merge'",
        "models.tsv: line 3 (model m1): column name: repeats the model on line 2",
        "q/worry1.yaml: item W1 (#2): field id: duplicate item id (item #1 has it too)",
        "q/other.yaml: line 3, column 1: YAML syntax error: expected the node content, but found '<stream end>' "
        "(while parsing a flow node)",
        "s/stress.yaml: stimulus stress02: field brief: must not be empty or only whitespace",
    ]


def test_config_not_a_mapping():
    assert validate_config(["a"], "c.yaml", {}) == [
        ("c.yaml", "top level", "expected a mapping (key: value) with models, stimuli, conditions, "
         "questionnaires or probes, engine, equations; got list")]


# -- the command line ----------------------------------------------------------------------------

def test_cli_ok(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_yaml(tmp_path / "c.yaml", make_config(tmp_path))
    assert main(["validate", "--config", "c.yaml", "--schema", str(ROOT / "src/qclm/schemas/config.schema.yaml")]) == 0
    assert capsys.readouterr().out == "c.yaml: ok\n"


def test_cli_default_config_of_the_repository(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["validate"]) == 0
    assert capsys.readouterr().out == "config/config.yaml: ok\n"


def test_cli_problems_exit_2_one_line_each(tmp_path):
    config = make_config(tmp_path)
    config["equations"]["aggregation"] = "mean"
    (tmp_path / "models.tsv").write_text(HEADER + "m;rm -rf\torg/model\t\t1\tbase\tf\tauto\n")
    write_yaml(tmp_path / "c.yaml", config)
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "validate", "--config", "c.yaml", "--schema",
                          str(ROOT / "src/qclm/schemas/config.schema.yaml")],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stdout.splitlines() == [
        "c.yaml: field equations.aggregation: must be one of harmonic, geometric, product; got 'mean'",
        "models.tsv: line 2 (model m;rm -rf): column name: 'm;rm -rf' is not filesystem-safe: use letters, "
        "digits, '_', '.', '-', starting with a letter or digit",
    ]
    assert run.stderr == "qclm validate: 2 problems\n"


def test_cli_yaml_error_in_config(tmp_path):
    (tmp_path / "c.yaml").write_text("models: models.tsv\nengine:\n  method: auto\n boundary: error\n")
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "validate", "--config", "c.yaml"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (2, "c.yaml: line 4, column 2: YAML syntax error: expected <block end>, "
                                               "but found '<block mapping start>' (while parsing a block mapping)\n")


# -- the workflow: snakemake -n fails fast with the same lines, no traceback ----------------------------

def test_snakemake_dry_run_prints_the_problems(tmp_path):
    config = make_config(tmp_path)
    config["conditions"] = ["vanilla", "stress", "panic"]
    config["contrasts"] = [["vanilla", "stress"], ["vanilla", "panic"]]
    broken = copy.deepcopy(WORRY1)
    broken["items"][0]["template"] = "Do you feel {cterm}?\nAnswer:{intensifier} now"
    write_yaml(tmp_path / "q" / "worry1.yaml", broken)
    write_yaml(tmp_path / "config.yaml", config)
    # a key given twice: Snakemake's reader keeps the last value; the workflow reads the file again and names it
    text = (tmp_path / "config.yaml").read_text()
    (tmp_path / "config.yaml").write_text(text + f"models: {config['models']}\n")
    first = next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith("models:"))
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--configfile", str(tmp_path / "config.yaml"), "--cores", "1"],
                         capture_output=True, text=True, timeout=120, env=workflow_env())
    assert run.returncode == 1
    out = run.stdout + run.stderr
    assert "Traceback" not in out
    assert out.rstrip().splitlines()[-4:] == [
        "qclm: invalid input (run `qclm validate` to check again)",
        f"{tmp_path / 'config.yaml'}: line {len(text.splitlines()) + 1}, column 1: key 'models' is given twice "
        f"in one mapping (first on line {first}); YAML keeps only the last value: give it once",
        "q/worry1.yaml: item W1: template has no {intensifier} slot at its end",
        f"{tmp_path / 'config.yaml'}: field conditions, entry 3: 'panic' names class 'panic', which has no stimulus "
        "file (add it under stimuli.classes; classes: stress, neutral)",
    ]
