"""Settings: the config schema is the one home of every key's default and allowed values (the commands' options take
theirs from it), the engine settings are split from the scoring math, and configs written before the split are
read with a note per key moved."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT

from qclm import settings
from qclm.commands import build_parser
from qclm.validation import validate_config, validate_config_file


def _option(parser, command: str, dest: str):
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return next(a for a in sub._actions if a.dest == dest)


def test_command_options_take_their_defaults_and_choices_from_the_schema():
    parser = build_parser()
    engine = settings.defaults(settings.ENGINE)
    for dest in ("method", "boundary", "batch_size", "pack_tokens"):
        assert _option(parser, "loglik", dest).default == engine[dest], dest
    assert tuple(_option(parser, "loglik", "method").choices) == settings.METHODS
    assert tuple(_option(parser, "loglik", "boundary").choices) == settings.BOUNDARY_MODES
    analysis = settings.defaults(settings.ANALYSIS)
    assert _option(parser, "analyze", "bootstrap").default == analysis["bootstrap"]
    assert _option(parser, "analyze", "min_models").default == analysis["min_models"]


def test_engine_settings_that_change_numbers():
    config = {"engine": {"threads": 8, "method": "full"}}
    numbers = settings.engine_numbers(config)
    assert "threads" not in numbers and numbers["method"] == "full"
    assert numbers["boundary"] == settings.defaults(settings.ENGINE)["boundary"]  # defaults filled in
    assert set(numbers) == set(settings.defaults(settings.ENGINE)) - set(settings.RUN_ONLY)


def test_a_config_written_before_the_split_is_read_with_a_note_per_key(tmp_path, caplog):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    engine = config.pop("engine")
    equations = config.pop("equations")
    old = {**config, "scoring": {**equations, **engine}}
    migrated, notes = settings.migrate(old)
    assert migrated["engine"] == engine and migrated["equations"] == equations and "scoring" not in migrated
    assert len(notes) == len(engine) + len(equations) and "engine.method" in notes[0]
    assert "scoring.aggregation is an equations setting (the section was renamed) now" in notes[-1]
    assert validate_config(migrated, "old.yaml") == []
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(old))
    with caplog.at_level("WARNING"):
        assert validate_config_file(path) == []
    assert "scoring.method is an engine setting now" in caplog.text
    # a key given in both places is not moved: validation reports the one left under scoring
    both = {**config, "engine": {"method": "auto"}, "scoring": {**equations, "method": "full"}}
    assert settings.migrate(both)[0]["scoring"] == {"method": "full"}
    assert settings.migrate(both)[1][-1] == "scoring.method is given under engine too: remove one"
    assert any("scoring" in loc + message for _, loc, message in validate_config(settings.migrate(both)[0], "both.yaml"))


@pytest.mark.parametrize("key", ["stimulus_placement", "answer_preamble"])
def test_an_old_scoring_key_beside_its_engine_key_is_named_when_nothing_else_moved(tmp_path, key):
    """Only that key under scoring, and the same key under engine: the message names it (it said "field scoring:
    unknown field", because the "given under engine too" note came only when another key moved)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    value = settings.defaults(settings.ENGINE)[key]
    config["engine"] = {**config.get("engine", {}), key: value}
    config["scoring"] = {key: value}
    assert settings.migrate(config)[1] == [f"scoring.{key} is given under engine too: remove one"]
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(config))
    problems = validate_config_file(path)
    assert [(loc, msg) for _, loc, msg in problems] == [
        (f"field scoring.{key}", f"is engine.{key} now, and the config gives engine.{key} too: remove one")]
    config["scoring"] = {"colour": "blue"}
    assert [(loc, msg.split(" (")[0]) for _, loc, msg in validate_config(config, "c.yaml")] == [
        ("field scoring.colour", "unknown field")]
    config["scoring"] = "full"  # not a section at all: the schema's line
    assert [loc for _, loc, _ in validate_config(config, "c.yaml")] == ["field scoring"]
