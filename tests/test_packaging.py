"""The wheel a lab installs: built from the repository, it carries the shipped instruments, stimuli, word lists and
corpora as package data (qclm/data), so that installed outside any clone it runs ``qclm probe likert --model
embedded:smollm2-135m-instruct --questionnaire gad7``, the instrument named by its name (qclm.shipped).

The wheel is installed with pip into a folder of its own and run from another (neither is the repository), that
folder first on ``PYTHONPATH`` so that its qclm, not the clone's editable one, is imported; its dependencies are the
test environment's (a clean environment would download them: torch alone is 200 MB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                            "--wheel-dir", str(root / "dist"), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (root / "dist").glob("qclm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # every shipped file of resources/ is in it, the prepared models are not
    shipped = sorted(str(p.relative_to(ROOT / "resources")) for p in (ROOT / "resources").rglob("*")
                     if p.is_file() and p.relative_to(ROOT / "resources").parts[0] != "models")
    assert len(shipped) > 30 and all(f"qclm/data/{s}" in names for s in shipped), \
        [s for s in shipped if f"qclm/data/{s}" not in names]
    assert not [n for n in names if n.startswith("qclm/data/models")]
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                                "--target", str(root / "site"), str(wheel)], capture_output=True, text=True,
                               timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    return root / "site"


def _run(site: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_the_wheel_probes_a_shipped_instrument_by_its_name_outside_the_repository(wheel_site, smollm2_prepared_dir,
                                                                                  tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    where = _run(wheel_site, work, "-c", "import qclm.shipped as s; print(s.DATA)")
    assert where.returncode == 0 and where.stdout.strip() == str(wheel_site / "qclm" / "data"), where.stdout
    # the embedded model as this machine has prepared it (the test's build), in the user's cache where the command
    # looks by default
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / "smollm2-135m-instruct").symlink_to(smollm2_prepared_dir)
    run = _run(wheel_site, work, "-m", "qclm.commands", "probe", "likert", "--model",
               "embedded:smollm2-135m-instruct", "--questionnaire", "gad7", "--out", "out", QCLM_CACHE=str(cache))
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(p.name for p in work.iterdir()) == ["out"]  # nothing written where it ran but --out
    items = pd.read_parquet(work / "out" / "scores" / "item_scores.parquet")
    assert set(items["questionnaire"]) == {"gad7"} and items["item_id"].nunique() == 7
    assert set(items["model"]) == {"smollm2-135m-instruct"} and items["score"].notna().all()
    page = (work / "out" / "report.html").read_text()
    assert "<h1>qclm probe likert on smollm2-135m-instruct</h1>" in page
    # the page sets the run against the kind's calibrated floor on this model (the shipped floors.csv's line)
    import html

    from qclm.analysis import floors

    shipped = [r for r in floors.read(ROOT / floors.SHIPPED) if (r["kind"], r["base_model"], r["metric"], r["tier"])
               == ("likert", "smollm2-135m-instruct", "score_shift", "1")]
    assert shipped and f"<td>smollm2-135m-instruct</td><td>score_shift</td><td>{html.escape(floors.floor_line(shipped[0]), quote=False)}" \
        in page, page[:3000]
    # results.json beside the page: the command, the versions, the tables, and the headline read from the items
    results = json.loads((work / "out" / "results.json").read_text())
    assert results["command"][:3] == ["qclm", "probe", "likert"] and results["versions"]["qclm"].startswith("0.")
    assert results["model"]["source"] == "embedded:smollm2-135m-instruct" and results["conditions"] == ["vanilla"]
    assert Path(results["tables"]["items"]) == Path("out") / "scores" / "item_scores.parquet"
    assert results["headline"] == [{"model": "smollm2-135m-instruct", "instrument": "gad7", "condition": "vanilla",
                                    "n_items": 7, "n_contexts": 1,
                                    "mean_item_score": pytest.approx(items.groupby("item_id")["score"].mean().mean())}]
    listing = _run(wheel_site, work, "-m", "qclm.commands", "cache", QCLM_CACHE=str(cache))
    assert listing.returncode == 0 and listing.stdout.startswith(f"{cache}: 1 entry, "), listing.stdout
    assert listing.stdout.splitlines()[1].split()[:2] == ["models", "smollm2-135m-instruct"], listing.stdout
    # a name that ships nothing is refused with the names that do
    bad = _run(wheel_site, work, "-m", "qclm.commands", "probe", "likert", "--model",
               "embedded:smollm2-135m-instruct", "--questionnaire", "gad8", "--out", "out2", QCLM_CACHE=str(cache))
    assert bad.returncode == 2
    assert "file gad8 does not exist (nor a shipped questionnaires file: brs, gad7, " in bad.stderr, bad.stderr


def test_a_kinds_defaults_and_shipped_names_read_the_shipped_files_outside_a_clone(tmp_path, monkeypatch):
    """Outside a clone (no resources/ in the working directory) a kind's default under resources/ and a shipped
    name read the package's copies; inside it, a default stays the path the config would give."""
    from qclm import probes, shipped

    memorization = probes.kind_class("memorization")
    here = probes.settings_of(memorization, {"instruments": ["gad7"]})
    assert here["decoy"] == "resources/memorization/decoy.yaml"  # the tests run in the clone
    monkeypatch.chdir(tmp_path)
    away = probes.settings_of(memorization, {"instruments": ["gad7", "phq9.yaml"]})
    assert away["decoy"] == str(shipped.DATA / "memorization" / "decoy.yaml")
    assert away["instruments"] == [str(shipped.DATA / "questionnaires" / f) for f in ("gad7.yaml", "phq9.yaml")]
    assert probes.settings_of(memorization, {"instruments": ["nothing_shipped"]})["instruments"] == ["nothing_shipped"]
