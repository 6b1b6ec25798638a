"""The shared rules of user input (issue 29): one rule for every name that becomes a file or directory name, and
integer settings that take integers only, each size bounded by the same maximum wherever it appears. Property-based
where the class is wide: every place a name or an integer setting is taken is checked against drawn values."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qclm import probes
from qclm.errors import InputError
from qclm.inputs import SAFE_NAME_MAX, SHARED_DEFS, SIZES, load_schema, safe_name_problem, schema_problems
from qclm.probes import full_config_schema as config_schema

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- names ---------------------------------------------------------------------------------------------------------

safe_names = st.from_regex(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{SAFE_NAME_MAX - 1}}}", fullmatch=True)
#: names that must never become a file name: path separators and parent directories, a final newline (a pattern
#: ending in $ lets one through), control and invisible characters, and names too long for a file system's 255 bytes
#: once the project derives file names from them
unsafe_names = st.one_of(
    safe_names.map(lambda n: n + "\n"),
    st.tuples(safe_names, st.sampled_from(["/", "\\", "/../", "\x00", "\t", "\u200b", "\u202e", " ", "\x85"]),
              safe_names).map("".join),
    safe_names.map(lambda n: "../" + n),
    st.sampled_from([".", "..", "", ".hidden", "-flag", "_x"]),
    st.integers(SAFE_NAME_MAX + 1, 400).map(lambda k: "a" * k),
)


def _config_with(key: str, name: str) -> dict:
    """A config that uses ``name`` where the config schema takes a name that becomes part of a path."""
    entries = {
        "questionnaires": {"questionnaires": {name: "q.yaml"}},
        "probes": {"probes": {name: {"kind": "likert", "questionnaire": "q.yaml"}}},
        "interventions": {"interventions": {name: {"corpus": "c.yaml"}}},
        "stimuli.classes": {"stimuli": {"version": "long", "classes": {name: "s.yaml"}}},
        "calibration.plants": {"calibration": {"plants": {name: {"material": "listing", "probes": ["m"]}}}},
        "conditions": {"conditions": ["vanilla", name]},
    }
    base = {"models": "m.tsv", "models_dir": "md", "conditions": ["vanilla"], "stimuli": {"version": "long"}}
    return {**base, **entries[key]}


NAME_PLACES = ["questionnaires", "probes", "interventions", "stimuli.classes", "calibration.plants", "conditions"]


def _config_name_problems(place: str, name: str) -> list:
    return [p for p in schema_problems(_config_with(place, name), config_schema(), "c.yaml", {})
            if p[1].startswith(f"field {place}")]


def _file_name_problems(schema: str, field: str, name: str) -> list:
    """A material file's name fields (questionnaire and item ids, stimulus class and ids, ...) by their schema."""
    return schema_problems({field: name}, {**load_schema(schema), "required": []}, "f.yaml", {})


def _table_name_problem(name: str) -> list:
    from qclm.models.table import parse_model_row

    row = {"name": name, "source": "embedded:smollm2-135m-instruct", "revision": "", "params_b": "0.1",
           "type": "base", "family": "x", "dtype": "float32"}
    try:
        parse_model_row(row, "models.tsv", 2)
    except InputError as err:
        return [p for p in err.problems if p[1].endswith("column name")]
    return []


def _probe_id_error(name: str) -> str | None:
    """qclm probe's --id (the instance id names DIR/logprobs/MODEL/ID/): argparse's error, or None."""
    from qclm.commands.probe import kind_parser

    parser = kind_parser(probes.kind_class("likert"))
    errors = []
    parser.error = errors.append  # argparse's exit, kept as a message
    parser.parse_args(["--model", "m", "--out", "o", "--questionnaire", "q.yaml", "--id", name])
    return errors[0] if errors else None


@SETTINGS
@given(unsafe_names, st.data())
def test_a_name_that_cannot_be_a_file_name_is_refused_wherever_a_name_is_taken(name, data):
    assert safe_name_problem(name)
    place = data.draw(st.sampled_from(NAME_PLACES))
    assert _config_name_problems(place, name), (place, name)
    schema, field = data.draw(st.sampled_from([("questionnaire", "id"), ("stimuli", "class"),
                                               ("entailment", "id"), ("instrument", "id")]))
    assert _file_name_problems(schema, field, name), (schema, field, name)
    if name == name.strip():  # the model table strips a cell's spaces (a newline ends the row)
        assert _table_name_problem(name), name
    assert _probe_id_error(name), name


@SETTINGS
@given(safe_names, st.data())
def test_a_safe_name_is_taken_wherever_a_name_is_taken(name, data):
    assert safe_name_problem(name) is None
    # (an intervention's and a plant's name are narrower still: no '.' or '-', which their checkpoints' names use)
    place = data.draw(st.sampled_from(["questionnaires", "probes", "stimuli.classes"]
                                      + (["conditions"] if name != "vanilla" else [])))
    assert _config_name_problems(place, name) == [], (place, name)
    for schema, field in (("questionnaire", "id"), ("stimuli", "class"), ("entailment", "id")):
        assert _file_name_problems(schema, field, name) == [], (schema, name)
    assert _table_name_problem(name) == []
    assert _probe_id_error(name) is None


def test_probe_id_cannot_write_outside_out(tmp_path, capsys):
    from qclm.commands import main

    with pytest.raises(SystemExit) as info:
        main(["probe", "likert", "--model", "embedded:smollm2-135m-instruct", "--out", str(tmp_path / "out"),
              "--questionnaire", "resources/questionnaires/gad7.yaml", "--id", "../escaped"])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "argument --id: '../escaped' is not a safe name: use letters, digits, '_', '.', '-', starting with a "
        "letter or digit")
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "out").exists()


