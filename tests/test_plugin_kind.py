"""A probe kind as a package of its own, the way a lab ships one: a distribution that registers its kind under the
entry point group ``qclm.kinds`` (qclm.probes.ENTRY_POINTS), installed with pip, is found by its registered name
(``kind: yesno``) by the workflow (its table, figure and caption in the report), ``qclm probe``, ``qclm validate``
and the calibration (its own material), with no file of qclm edited. The distribution is built here from the test
kind's own files (tests/yesno_probe.py and its caption) and installed into a folder of its own that the commands'
``PYTHONPATH`` names (the tests directory is not on it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import ROOT, run_snakemake, write_workflow_config

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "qclm-yesno"
version = "0.1.0"
description = "A yes/no probe kind for qclm (its tests' kind as a package)"

[project.entry-points."qclm.kinds"]
yesno = "qclm_yesno:YesNoProbe"

[tool.setuptools]
packages = ["qclm_yesno"]

[tool.setuptools.package-data]
qclm_yesno = ["report/*.rst"]
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The kind's distribution, installed with pip (no index: it needs nothing beyond qclm) into a folder."""
    root = tmp_path_factory.mktemp("plugin")
    src, site = root / "src", root / "site"
    (src / "qclm_yesno").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "yesno_probe.py", src / "qclm_yesno" / "__init__.py")
    shutil.copytree(ROOT / "tests" / "report", src / "qclm_yesno" / "report")
    (src / "pyproject.toml").write_text(PYPROJECT)
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                          "--no-build-isolation", "--target", str(site), str(src)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert list(site.glob("qclm_yesno-0.1.0.dist-info/entry_points.txt"))
    return site


