"""The command line as a user meets it: ``qclm --help`` and ``qclm probe --help``, ``qclm render KIND`` on material
given on the command line alone (the options of ``qclm probe KIND``), the instance id named by the material file,
several survey instruments in one run, and the memorization decoy's one default."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from conftest import ROOT, write_workflow_config

from qclm import probes
from qclm.commands import main
from qclm.commands.args import default_id, file_id, kind_instances
from qclm.errors import InputError

#: an entailment instrument written for these tests
SCALE = {
    "id": "worry", "name": "A worry scale written for the tests", "construct": "worry", "source": "tests",
    "licence": "MIT (written for the tests)", "item_wording": "written",
    "premise": "These days I feel {cterm}.", "hypothesis": "That happens {intensifier}.",
    "scale": {"levels": [{"label": "rarely", "weight": -1, "intensifiers": ["rarely"]},
                         {"label": "often", "weight": 1, "intensifiers": ["often"]}]},
    "items": [{"id": "W1", "cterms": {"plus": ["uneasy"], "minus": ["at ease"]}}],
}
#: a survey instrument (a plain item list with its scale) written for these tests
SURVEY = {
    "id": "{id}", "name": "{name}", "construct": "mood", "source": "tests", "licence": "MIT (written for the tests)",
    "item_wording": "written",
    "original_scale": {"options": [{"label": "Never", "score": 0}, {"label": "Sometimes", "score": 1},
                                   {"label": "Often", "score": 2}]},
    "items": [{"id": "M1", "text": "I wake up rested."}, {"id": "M2", "text": "I look forward to the day."}],
}


def _write(path, data):
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# -- qclm --help, qclm probe --help --------------------------------------------------------------------------------

def test_qclm_help_is_written_for_users_and_probe_help_lists_the_kinds():
    """``qclm --help`` describes the tool (not the package's developer docstring) and exits 0; ``qclm probe
    --help`` lists every kind with its one-line summary and exits 0, as the installed command runs them."""
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "--help"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "Measure psychological constructs in causal language models" in run.stdout
    assert "One module per command" not in run.stdout and "add_parser" not in run.stdout
    for command in ("probe", "render", "validate", "words"):
        assert command in run.stdout
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "probe", "--help"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "the following arguments are required" not in run.stdout + run.stderr
    for name in probes.KINDS:
        assert f"  {name}: {probes.kind_class(name).summary}" in run.stdout


def _help_pages():
    from qclm.commands import cli

    pages = [[name] for name in cli.COMMANDS] + [[name] for name in cli.kind_commands()]
    return pages + [[command, kind] for command in ("probe", "render") for kind in probes.KINDS]


@pytest.mark.parametrize("argv", _help_pages(), ids=" ".join)
def test_every_help_page_is_a_usage_page_in_plain_text(argv, capsys):
    """Every command's --help (the shared ones, the kinds' own, ``qclm probe KIND`` and ``qclm render KIND`` of
    every kind, and ``qclm probe`` itself, which lists the kinds) opens with its usage line and shows its text as a
    user reads it: no reST markup from the module docstrings it is written from (``x``, :func:`x`)."""
    from qclm.commands import cli

    try:
        code = cli.main([*argv, "--help"])
    except SystemExit as stop:
        code = stop.code
    page = capsys.readouterr().out
    assert code == 0 and page.startswith(f"usage: qclm {argv[0]}"), page[:300]
    assert "``" not in page and not re.search(r":[a-z]+:`", page), page
    """``qclm --version`` (lm-eval's and inspect's convention) prints the package's version and, run from a
    checkout, the commit (``+g`` and its first ten hex digits, ``.dirty`` where src/ or workflow/ differ): the same
    string every calibration floor records (qclm.version); exit 0 with no command."""
    import qclm

    run = subprocess.run([sys.executable, "-m", "qclm.commands", "--version"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    assert run.stdout.startswith(f"qclm {qclm.__version__}+g{commit}")
    assert run.stdout.strip() == f"qclm {qclm.version()}"


# -- the instance id -----------------------------------------------------------------------------------------------

def _args(cls, argv):
    from qclm.commands.probe import kind_parser

    return kind_parser(cls).parse_args(["--model", "m", "--out", "o", *argv])


def test_the_instance_id_is_the_material_files_name(tmp_path):
    """Without --id the instance (and every table's probe / questionnaire column) is named by the material file,
    made a safe name; the kind's name only where no single file names it; --id still wins."""
    cls = probes.kind_class("entailment")
    path = _write(tmp_path / "my worry (v2).yaml", SCALE)
    config = {"conditions": ["vanilla"], "stimuli": {"version": "long"}}
    [instance] = kind_instances(cls, "entailment", _args(cls, ["--instrument", str(path)]), config)
    assert instance.id == "my_worry__v2_" and instance.settings["instrument"] == str(path)
    [instance] = kind_instances(cls, "entailment", _args(cls, ["--instrument", str(path), "--id", "w"]), config)
    assert instance.id == "w"
    assert file_id("resources/questionnaires/stai_s.yaml") == "stai_s" and file_id("(+).yaml") is None
    assert default_id(probes.kind_class("likert"), {"questionnaire": "q/anx.v2.yaml"}) == "anx.v2"
    assert default_id(probes.kind_class("csi"), {}) == "csi"  # the default word list: no file given
    assert default_id(probes.kind_class("memorization"), {"instruments": ["a.yaml", "b.yaml"]}) == "memorization"
    assert default_id(cls, {"instrument": "+++.yaml"}) == "entailment"  # nothing of the name is left


# -- the memorization decoy ----------------------------------------------------------------------------------------

def test_the_memorization_decoy_has_one_default_for_the_config_and_the_command_line(tmp_path):
    """A config's memorization instance without a decoy is valid and gets the schema's default, the one the
    command line uses; a config's own decoy is kept when the command line gives none."""
    cls = probes.kind_class("memorization")
    default = cls.schema["properties"]["decoy"]["default"]
    assert (ROOT / default).is_file()
    gad7 = str(ROOT / "resources/questionnaires/gad7.yaml")
    assert probes.settings_of(cls, {"kind": "memorization", "instruments": [gad7]})["decoy"] == default
    assert "decoy" not in cls.settings_from_args(_args(cls, ["--instrument", gad7]))
    cfg = write_workflow_config(tmp_path, {}, probes={"mem": {"kind": "memorization", "instruments": [gad7]}})
    from qclm.validation import validate_config

    config = yaml.safe_load(cfg.read_text())
    assert not [p for p in validate_config(config, str(cfg)) if "probes" in p[1]]
    decoy = tmp_path / "my_decoy.yaml"
    decoy.write_text((ROOT / default).read_text())
    config["probes"]["mem"]["decoy"] = str(decoy)
    [instance] = kind_instances(cls, "memorization", _args(cls, ["--config", str(cfg), "--id", "mem"]), config)
    assert instance.settings["decoy"] == str(decoy)  # the config's decoy, not the default over it


# -- qclm render KIND ----------------------------------------------------------------------------------------------

def test_render_shows_material_given_on_the_command_line(tmp_path, tiny_llama_dir, capsys):
    """``qclm render KIND`` takes the options of ``qclm probe KIND`` and needs no config: what it prints is what
    render prints for the same instance declared in a config (the same requests, the same prompt format)."""
    path = _write(tmp_path / "worry.yaml", SCALE)
    argv = ["--model", str(tiny_llama_dir), "--instrument", str(path), "--prompt-format", "chat", "--limit", "0"]
    assert main(["render", "entailment", *argv]) == 0
    given = capsys.readouterr().out
    assert given.count("### request") == 4 and "probe worry (entailment)" in given
    assert "<|im_start|>user\nPremise: These days I feel at ease.\nHypothesis: That happens often." in given
    cfg = write_workflow_config(tmp_path, {}, probes={"worry": {"kind": "entailment", "instrument": str(path)}})
    (tmp_path / "models.tsv").write_text("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\tprompt_format\n"
                                         f"{tiny_llama_dir.name}\t{tiny_llama_dir}\t\t0.001\tinstruct\tt\tfloat32\t"
                                         "chat\n")
    assert main(["render", "--config", str(cfg), "--model", tiny_llama_dir.name, "--probe", "worry", "--condition",
                 "vanilla", "--limit", "0"]) == 0
    assert capsys.readouterr().out == given
    # a condition the experiment without a config does not have: one line, exit 2
    assert main(["render", "entailment", *argv, "--condition", "stress"]) == 2
    assert "condition 'stress' is not in the experiment without a config" in capsys.readouterr().err
    # the config form still needs its names
    with pytest.raises(SystemExit):
        main(["render", "--config", str(cfg), "--model", "m"])
    assert "the following arguments are required: --probe, --condition" in capsys.readouterr().err


# -- several survey instruments ------------------------------------------------------------------------------------

def test_probe_survey_takes_several_instruments(tmp_path, tiny_llama_dir, capsys):
    """``qclm probe survey --instrument A --instrument B``: one instance per instrument (as a config declares them),
    each named by its file, scored on the one loaded model; every table carries both."""
    a = _write(tmp_path / "sleep-scale.v2.yaml", {**SURVEY, "id": "sleep", "name": "Sleep scale"})
    b = _write(tmp_path / "day scale.yaml", {**SURVEY, "id": "day", "name": "Day scale"})
    out = tmp_path / "out"
    argv = ["probe", "survey", "--model", str(tiny_llama_dir), "--prompt-format", "chat", "--out", str(out),
            "--instrument", str(a), "--instrument", str(b), "--variants", "natural", "--orders", "regular",
            "--max-new-tokens", "3"]
    assert main(argv) == 0, capsys.readouterr().err
    responses = pd.read_parquet(out / "scores/survey_responses.parquet")
    assert set(zip(responses["probe"], responses["instrument"])) == {("sleep-scale.v2", "sleep"),
                                                                   ("day_scale", "day")}
    assert len(responses) == 2 * 2  # two items each, one prompt each
    choices = pd.read_parquet(out / "scores/survey_choices.parquet")
    assert set(choices["probe"]) == {"sleep-scale.v2", "day_scale"}
    summary = pd.read_csv(out / "analysis/survey_summary.csv")
    assert {"sleep", "day"} <= set(summary["instrument"])
    assert (out / "logprobs" / tiny_llama_dir.name / "day_scale" / "vanilla.parquet").is_file()
    # --id names one instance
    assert main([*argv, "--id", "both"]) == 2
    assert "command line: --id: names one instance, and the options give 2" in capsys.readouterr().err


def test_a_survey_instance_per_instrument_is_the_kinds_hook():
    """The survey's options give one instance per --instrument, the other options shared; other kinds one."""
    survey = probes.kind_class("survey")
    args = argparse.Namespace(instrument=["a.yaml", "b.yaml"], variants="json", orders=None, seeds=None,
                              repetitions=None, persona=None, max_new_tokens=None, greedy=False)
    assert survey.instances_from_args(args) == [{"variants": ["json"], "instrument": "a.yaml"},
                                                {"variants": ["json"], "instrument": "b.yaml"}]
    with pytest.raises(InputError, match="--instrument: two of the files given are named a"):
        kind_instances(survey, "survey", _with(args, instrument=["x/a.yaml", "y/a.yaml"]), {"conditions": ["vanilla"]})


def _with(args, **changes):
    out = argparse.Namespace(**vars(args))
    out.id, out.config = None, None
    for key, value in changes.items():
        setattr(out, key, value)
    return out


# -- entry points under commands/ ----------------------------------------------------------------------------------

def test_word_lists_have_their_entry_point_under_commands(tmp_path, capsys):
    """``qclm words check`` reads a list as the CSI kind does (every problem, exit 2)."""
    good, bad = tmp_path / "good.txt", tmp_path / "bad.tsv"
    good.write_text("# written for the tests\nhouse\nriver\n")
    bad.write_text("pos\tfreq_rank\nnoun\t1\n")
    assert main(["words", "check", str(good)]) == 0
    assert main(["words", "check", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}: ") and "word" in err and str(good) not in err


def test_qclm_floors_names_a_config_that_is_not_a_calibration_or_whose_run_has_not_finished(tmp_path, capsys):
    """`qclm floors CONFIG...` refuses, one FILE: LOCATION: PROBLEM line each and exit 2, a config without
    `calibration:` and one whose run left no floor table (with the command that makes it)."""
    plain, unrun = tmp_path / "plain.yaml", tmp_path / "unrun.yaml"
    plain.write_text(f"results: {tmp_path / 'r1'}\n")
    unrun.write_text(f"results: {tmp_path / 'r2'}\ncalibration: {{}}\n")
    assert main(["floors", str(plain), str(unrun), "--out", str(tmp_path / "f.csv")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{plain}: field calibration: missing: not a calibration config",
        f"{unrun}: results: {tmp_path / 'r2' / 'analysis' / 'calibration_floor.csv'} does not exist: run the "
        f"calibration first (make run CONFIG={unrun})"]
    assert not (tmp_path / "f.csv").exists()


def test_qclm_floors_names_a_bad_run_table_and_an_output_that_is_a_directory(tmp_path, capsys):
    """`qclm floors CONFIG` on a run whose floor table lacks a column (an older qclm's), or is not a table, and with
    --out a directory: one line naming the file and the column, exit 2; --check and --markdown read one file."""
    config = tmp_path / "c.yaml"
    config.write_text(f"results: {tmp_path / 'r'}\ncalibration: {{}}\n")
    analysis = tmp_path / "r" / "analysis"
    analysis.mkdir(parents=True)
    (analysis / "calibration_floor.csv").write_text("base_model,plant\nm,p\n")
    (analysis / "calibration.csv").write_text("base_model\nm\n")
    assert main(["floors", str(config), "--out", str(tmp_path / "f.csv")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{analysis / 'calibration_floor.csv'}: column tier: missing: the table of an older qclm? run the "
        "calibration's analysis again (make run CONFIG=...)"]
    (analysis / "calibration_floor.csv").write_bytes(b"\xff\xfe\x00binary")
    assert main(["floors", str(config)]) == 2
    assert capsys.readouterr().err.startswith(f"{analysis / 'calibration_floor.csv'}: file: cannot be read as a CSV")
    assert main(["floors", str(config), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"{tmp_path}: --out: is a directory: give the CSV file to write"]
    assert main(["floors", "--check", "a.csv", "b.csv"]) == 2
    assert "--check and --markdown read one floors file" in capsys.readouterr().err


# -- qclm's cache ---------------------------------------------------------------------------------------------------

def test_the_cache_is_the_users_unless_qclm_cache_says_otherwise(tmp_path, monkeypatch, capsys):
    """Prepared models and server answers go to the user cache directory (platformdirs' answer: XDG_CACHE_HOME's
    qclm on Linux), never the current directory; QCLM_CACHE moves them; ``qclm cache dir`` prints where; a config's
    models_dir and --models-dir still win for the models."""
    from qclm import cache

    monkeypatch.delenv("QCLM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    assert cache.root() == tmp_path / "xdg" / "qclm"
    assert cache.models_dir() == tmp_path / "xdg" / "qclm" / "models"
    assert cache.responses_dir("m") == tmp_path / "xdg" / "qclm" / "responses" / "m"
    assert str(cache.models_dir("~/elsewhere")) == os.path.expanduser("~/elsewhere")
    assert main(["cache", "dir"]) == 0 and capsys.readouterr().out == f"{tmp_path / 'xdg' / 'qclm'}\n"
    monkeypatch.setenv("QCLM_CACHE", str(tmp_path / "scratch"))
    assert main(["cache", "dir"]) == 0 and capsys.readouterr().out == f"{tmp_path / 'scratch'}\n"
    # the workflow's default is the same function's answer (common.smk), and validation reads the same place
    from qclm.models.table import gguf_cache

    assert gguf_cache(None) == tmp_path / "scratch" / "models" / "_gguf"
    assert gguf_cache(tmp_path / "md" / "m") == tmp_path / "md" / "_gguf"


def test_qclm_cache_lists_and_clears_its_entries(tmp_path, monkeypatch, capsys):
    """``qclm cache`` lists each entry of each area with its size; ``clear`` deletes all, an area's, or those
    named, saying each; a name that is not there is one line naming it, exit 2, after the others are cleared."""
    monkeypatch.setenv("QCLM_CACHE", str(tmp_path / "c"))
    assert main(["cache"]) == 0 and capsys.readouterr().out == f"{tmp_path / 'c'}: 0 entries, 0 B\n"
    model = tmp_path / "c" / "models" / "m1"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"x" * 1500)
    (model / "qclm_prepared.json").write_text("{}")
    (tmp_path / "c" / "models" / "m2").mkdir()
    answers = tmp_path / "c" / "responses" / "m1"
    answers.mkdir(parents=True)
    (answers / "responses.sqlite").write_bytes(b"y" * 10)
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{tmp_path / 'c'}: 3 entries, 1.5 kB"
    assert [line.split()[:2] for line in lines[1:]] == [["models", "m1"], ["models", "m2"], ["responses", "m1"]]
    assert lines[1].split()[2:] == ["1.5", "kB", "2", "files"]
    assert main(["cache", "--area", "responses"]) == 0 and len(capsys.readouterr().out.splitlines()) == 2
    assert main(["cache", "clear", "--area", "responses"]) == 0
    assert capsys.readouterr().out == "deleted responses/m1 (10 B)\n"
    assert model.is_dir() and not answers.exists()
    assert main(["cache", "clear", "m2", "m9"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "deleted models/m2 (0 B)\n"
    assert captured.err == "qclm cache: names: no entry named m9 in models, responses\n"
    assert main(["cache", "dir", "m1"]) == 2 and "names are for clear, not dir" in capsys.readouterr().err
    assert main(["cache", "clear"]) == 0 and capsys.readouterr().out == "deleted models/m1 (1.5 kB)\n"
    assert main(["cache", "clear"]) == 0 and capsys.readouterr().out == f"nothing to clear in {tmp_path / 'c'}\n"


# -- qclm list ------------------------------------------------------------------------------------------------------

def test_qclm_list_shows_the_kinds_the_shipped_instruments_and_the_models(tmp_path, monkeypatch, capsys):
    """``qclm list kinds|instruments|models`` (lm-eval's and inspect's listings): every registered kind with its
    summary; each kind's shipped files by the name its options take, with their items; the embedded models and
    the model table's rows; options given to the wrong listing, and a table that is not there, exit 2."""
    assert main(["list", "kinds"]) == 0
    kinds = capsys.readouterr().out.splitlines()
    assert kinds[0].split() == ["KIND", "FROM", "SUMMARY"]
    assert [line.split()[0] for line in kinds[1:]] == list(probes.registered())
    assert any(line.split()[:3] == ["likert", "built", "in"] and probes.kind_class("likert").summary in line
               for line in kinds)
    assert main(["list", "instruments", "--kind", "entailment"]) == 0
    rows = [line.split()[:4] for line in capsys.readouterr().out.splitlines()[1:]]
    assert ["entailment", "--instrument", "stai_s", "20"] in rows and ["entailment", "--instrument", "gad7", "7"] in rows
    assert {r[0] for r in rows} == {"entailment"}
    assert main(["list", "instruments", "--kind", "memorization"]) == 0  # the option as `qclm probe KIND` takes it
    assert ["memorization", "--instrument", "gad7", "7"] in [line.split()[:4] for line in capsys.readouterr().out
                                                              .splitlines()]
    monkeypatch.setenv("QCLM_CACHE", str(tmp_path / "c"))
    assert main(["list", "models", "--models", str(ROOT / "config" / "models.tsv")]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[0] for r in rows] == ["embedded:smollm2-135m-instruct", "embedded:gemma3-270m",
                                    "smollm2-135m-instruct", "gemma3-270m"]
    assert rows[1][-1] == "installed" and rows[2][:4] == ["smollm2-135m-instruct", "embedded:smollm2-135m-instruct",
                                                          "local", "0.135"]
    (tmp_path / "c" / "models" / "gemma3-270m").mkdir(parents=True)
    (tmp_path / "c" / "models" / "gemma3-270m" / "qclm_prepared.json").write_text("{}")
    monkeypatch.chdir(tmp_path)  # outside a clone: no table by default, the embedded models alone
    assert main(["list", "models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[2].endswith("prepared in the cache")
    assert main(["list", "models", "--models", "nowhere.tsv"]) == 2
    assert capsys.readouterr().err == "nowhere.tsv: file: does not exist\n"
    # a reader that stops reading (| head): the listing ends quietly, exit 0, not with a broken pipe's traceback
    piped = subprocess.Popen([sys.executable, "-m", "qclm.commands", "list", "instruments"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert piped.stdout is not None and piped.stderr is not None
    piped.stdout.close()  # before the command has started to write
    said = piped.stderr.read()
    assert piped.wait(timeout=120) == 0 and said == "", said
    assert main(["list", "kinds", "--kind", "likert"]) == 2
    assert capsys.readouterr().err == "qclm list: --kind: is for instruments, not kinds\n"


# -- qclm probe's options (lm-eval's conventions) -------------------------------------------------------------------

def test_probe_takes_the_seed_the_batch_size_a_system_prompt_and_the_rows_columns(tmp_path, monkeypatch, capsys):
    """``--seed`` and ``--batch-size`` reach the engine the model loads with; ``--model-args`` gives the row's
    columns without a table and ``--system-prompt`` its system message, each checked as a table's row is, one line
    naming the option and the column where it is wrong (exit 2)."""
    from qclm.commands import probe as probe_command
    from qclm.jobs import backends

    seen = {}

    class Loaded(Exception):
        pass

    def load(spec, prepared, engine, responses=None):
        seen.update(spec=spec, engine=engine)
        raise Loaded

    monkeypatch.setattr(backends, "load", load)
    monkeypatch.setattr(probe_command, "_id_clashes", lambda *a: [])
    monkeypatch.setattr("qclm.models.loading.ensure_prepared", lambda spec, d: d)
    base = ["likert", "--model", "embedded:smollm2-135m-instruct", "--questionnaire", "gad7", "--out",
            str(tmp_path / "o")]
    with pytest.raises(Loaded):
        probe_command.probe_run(base[0], base[1:] + [
            "--seed", "7", "--batch-size", "3", "--model-args", "revision=abc, dtype=bfloat16,type=instruct",
            "--prompt-format", "chat", "--system-prompt", "You are calm."])
    spec, engine = seen["spec"], seen["engine"]
    assert (engine["seed"], engine["batch_size"]) == (7, 3)
    assert (spec.revision, spec.dtype, spec.type, spec.params_b) == ("abc", "bfloat16", "instruct", 0.0)
    assert (spec.prompt_format, spec.system_prompt) == ("chat", "You are calm.")
    for options, line in [
        (["--model-args", "dtype=float8"],
         "command line: --model-args dtype: must be one of auto, float32, bfloat16, float16; got 'float8'"),
        (["--model-args", "colour=red,name=x"],
         "command line: --model-args: unknown column(s) colour, name; the columns a command line may give: "
         "revision, params_b, type, family, dtype, quantization, double_quant, compute_dtype, trust_remote_code, "
         "allow_pickle, prompt_format, head, backend, server, api_key_env, gpus, logprobs, opening, system_prompt"),
        (["--system-prompt", "You are calm."],
         "command line: --system-prompt: a raw row's prompt is plain text, without chat messages to put a system "
         "message in: set prompt_format to chat, or leave it empty"),
        # text the model reads is checked as every such text (the model table's column too)
        (["--prompt-format", "chat", "--system-prompt", "\u200b"],
         "command line: --system-prompt: has only invisible characters (U+200B (ZERO WIDTH SPACE)): it is empty to "
         "a reader, not to a model"),
    ]:
        with pytest.raises(InputError) as err:
            probe_command.probe_run(base[0], base[1:] + options)
        assert err.value.lines == [line]
    for options, said in [(["--model-args", "dtype"], "--model-args: must be COLUMN=VALUE pairs separated by "
                           "commas, got 'dtype'"), (["--batch-size", "0"], "--batch-size: must be 1 or more, got 0")]:
        with pytest.raises(SystemExit) as stop:
            main(["probe", *base, *options])
        assert stop.value.code == 2 and said in capsys.readouterr().err


def test_results_json_says_what_its_headline_is_and_when_it_has_none(tmp_path):
    """results.json's headline: per model x instrument x condition, the items, the contexts and the mean item score
    (each item over its contexts, then over items; a table with Likert's questionnaire column read as any kind's);
    a kind without per-item scores gets none and a note saying so; NaN is written as null, never as bare NaN."""
    import json

    from qclm.analysis import results

    items = pd.DataFrame({"model": "m", "questionnaire": "q", "condition": ["stress"] * 4 + ["vanilla"] * 2,
                          "item_id": ["a", "a", "b", "b", "a", "b"], "stimulus_id": ["s1", "s2", "s1", "s2", None, None],
                          "score": [1.0, 3.0, 2.0, 2.0, 0.5, 1.5]})
    items.to_parquet(tmp_path / "items.parquet")
    written = results.write(tmp_path / "r.json", {"kind": "k", "engine": {"x": float("nan")}}, tmp_path / "items.parquet")
    body = json.loads(written.read_text())
    assert body["schema"] == results.SCHEMA and body["engine"] == {"x": None} and body["kind"] == "k"
    assert body["headline"] == [
        {"model": "m", "instrument": "q", "condition": "stress", "n_items": 2, "n_contexts": 2, "mean_item_score": 2.0},
        {"model": "m", "instrument": "q", "condition": "vanilla", "n_items": 2, "n_contexts": 1, "mean_item_score": 1.0}]
    none = json.loads(results.write(tmp_path / "n.json", {}, None).read_text())
    assert none["headline"] == [] and "no per-item table" in none["headline_note"]


def test_probe_limit_and_the_page_of_one_model_under_one_condition(tmp_path, tiny_llama_dir, capsys):
    """``qclm probe likert --limit 2`` scores the first two items of the instrument (and results.json says so); its
    page shows what one model under vanilla supports and lists the rest once, by what it needs (issue 55, item 4);
    a kind that scores whole instruments (memorization) refuses --limit in one line naming the kinds that take it,
    rather than ignore it."""
    import json

    out = tmp_path / "o"
    assert main(["probe", "likert", "--model", str(tiny_llama_dir), "--questionnaire", "gad7", "--limit", "2",
                 "--out", str(out)]) == 0
    items = pd.read_parquet(out / "scores" / "item_scores.parquet")
    assert sorted(items["item_id"].unique()) == ["G01", "G02"]
    results = json.loads((out / "results.json").read_text())
    assert results["limit_items"] == 2 and results["headline"][0]["n_items"] == 2
    # the page of one model under one condition: what it supports, shown; what it cannot, listed once by why,
    # not as empty tables and placeholder panels
    from qclm.analysis.plotting import unavailable

    page = (out / "report.html").read_text(encoding="utf-8")
    assert re.findall(r"<h2>([^<]*)</h2>", page) == [
        "Calibrated floors", "Across-model results: zscores (table)", "Across-model results: condition_summary (table)",
        "Validation: validation (table)", "Validation: item_heatmap (figure)",
        "Instrument library: instrument_validation (table)", "Not computed for this run"]
    assert "<li>z-scores need at least two models: fig3_condition_means (figure), fig4_model_scores (figure)</li>" \
        in page and "<li>needs two conditions of a contrast: per_model_shifts (figure), per_model (table)</li>" in page
    assert not [src for src in re.findall(r"<img src='([^']+)'", page) if unavailable(out / src)]
    assert "not calibrated on this model" in page  # the shipped floors do not cover a tiny model: said
    assert unavailable(out / "analysis" / "figures" / "fig3_condition_means.png") == \
        "z-scores need at least two models"
    capsys.readouterr()
    assert main(["probe", "memorization", "--model", str(tiny_llama_dir), "--instrument", "gad7", "--limit", "2",
                 "--out", str(tmp_path / "m")]) == 2
    from qclm import probes

    taking = [n for n, k in probes.loaded().items() if k.honours_limit_items]  # an installed kind's too
    assert {"likert", "entailment", "survey"} <= set(taking) and "memorization" not in taking
    assert capsys.readouterr().err.splitlines() == [
        "command line: --limit: the memorization kind scores whole instruments (kinds that take --limit: "
        f"{', '.join(taking)})"]
