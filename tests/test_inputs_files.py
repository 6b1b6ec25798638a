"""The readers every file goes through (qclm.inputs): a key given twice in any YAML file the project reads, a
column given twice in a table, a hostile or broken YAML file, a byte-order mark, a raw control character: each
is one FILE: LOCATION: PROBLEM line (line and column where the file has them), never a silently kept last
value, a crash, or a message built from megabytes of text."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_validate import HEADER, STIMULI, WORRY1, lines, make_config, write_yaml

from qclm import inputs
from qclm.validation import validate_config_file
from qclm.inputs import ALIAS_EXPANSION_LIMIT, MAX_PROBLEM_CHARS, read_yaml
from qclm.inputs import messages
from qclm.models.table import load_model_table
from qclm.probes.likert.analysis.score_tables import load_item_scores
from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "src/qclm/schemas/config.schema.yaml"


# -- keys given twice: every YAML file, named with both lines -------------------------------------------------

def test_a_second_items_key_is_an_error_not_a_one_item_questionnaire(tmp_path):
    path = write_yaml(tmp_path / "worry1.yaml", WORRY1)
    text = path.read_text()
    path.write_text(text + "items:\n- {id: X, ordinal: 1, description: d, keying: direct, cterms: {plus: [a], "
                    "minus: [b]}}\n")
    first = text.splitlines().index("items:") + 1
    last = len(text.splitlines()) + 1
    assert lines(load_questionnaire, path) == [
        f"{path}: line {last}, column 1: key 'items' is given twice in one mapping (first on line {first}); YAML "
        "keeps only the last value: give it once"]


def test_keys_given_twice_in_a_stimulus_file_and_a_config(tmp_path, monkeypatch):
    stim = write_yaml(tmp_path / "stress.yaml", STIMULI)
    stim.write_text(stim.read_text().replace("  topic: exam\n", "  topic: exam\n  brief: Again.\n"))
    [line] = lines(load_stimuli, stim)
    assert line.startswith(f"{stim}: line ") and "key 'brief' is given twice in one mapping (first on line" in line
    # the config: a second contrasts: would replace the first; qclm validate names it (all of them)
    config = make_config(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert "results" not in config
    text = yaml.safe_dump(config, sort_keys=False) + "contrasts:\n- [vanilla, neutral]\nresults: r1\nresults: r2\n"
    (tmp_path / "c.yaml").write_text(text)
    n = len(text.splitlines())
    got = validate_config_file("c.yaml", SCHEMA)
    assert [(loc, msg.split(" (first")[0]) for _, loc, msg in got] == [
        (f"line {n - 3}, column 1", "key 'contrasts' is given twice in one mapping"),
        (f"line {n}, column 1", "key 'results' is given twice in one mapping")]


def test_merge_keys_may_be_overridden_and_shared_anchors_still_work(tmp_path):
    """YAML's own reuse stays allowed: a merged mapping's keys overridden, an anchor used a few times
    (resources/questionnaires/stai_t.yaml shares its item templates this way)."""
    path = tmp_path / "a.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\nuse: [*b, *b]\n")
    assert read_yaml(path) == {"base": {"x": 1, "y": 2}, "d": {"x": 3, "y": 2}, "use": [{"x": 1, "y": 2}] * 2}
    assert load_questionnaire(ROOT / "resources/questionnaires/stai_t.yaml").id == "stai_t"


# -- hostile or broken YAML ----------------------------------------------------------------------------------------

BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))


def test_billion_laughs_is_refused_before_anything_expands_it(tmp_path, monkeypatch):
    """6.7 KB in the issue made qclm validate use 8.5 GB: the aliases here would expand to 10^9 values."""
    path = tmp_path / "c.yaml"
    path.write_text(BILLION_LAUGHS)
    [(f, loc, msg)] = validate_config_file(path, SCHEMA)
    assert (f, loc) == (str(path), "line 2, column 8")
    assert msg.startswith("aliases (*name) expand this file by ") and f"than the {ALIAS_EXPANSION_LIMIT:,} allowed" in msg
    # the same text as a questionnaire's field, and a recursive alias
    q = tmp_path / "worry1.yaml"
    q.write_text(yaml.safe_dump(WORRY1, sort_keys=False).replace("construct: anxiety", "construct:\n  "
                 + BILLION_LAUGHS.replace("\n", "\n  ")))
    assert "aliases (*name) expand this file" in lines(load_questionnaire, q)[0]
    path.write_text("a: &x [1, *x]\n")
    assert lines(read_yaml, path) == [f"{path}: line 1, column 4: an alias refers to a node that contains it (a "
                                      "recursive structure): write the values out"]
    # under the bound, aliases are fine
    path.write_text("a: &x [" + ", ".join(["1"] * 1000) + "]\nb: [" + ", ".join(["*x"] * 50) + "]\n")
    assert len(read_yaml(path)["b"]) == 50


def test_deep_nesting_and_huge_values_give_short_lines(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 3000 + "]" * 3000 + "\n")
    assert lines(read_yaml, path) == [f"{path}: YAML: nested too deeply to read (lists or mappings inside each other "
                                      "hundreds of levels deep)"]
    # a schema message about a value of 20 000 entries shows the start of it, not all of it
    data = copy.deepcopy(STIMULI)
    data["description"] = {"k": list(range(20_000))}
    stim = write_yaml(tmp_path / "stress.yaml", data)
    [line] = lines(load_stimuli, stim)
    assert line.startswith(f"{stim}: field description: must be a string, got ") and len(line) < len(str(stim)) + 120


def test_a_raw_control_character_is_located_by_line_and_column(tmp_path):
    """The issue: a raw NUL was reported at 'position 2121'."""
    path = write_yaml(tmp_path / "worry1.yaml", WORRY1)
    text = path.read_text().splitlines(keepends=True)
    text[5] = text[5][:8] + "\x00" + text[5][8:]
    path.write_text("".join(text))
    assert lines(load_questionnaire, path) == [
        f"{path}: line 6, column 9: U+0000 (NULL) is not allowed in YAML text (a control character): remove it"]


def test_validate_schema_option_missing_or_broken(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_yaml(tmp_path / "c.yaml", make_config(tmp_path))
    for schema, expected in [
        ("nope.yaml", "nope.yaml: file: does not exist"),
        ("bad.yaml", "bad.yaml: line 2, column 1: YAML syntax error: expected ',' or ']', but got '<stream end>' "
                     "(while parsing a flow sequence)"),
        ("list.yaml", "list.yaml: top level: not a JSON Schema: expected a mapping, got list"),
        ("wrong.yaml", "wrong.yaml: field type: not a valid JSON Schema: 'objekt' is not valid under any of the "
                       "given schemas"),
    ]:
        (tmp_path / "bad.yaml").write_text("type: [a\n")
        (tmp_path / "list.yaml").write_text("- a\n")
        (tmp_path / "wrong.yaml").write_text("type: objekt\n")
        run = subprocess.run([sys.executable, "-m", "qclm.commands", "validate", "--config", "c.yaml", "--schema",
                              schema], capture_output=True, text=True) if schema == "nope.yaml" else None
        if run is not None:
            assert (run.returncode, run.stdout) == (2, expected + "\n") and "Traceback" not in run.stderr
        else:
            assert ["{}: {}: {}".format(*p) for p in validate_config_file("c.yaml", schema)] == [expected]


def test_labels_of_a_large_file_are_linear(tmp_path, monkeypatch):
    """The issue: 7.5 s of validating a 6.8 MB stimulus file went to labelling entries, each label counting
    its id among all entries (quadratic). Counted, not timed: how often an entry's name is read."""
    n = 3000
    data = {"class": "stress", "stimuli": [{"id": f"s{i}", "long": "A text.", "brief": "Text."} for i in range(n)]}
    data["stimuli"][-1]["id"] = "s0"  # one problem, so that labels are built and used
    path = write_yaml(tmp_path / "stress.yaml", data)
    calls = 0
    real = messages._entry_name

    def counting(entry):
        nonlocal calls
        calls += 1
        return real(entry)

    monkeypatch.setattr(messages, "_entry_name", counting)
    assert lines(load_stimuli, path) == [f"{path}: stimulus s0 (#{n}): field id: duplicate stimulus id (stimulus #1 "
                                         "has it too)"]
    assert calls <= 4 * n, f"{calls} reads of entry names for {n} entries"