def _qclm(site: Path | None, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "qclm.commands", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def _config(tmp_path: Path) -> Path:
    q = ROOT / "resources" / "questionnaires"
    config = {
        "models": str(ROOT / "config" / "models_chat.tsv"), "models_dir": str(tmp_path / "models"),
        "stimuli": {"version": "long"}, "conditions": ["vanilla"],
        "probes": {"yn": {"kind": "yesno", "instrument": str(q / "gad7.yaml")}},
        "calibration": {"epochs": [1], "texts": 100, "repeats": 2,
                        "plants": {"yes": {"material": "yesno_answers", "probes": ["yn"], "answer": "first"}}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_an_installed_package_adds_a_kind_and_its_calibration_material(installed, tmp_path):
    listed = _qclm(installed, "probe", "--help")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "  yesno: P(Yes) after each item of an instrument (a test kind)" in listed.stdout
    config = _config(tmp_path)
    ok = _qclm(installed, "validate", "--config", str(config))
    assert ok.returncode == 0 and ok.stdout.strip().endswith(f"{config}: ok"), ok.stdout + ok.stderr[-2000:]
    # the kind's material goes through the material's own schema there too
    bad = yaml.safe_load(config.read_text())
    bad["calibration"]["plants"]["yes"]["answer"] = "maybe"
    config.write_text(yaml.safe_dump(bad, sort_keys=False))
    refused = _qclm(installed, "validate", "--config", str(config))
    assert refused.returncode != 0 and f"{config}: field calibration.plants.yes.answer: " in refused.stdout + \
        refused.stderr
    # the config section the kind brings (ProbeKind.config_schema) is validated as a shared one is
    bad["calibration"]["plants"]["yes"]["answer"] = "first"
    for lead, said in (("Q: ", None), (3, "field yesno.lead: ")):
        config.write_text(yaml.safe_dump({**bad, "yesno": {"lead": lead}}, sort_keys=False))
        checked = _qclm(installed, "validate", "--config", str(config))
        assert (checked.returncode == 0) == (said is None), checked.stdout + checked.stderr[-2000:]
        assert said is None or f"{config}: {said}" in checked.stdout + checked.stderr
    # without the package the name means nothing, and the message says what is known
    missing = _qclm(None, "validate", "--config", str(_config(tmp_path)))
    assert missing.returncode != 0
    assert "unknown probe kind 'yesno'" in missing.stdout + missing.stderr
    # the kind's own command joins the command line (ProbeKind.commands), beside the built-in kinds' own
    listed = _qclm(installed, "--help")
    assert "yesno-questions" in listed.stdout and "analyze" in listed.stdout and "words" in listed.stdout
    questions = _qclm(installed, "yesno-questions", str(ROOT / "resources" / "questionnaires" / "gad7.yaml"))
    assert questions.returncode == 0, questions.stderr[-2000:]
    lines = questions.stdout.splitlines()
    assert len(lines) == 7 and all(len(line.split("\t")) == 2 for line in lines), lines
    assert "yesno-questions" not in _qclm(None, "--help").stdout


def test_qclm_probe_runs_the_installed_kind_as_the_workflow_ran_the_module(installed, shared_run, tmp_path):
    """The installed kind, asked by its registered name (in the shared run's config too: the tests directory is not
    on the command's path), writes the cells the shared run wrote through the module path (tests/yesno_probe.py):
    the same requests, the same answers."""
    out = tmp_path / "probe"
    config = yaml.safe_load(shared_run.config.read_text())  # the shared run's, its test kind named by its entry point
    config["probes"]["yesno"]["kind"] = "yesno"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run = _qclm(installed, "probe", "yesno", "--model", "tiny-llama", "--models",
                str(shared_run.workdir / "models.tsv"), "--out", str(out), "--config", str(tmp_path / "config.yaml"),
                "--id", "yesno", "--conditions", "vanilla")
    assert run.returncode == 0, run.stderr[-3000:]
    mine = pd.read_parquet(out / "logprobs" / "tiny-llama" / "yesno" / "vanilla.parquet")
    theirs = pd.read_parquet(shared_run.results / "logprobs" / "tiny-llama" / "yesno" / "vanilla.parquet")
    pd.testing.assert_frame_equal(mine, theirs)
    items = pd.read_parquet(out / "scores" / "yesno_items.parquet")
    assert set(items["model"]) == {"tiny-llama"} and set(items["instrument"]) == {"yesno"}


def test_the_workflow_runs_the_installed_kind_into_its_tables_figure_and_report(installed, tmp_path, tiny_llama_dir):
    """The workflow, with the package installed (on the run's path; the tests directory is not), scores the kind
    by its registered name under two conditions, collects its item table, and files its own table, figure and
    caption in the report, as the module-path kind of the shared run does."""
    config = write_workflow_config(
        tmp_path, {"tiny-llama": tiny_llama_dir}, questionnaires={}, conditions=["vanilla", "stress"],
        probes={"yn": {"kind": "yesno", "instrument": str(ROOT / "resources/questionnaires/gad7.yaml")}},
        report=True)
    data = yaml.safe_load(config.read_text())
    del data["questionnaires"]
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    run = run_snakemake(tmp_path, config, env={"PYTHONPATH": str(installed)})
    assert run.returncode == 0, run.stderr[-3000:]
    res = tmp_path / "results"
    raw = pd.read_parquet(res / "logprobs" / "tiny-llama" / "yn" / "stress.parquet")
    assert len(raw) == 2 * 2 and raw["p_yes"].between(0, 1).all()  # limit_items 2, limit_stimuli 2
    items = pd.read_parquet(res / "scores" / "yesno_items.parquet")
    assert set(items["instrument"]) == {"yn"} and set(items["condition"]) == {"vanilla", "stress"}
    rates = pd.read_csv(res / "analysis" / "yesno_rates.csv")
    assert set(rates["condition"]) == {"vanilla", "stress"}
    assert (res / "analysis" / "figures" / "yesno_rates.png").stat().st_size > 5_000
    html = (res / "report.html").read_text(errors="replace")
    assert "yesno_rates.png" in html and "yesno_rates.html" in html