def test_the_longest_derived_file_name_fits_in_255_bytes():
    from qclm.models.checkpoints import derived_name

    longest = "a" * SAFE_NAME_MAX
    assert len(derived_name(longest, longest, 100).encode()) <= 255
    assert len(derived_name(longest, f"cal_{longest}_sham99", 100).encode()) <= 255


# -- numbers ---------------------------------------------------------------------------------------------------------

def _resolve(node: dict) -> dict:
    ref = node.get("$ref", "")
    return {**SHARED_DEFS[ref.rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}} if ref else node


def _integer_settings(node, path=()):
    """(path, schema) of every integer setting of a schema (sizes, counts, seeds), the alternatives of anyOf too."""
    if not isinstance(node, dict):
        return
    node = _resolve(node)
    types = node.get("type", [])
    if "integer" in (types if isinstance(types, list) else [types]):
        yield path, node
    for key, sub in (node.get("properties") or {}).items():
        yield from _integer_settings(sub, path + (key,))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _integer_settings(node[key], path + (key,))
    for alt in node.get("anyOf") or []:
        yield from _integer_settings(alt, path)


def _all_integer_settings() -> list[tuple[str, tuple, dict]]:
    out = [("config", p, s) for p, s in _integer_settings(config_schema())]
    for name in probes.KINDS:
        out += [(name, p, s) for p, s in _integer_settings(probes.kind_class(name).schema)]
    return out


INTEGER_SETTINGS = _all_integer_settings()
#: integer settings that are not sizes of a run: seeds (any value costs the same), limits (they only cut what the
#: material holds), thresholds of the analysis, and top_k (a filter over the vocabulary, capped by it)
NOT_SIZES = {"seed", "seeds", "limit_items", "limit_stimuli", "extra_limit_stimuli", "limit_words", "min_models",
             "min_stimuli", "top_k"}


def _name(path: tuple) -> str:
    named = [p for p in path if p not in ("items", "additionalProperties")]
    return named[-1] if named else ""


def test_every_size_has_a_maximum_and_the_same_kind_of_size_the_same():
    assert len(INTEGER_SETTINGS) > 20
    unbounded = [f"{where}: {'.'.join(path)}" for where, path, s in INTEGER_SETTINGS
                 if "maximum" not in s and _name(path) not in NOT_SIZES]
    assert unbounded == []
    by_kind: dict[str, set] = {}
    for where, path, s in INTEGER_SETTINGS:
        kind = {"bootstrap": "permutations", "story_samples": "repetitions", "story_tokens": "max_new_tokens",
                "checkpoints": "epochs"}.get(_name(path), _name(path))
        by_kind.setdefault(kind, set()).add(s.get("maximum"))
    for kind in ("permutations", "repetitions", "max_new_tokens", "epochs", "batch_size"):
        assert len(by_kind[kind]) == 1, (kind, by_kind[kind])


@SETTINGS
@given(st.sampled_from(INTEGER_SETTINGS), st.integers(0, 10**6), st.data())
def test_an_integer_setting_takes_integers_only_and_within_its_bounds(setting, value, data):
    where, path, schema = setting
    low, high = schema.get("minimum", 0), schema.get("maximum", 10**6)
    value = min(max(value, low), high)
    assert schema_problems(value, schema, "c.yaml", {}) == [], (where, path, value)
    problems = schema_problems(float(value), schema, "c.yaml", {})
    assert problems and "must be an integer" in problems[0][2], (where, path, problems)
    if "maximum" in schema:
        over = schema["maximum"] + data.draw(st.integers(1, 10**12))
        assert schema_problems(over, schema, "c.yaml", {}), (where, path, over)


@pytest.mark.parametrize("kind, entry, field", [
    ("csi", {"repetitions": 5.0}, "repetitions"),
    ("csi", {"repetitions": 10**9}, "repetitions"),
    ("memorization", {"instruments": ["q.yaml"], "decoy": "d.yaml", "permutations": 10000.0}, "permutations"),
    ("survey", {"instrument": "q.yaml", "generation": {"max_new_tokens": 10**9}}, "generation.max_new_tokens"),
])
def test_a_probe_setting_out_of_its_type_or_bounds_is_named(kind, entry, field):
    config = {"probes": {"p": {"kind": kind, **entry}}}
    found = probes.problems(config, "c.yaml", ["vanilla"])
    assert [loc for _, loc, _ in found] == [f"field probes.p.{field}"], found


def test_float_checkpoints_are_refused():
    from qclm import interventions as iv

    found = iv.entry_problems({"corpus": "c.yaml", "epochs": 2, "checkpoints": [1.0, 2.0]}, "c.yaml",
                              "field interventions.d")
    assert [(loc, msg) for _, loc, msg in found] == [
        ("field interventions.d.checkpoints, entry 1", "must be an integer, got 1.0"),
        ("field interventions.d.checkpoints, entry 2", "must be an integer, got 2.0")], found
    assert iv.entry_problems({"corpus": "c.yaml", "epochs": 10**6}, "c.yaml", "field interventions.d")


def test_command_line_sizes_have_the_config_bounds(capsys):
    from qclm.commands import main

    with pytest.raises(SystemExit):
        main(["analyze", "--scores", "s.csv", "--out", "o", "--bootstrap", str(SIZES["resamples"]["maximum"] + 1)])
    assert "argument --bootstrap: must be at most 1000000" in capsys.readouterr().err
