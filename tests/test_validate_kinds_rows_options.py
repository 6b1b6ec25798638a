"""Issue 29, classes 1, 6 and 7: a probe kind that cannot be looked up, a model row that cannot answer an instance,
and a command line that breaks the rules the config is held to are each said in one ``FILE: LOCATION: PROBLEM``
line (exit 2) by ``qclm validate`` and by the commands, before any model loads; never an internal error, never
accepted and then failed in a scoring job or after training."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from qclm import probes
from qclm.commands import main
from qclm.validation import validate_config
from qclm.models import loading

ROOT = Path(__file__).resolve().parents[1]
STAI_S = ROOT / "resources/questionnaires/stai_s.yaml"
GAD7 = ROOT / "resources/questionnaires/gad7.yaml"
GAD7_ENT = ROOT / "resources/entailment/gad7.yaml"
HEADER = "name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\thead\n"
#: a causal LM and an NLI classifier (the table is read, nothing is loaded)
TABLE = HEADER + ("small\tembedded:smollm2-135m-instruct\t\t0.135\tinstruct\tsmollm2\tfloat32\t\n"
                  "nli\torg/nli\t\t0.4\tbase\tx\tfloat32\tnli\n")
_unique = itertools.count()


@pytest.fixture
def no_model_load(monkeypatch):
    """Loading the weights fails the test: the check must come before it."""
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(loading, "load_model", refuse)


def _config(tmp_path: Path, probes_section=None, **extra) -> dict:
    table = tmp_path / "models.tsv"
    table.write_text(TABLE)
    config = {"models": str(table), "models_dir": str(tmp_path / "models"),
              "stimuli": {"version": "long", "classes": {"stress": str(ROOT / "resources/stimuli/stress.yaml")}},
              "conditions": ["vanilla", "stress"], **extra}
    if probes_section is not None:
        config["probes"] = probes_section
    return config


def _validate(tmp_path: Path, config: dict, capsys) -> list[str]:
    """``qclm validate --config`` on the config: its lines (exit 2 asserted)."""
    path = tmp_path / f"config{next(_unique)}.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["validate", "--config", str(path)]) == 2
    out = capsys.readouterr()
    assert "internal error" not in out.err and "Traceback" not in out.err
    return out.out.strip().splitlines()


# -- class 1: probe kind lookup -------------------------------------------------------------------------------------

#: kind modules a user may write wrong: (source, what the one line says)
BAD_KINDS = {
    "syntax": ("def broken(:\n    pass\n", "has a syntax error ("),
    "raises": ("raise RuntimeError('boom')\n", "cannot be imported: RuntimeError: boom"),
    "no_kind": ("X = 1\n", "does not define KIND, a subclass of qclm.probes.base.ProbeKind"),
    "abstract": ("from qclm.probes.base import ProbeKind\nKIND = ProbeKind\n",
                 "KIND is the abstract base class ProbeKind, which does not implement requests and rows"),
    "no_rows": ("from qclm.probes.base import ProbeKind\n"
                 "class K(ProbeKind):\n    name = 'k'\n    def requests(self, c, p, pr):\n        return []\nKIND = K\n",
                 "KIND is K, which does not implement rows"),
    "bad_schema": ("from qclm.probes.base import ProbeKind\n"
                   "class K(ProbeKind):\n    name = 'k'\n"
                   "    schema = {'type': 'object', 'properties': {'x': {'type': 'strng'}}}\n"
                   "    def requests(self, c, p, pr):\n        return []\n"
                   "    def rows(self, cell, answers):\n        return None\nKIND = K\n",
                   "KIND.schema, field properties.x.type: not a valid JSON Schema"),
    "schema_not_mapping": ("from qclm.probes.base import ProbeKind\n"
                           "class K(ProbeKind):\n    name = 'k'\n    schema = {'minProperties': 'two'}\n"
                           "    def requests(self, c, p, pr):\n        return []\n"
                           "    def rows(self, cell, answers):\n        return None\nKIND = K\n",
                           "KIND.schema, field minProperties: not a valid JSON Schema"),
}


@pytest.mark.parametrize("case", sorted(BAD_KINDS))
def test_a_kind_module_that_is_no_kind_is_one_line_in_validate_and_probe(case, kind_module, tmp_path, capsys,
                                                                         no_model_load):
    source, said = BAD_KINDS[case]
    name = kind_module(source)
    lines = _validate(tmp_path, _config(tmp_path, {"x": {"kind": name}}), capsys)
    assert len(lines) == 1 and lines[0].startswith(f"{tmp_path}/config") and ": field probes.x.kind: " in lines[0] \
        and said in lines[0], lines
    assert main(["probe", name, "--model", "small", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("command line: kind: ") and said in err[0], err
    with pytest.raises(probes.UnknownKind):
        probes.kind_class(name)


@pytest.mark.parametrize("entry, said", [
    ({"conditions": ["vanilla"]}, "field probes.x.kind: missing required field"),
    (None, "field probes.x: must be a mapping (key: value), got nothing (empty)"),
    ({"kind": None}, "field probes.x.kind: must be a string, got nothing (empty)"),
    ({"kind": ".relative"}, "field probes.x.kind: '.relative' does not match the pattern"),
    ({"kind": "a..b"}, "field probes.x.kind: a probe kind is one of likert"),
])
def test_an_entry_without_a_kind_is_one_line(entry, said, tmp_path, capsys, no_model_load):
    config = _config(tmp_path, {"x": entry})
    lines = _validate(tmp_path, config, capsys)
    assert len(lines) == 1 and said in lines[0], lines
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["probe", "likert", "--config", str(path), "--model", "small", "--out", str(tmp_path / "o"),
                 "--questionnaire", str(STAI_S), "--id", "stai_s"]) == 2
    assert said in capsys.readouterr().err


# -- class 6: model rows and kinds ----------------------------------------------------------------------------------

def test_validate_refuses_an_instance_on_a_row_that_cannot_answer_it(tmp_path, capsys):
    table = tmp_path / "models.tsv"
    lines = _validate(tmp_path, _config(tmp_path, {"stai_s": {"kind": "likert", "questionnaire": str(STAI_S)},
                                                  "ent": {"kind": "entailment", "instrument": str(GAD7_ENT)}}),
                      capsys)
    assert lines == [f"{table}: line 3 (model nli): column head: model nli is head nli, which probe kind likert "
                     "cannot ask (only entailment can); probe stai_s (likert) would score it: give it the models it "
                     "scores (models: [...]) or leave the row out of the table"]
    # the questionnaires' shorthand is a Likert instance too
    lines = _validate(tmp_path, _config(tmp_path, questionnaires={"stai_s": str(STAI_S)}), capsys)
    assert len(lines) == 1 and "probe stai_s (likert) would score it" in lines[0], lines


def test_an_instance_that_leaves_the_row_out_is_fine(tmp_path):
    config = _config(tmp_path, {"stai_s": {"kind": "likert", "questionnaire": str(STAI_S), "models": ["small"]},
                                "ent": {"kind": "entailment", "instrument": str(GAD7_ENT)}})
    assert validate_config(config, tmp_path / "c.yaml") == []


def test_probe_and_finetune_refuse_an_nli_row_before_it_loads(tmp_path, capsys, no_model_load):
    table = tmp_path / "models.tsv"
    table.write_text(TABLE)
    assert main(["probe", "likert", "--model", "nli", "--models", str(table), "--out", str(tmp_path / "o"),
                 "--questionnaire", str(STAI_S), "--id", "stai_s"]) == 2
    assert capsys.readouterr().err.strip() == ("command line: --model: model nli is head nli, which probe kind likert "
                                               "cannot ask (only entailment can)")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one text here\nanother text there\n")
    assert main(["finetune", "--model", "nli", "--models", str(table), "--corpus", str(corpus), "--out",
                 str(tmp_path / "ft")]) == 2
    assert capsys.readouterr().err.strip() == (
        "command line: --model: model nli: column head: nli: a sequence classifier has no language-model head to "
        "fine-tune with the causal-LM loss of qclm finetune; fine-tune a causal LM")
    assert not (tmp_path / "o").exists() and not (tmp_path / "ft").exists()


# -- class 7: command lines checked as configs are -------------------------------------------------------------------

def _usage_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_probe_options_are_checked_before_any_model_loads(tmp_path, capsys, no_model_load):
    (tmp_path / "file").write_text("x")
    base = ["probe", "likert", "--model", "small", "--questionnaire", str(STAI_S), "--id", "stai_s"]
    out = ["--out", str(tmp_path / "o")]
    assert _usage_error(capsys, base + ["--out", str(tmp_path / "file")]).endswith(
        f"argument --out: {tmp_path / 'file'} exists and is not a directory: name a directory (it is created if "
        "missing)")
    assert _usage_error(capsys, base + ["--out", str(tmp_path / "file" / "o")]).endswith(
        f"argument --out: {tmp_path / 'file' / 'o'} cannot be created: {tmp_path / 'file'} is a file, not a directory")
    assert _usage_error(capsys, base + out + ["--threads", "-1"]).endswith(
        "argument --threads: must be 0 (torch's default) or 1 to 1024, got -1")
    assert _usage_error(capsys, base + out + ["--device", "gpu"]).endswith(
        "argument --device: must be auto, cpu, mps, cuda or cuda:N, got 'gpu'")
    assert _usage_error(capsys, base + out + ["--conditions", ","]).endswith(
        "argument --conditions: must name at least one condition (comma-separated), got ','")
    assert _usage_error(capsys, base + out + ["--conditions", "vanilla,,stress"]).endswith(
        "argument --conditions: entry 2 is an empty entry, not a condition: vanilla, a class name, or class names "
        "joined by + (each letters, digits, '_', '.', '-', starting with a letter or digit)")
    assert _usage_error(capsys, base + out + ["--conditions", "vanilla,vanilla"]).endswith(
        "argument --conditions: names condition 'vanilla' twice")
    assert not (tmp_path / "o").exists()


def test_a_persona_option_gets_the_text_checks_of_the_config(tmp_path, capsys, no_model_load):
    argv = ["probe", "survey", "--model", "small", "--out", str(tmp_path / "o"), "--instrument", str(GAD7),
            "--prompt-format", "chat", "--persona", "a calm\x01 reader"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "command line: field probes.gad7.personas, entry 1: has the control character U+0001 (START OF HEADING) "
        "at character 7: remove it"]
    assert main(argv[:-1] + ["\u200b\u200b"]) == 2
    assert "has only invisible characters (U+200B (ZERO WIDTH SPACE))" in capsys.readouterr().err


def test_finetune_options_are_checked_before_training(tmp_path, capsys, no_model_load):
    (tmp_path / "file").write_text("x")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one text here\nanother text there\n")
    base = ["finetune", "--model", "embedded:smollm2-135m-instruct", "--corpus", str(corpus)]
    assert _usage_error(capsys, base + ["--out", str(tmp_path / "file")]).endswith(
        f"argument --out: {tmp_path / 'file'} exists and is not a directory: name a directory (it is created if "
        "missing)")
    out = ["--out", str(tmp_path / "ft")]
    assert _usage_error(capsys, base + out + ["--threads", "-1"]).endswith(
        "argument --threads: must be 0 (torch's default) or 1 to 1024, got -1")
    assert _usage_error(capsys, base + out + ["--device", "gpu"]).endswith(
        "argument --device: must be auto, cpu, mps, cuda or cuda:N, got 'gpu'")