def test_problem_texts_are_bounded(tmp_path):
    long_key = "k" * 5000
    assert all(len(msg) <= MAX_PROBLEM_CHARS + 40 for _, _, msg in
               inputs.schema_problems({long_key: 1}, {"type": "object", "additionalProperties": {"type": "string"}},
                                      "f", {}))


# -- tables: a column given twice, a byte-order mark ----------------------------------------------------------------

def test_model_table_column_given_twice(tmp_path):
    path = tmp_path / "models.tsv"
    path.write_text("# models\n" + HEADER.rstrip("\n") + "\tdtype\nm1\torg/model\t\t1\tbase\tf\tauto\tfloat16\n")
    assert lines(load_model_table, path) == [
        f"{path}: line 2 (header): column 'dtype' is given twice (columns 7 and 8); a reader would keep only one: "
        "rename or remove one"]


def test_model_table_with_a_byte_order_mark(tmp_path):
    """The issue: a BOM (Excel, Notepad) was reported as "missing column(s) ['name']"."""
    path = tmp_path / "models.tsv"
    path.write_bytes(("\ufeff" + HEADER + "m1\torg/model\t\t1\tbase\tf\tauto\n").encode("utf-8"))
    assert list(load_model_table(path)) == ["m1"]


def test_analysis_table_column_given_twice(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text("model,questionnaire,item_id,condition,stimulus_id,score,score\nm,q,i,vanilla,,0.1,0.2\n")
    assert lines(load_item_scores, path) == [
        f"{path}: line 1 (header): column 'score' is given twice (columns 6 and 7); a reader would keep only one: "
        "rename or remove one"]



def test_a_loader_remembers_a_file_by_its_bytes(tmp_path):
    """qclm.inputs.by_file: a file loaded again unchanged is not parsed again; rewritten at once with other bytes
    of the same size (a modification time need not change) it is read anew; a problem is raised on every call."""
    from qclm.errors import InputError
    from qclm.inputs import by_file

    calls = []

    @by_file
    def load(path):
        calls.append(path)
        text = path.read_text()
        if text.startswith("bad"):
            raise InputError.one(path, "file", "bad")
        return text

    path = tmp_path / "f.txt"
    path.write_text("one")
    assert load(path) == load(path) == "one" and len(calls) == 1
    path.write_text("two")  # same size, written at once
    assert load(path) == "two" and len(calls) == 2
    path.write_text("bad")
    for _ in range(2):
        with pytest.raises(InputError):
            load(path)
    assert len(calls) == 4
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.txt")  # the loader's own error
