"""Snakemake end to end on tiny random models, one shared run (conftest.shared_run): every stage's files in the
documented shape, a class unknown to the code and a composed condition, a probe kind written in the tests
(tests/yesno_probe.py) under every condition and through `qclm probe`, and settings by stage (a changed scoring
math setting reruns no scoring job)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import ROOT, SHARED_CONDITIONS, SHARED_QUESTIONNAIRES, workflow_env

from qclm.parquet import read_metadata
from qclm.probes.likert.kind import COLUMNS
from qclm.questionnaire import INSTRUMENT_COLUMNS

pytestmark = pytest.mark.slow
#: contexts per model under the shared run's conditions: vanilla + 2 stimuli x 4 stimulus conditions
CONTEXTS = 1 + 2 * 4


def test_every_stage_writes_its_tables(shared_run):
    res = shared_run.results
    for model in shared_run.models:
        for q in SHARED_QUESTIONNAIRES:
            for cond in SHARED_CONDITIONS:
                path = res / "logprobs" / model / q / f"{cond}.parquet"
                assert pq.read_schema(path).names == COLUMNS
                meta = read_metadata(path)
                assert meta["model"] == model and meta["condition"] == cond and meta["kind"] == "likert"
                assert meta["source"] == str(shared_run.models[model]) and meta["scoring_method"] == "prefix-tree"
        log = (shared_run.workdir / "logs" / "score" / model / "stai_s" / "stress.log").read_text()
        assert "2 contexts" in log and "tokens computed" in log
    items = pd.read_parquet(res / "scores" / "item_scores.parquet")
    # 2 models x 2 items x 9 contexts x templates (the STAI files have 3, scored everywhere here; GAD-7 and RSES 1)
    assert len(items) == 2 * 2 * CONTEXTS * (3 + 3 + 1 + 1)
    stai = items[items["questionnaire"].isin(["stai_s", "stai_t"])]
    assert stai.groupby("template")["default_template"].first().to_dict() == {
        "question": True, "statement": False, "interview": False}
    assert set(items.columns) >= {"model", "questionnaire", "item_id", "condition", "stimulus_id", "score", "params_b"}
    assert items.loc[items.condition == "vanilla", "stimulus_id"].eq("").all()
    conds = pd.read_csv(res / "scores" / "condition_means.csv")
    assert len(conds) == 2 * len(SHARED_QUESTIONNAIRES) * len(SHARED_CONDITIONS)
    first = items[items["default_template"]].groupby(["model", "questionnaire", "condition"])["score"].mean()
    got = conds.set_index(["model", "questionnaire", "condition"])["score"]
    np.testing.assert_allclose(got.loc[first.index], first, rtol=1e-12)  # questionnaire scores: first template
    wording = pd.read_csv(res / "analysis" / "wording.csv")
    assert set(wording.loc[wording["n_templates"] == 3, "questionnaire"]) == {"stai_s", "stai_t"}
    assert set(pd.read_csv(res / "scores" / "silhouette.csv").columns) == {
        "model", "questionnaire", "template", "default_template", "item_id", "silhouette"}
    assert (res / "analysis" / "paired_tests.csv").exists()
    assert (res / "analysis" / "figures" / "fig3_condition_means.png").stat().st_size > 10_000
    info = json.loads((res / "analysis" / "run_info.json").read_text())
    assert info["contrasts"] == [list(c) for c in yaml.safe_load(shared_run.config.read_text())["contrasts"]]
    for name in ("per_model_state_trait", "per_model_interaction"):
        assert len(pd.read_csv(res / "analysis" / f"{name}.csv")) > 0
    overview = (res / "analysis" / "overview.md").read_text()
    assert "**Models (2; size, dtype, prompt format)**" in overview
    assert set(items["dtype"]) == {"float32"} and set(items["prompt_format"]) == {"raw"}  # as the jobs ran
    assert "float32, raw" in overview


def test_a_class_name_unknown_to_the_code_and_a_composed_condition(shared_run):
    """A class that appears nowhere in the code ("soothing") and the composed condition stress+soothing: the
    composed contexts are the two stimuli joined by the separator, and each contrast gets its design."""
    res = shared_run.results
    composed = pd.read_parquet(res / "logprobs" / "tiny-llama" / "stai_s" / "stress+soothing.parquet")
    assert sorted(set(composed["stimulus_id"])) == ["stress01+soothing01", "stress02+soothing02"]
    meta = read_metadata(res / "logprobs" / "tiny-llama" / "stai_s" / "stress+soothing.parquet")
    assert meta["stimuli_files"] == [str(ROOT / "resources/stimuli/stress.yaml"),
                                     str(shared_run.workdir / "soothing.yaml")]
    st = pd.read_csv(res / "analysis" / "per_model_state_trait.csv")
    assert dict(zip(st["contrast"], st["design"])) == {
        "vanilla vs stress": "vanilla", "vanilla vs neutral": "vanilla", "neutral vs stress": "independent",
        "stress vs stress+soothing": "paired", "soothing vs stress": "independent"}
    tests = pd.read_csv(res / "analysis" / "paired_tests.csv")
    assert list(tests["contrast"].unique()) == ["vanilla vs stress", "vanilla vs neutral", "neutral vs stress",
                                                "stress vs stress+soothing", "soothing vs stress"]
    overview = (res / "analysis" / "overview.md").read_text()
    assert "stress+soothing (2 stimuli)" in overview and "UNDERPOWERED" in overview


def test_the_instrument_table_reaches_the_analysis(shared_run):
    res = shared_run.results
    inst = pd.read_csv(res / "scores" / "instruments.csv")
    assert inst["questionnaire"].tolist() == list(SHARED_QUESTIONNAIRES) and list(inst.columns) == list(
        INSTRUMENT_COLUMNS)
    assert inst["construct"].tolist() == ["anxiety", "anxiety", "anxiety", "self-esteem"]
    assert inst["n_items"].tolist() == [20, 20, 7, 10]  # the files' items, whatever limit_items scores
    cmap = pd.read_csv(res / "analysis" / "construct_map.csv", keep_default_na=False)
    within = cmap[cmap["scope"] == "within model"]
    assert set(cmap["scope"]) == {"within model"}  # two tiny models: no across-model rows
    pairs = dict(zip(within["questionnaire_a"] + "~" + within["questionnaire_b"], within["expected_sign"]))
    assert pairs["stai_s~gad7"] == "+" and pairs["stai_s~rses"] == "-" and pairs["gad7~rses"] == "-"
    assert (within["n"] == CONTEXTS).all()
    assert json.loads((res / "analysis" / "run_info.json").read_text())["instruments"] == \
        "results/scores/instruments.csv"
    assert "Instrument library:" in (res / "analysis" / "overview.md").read_text()


def test_a_probe_kind_written_in_the_tests_runs_under_every_condition(shared_run):
    """tests/yesno_probe.py (one module) and its config section: P(Yes) after every item, under every condition,
    collected across models, and the per-model state-trait decomposition of its per-item numbers."""
    res = shared_run.results
    for model in shared_run.models:
        for cond in SHARED_CONDITIONS:
            raw = pd.read_parquet(res / "logprobs" / model / "yesno" / f"{cond}.parquet")
            assert len(raw) == 2 * (1 if cond == "vanilla" else 2)  # limit_items 2, limit_stimuli 2
            assert raw["p_yes"].between(0, 1).all() and (raw["logp_yes"] < 0).all()
            p = np.exp(raw["logp_yes"]) / (np.exp(raw["logp_yes"]) + np.exp(raw["logp_no"]))
            np.testing.assert_allclose(raw["p_yes"], p, rtol=1e-9)
            meta = read_metadata(res / "logprobs" / model / "yesno" / f"{cond}.parquet")
            assert meta["kind"] == "yesno_probe" and meta["options"] == ["Yes", "No"]
    items = pd.read_parquet(res / "scores" / "yesno_items.parquet")
    assert len(items) == 2 * 2 * CONTEXTS and set(items["instrument"]) == {"yesno"}
    st = pd.read_csv(res / "analysis" / "yesno_state_trait.csv")
    assert len(st) == 2 * 5 and set(st["model"]) == set(shared_run.models)
    assert st["eta2_condition"].between(0, 1).all() and st["underpowered"].all()  # 2 stimuli per condition


@pytest.fixture(scope="module")
def workflow_report(shared_run) -> Path:
    """The report the shared run ended with (the config's default `report: true`: the Snakefile's onsuccess runs
    `snakemake --report` on the run's own config), as a user's plain `snakemake --cores 2 --resources gpu=1` leaves
    it."""
    path = shared_run.results / "report.html"
    assert "Report: results/report.html" in shared_run.stderr and path.is_file(), shared_run.stderr[-3000:]
    return path


@pytest.fixture(scope="module")
def probe_out(shared_run, tmp_path_factory) -> Path:
    """`qclm probe` of the test kind on one model of the shared run, under two of its conditions."""
    out = tmp_path_factory.mktemp("probe") / "probe"
    cmd = [sys.executable, "-m", "qclm.commands", "probe", "yesno_probe", "--model", "tiny-llama",
           "--models", str(shared_run.workdir / "models.tsv"), "--out", str(out), "--config", str(shared_run.config),
           "--id", "yesno", "--conditions", "vanilla,stress+soothing"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=workflow_env(), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def test_a_probe_kind_written_in_the_tests_has_its_own_table_figure_and_caption_in_the_report(shared_run,
                                                                                              workflow_report):
    """The test kind declares its own table, figure and caption (tests/yesno_probe.py `outputs`, the caption beside
    it in tests/report/): the workflow writes them and `snakemake --report` files them under the kind's own category,
    numbered after the Likert and the run's earlier kinds, with the caption."""
    res = shared_run.results
    rates = pd.read_csv(res / "analysis" / "yesno_rates.csv")
    assert len(rates) == 2 * len(SHARED_CONDITIONS) and (rates["baseline"] == 0.5).all()
    assert rates["p_yes"].between(0, 1).all()
    assert (rates["underpowered"] == (rates["condition"] != "vanilla")).all()  # 2 stimuli per condition
    assert (res / "analysis" / "figures" / "yesno_rates.png").stat().st_size > 5_000
    html = workflow_report.read_text()
    assert "Yes-no answers (a probe kind written in the tests)" in html  # the caption
    assert "6. A probe written in the tests" in html  # Likert 1-5, then the run's kinds in config order
    assert "7. Entailment items" in html and "8. Implicit sentiment" in html
    assert "yesno_rates.png" in html and "yesno_rates.html" in html


def test_qclm_probe_writes_the_tables_the_workflow_writes(shared_run, probe_out):
    """`qclm probe KIND` on one model: the same raw cells and collected items as the workflow's."""
    out = probe_out
    for cond in ("vanilla", "stress+soothing"):
        mine = pd.read_parquet(out / "logprobs" / "tiny-llama" / "yesno" / f"{cond}.parquet")
        theirs = pd.read_parquet(shared_run.results / "logprobs" / "tiny-llama" / "yesno" / f"{cond}.parquet")
        pd.testing.assert_frame_equal(mine, theirs)
    items = pd.read_parquet(out / "scores" / "yesno_items.parquet")
    assert set(items["condition"]) == {"vanilla", "stress+soothing"} and set(items["model"]) == {"tiny-llama"}
    assert (out / "analysis" / "yesno_state_trait.csv").exists()
    # and a page of that analysis: each declared table inline, each figure beside it, under its caption
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h1>qclm probe yesno_probe on tiny-llama</h1>" in page and "{{" not in page
    assert page.count("<section") == 4 and "not written" not in page
    assert "<h2>Calibrated floors</h2><p>No calibrated floor of this probe kind in" in page  # the shipped file
    # its state-trait table has no contrast of these two conditions: listed once as not computed, not shown empty
    assert "<h2>Not computed for this run</h2>" in page and "<li>nothing to compute on this run&#x27;s data (its " \
        "caption says what it needs): yesno_state_trait (table)</li>" in page
    assert "<th>p_yes</th>" in page and "<th>baseline</th>" in page
    images = re.findall(r"<img src='([^']+)'", page)
    assert images == ["analysis/figures/yesno_rates.png"] and all((out / i).is_file() for i in images)
    assert "<strong>Yes-no answers (a probe kind written in the tests).</strong> Mean probability" in page
    assert "<code>analysis.min_stimuli</code>" in page  # tests/report/yesno_rates.rst, as HTML


def test_the_reports_open_in_a_browser_with_every_figure_and_no_error(browser, workflow_report, probe_out):
    """Both reports in Debian's chromium (headless, selenium): the page of `qclm probe` shows its figure (loaded,
    not a broken image) and its tables; the report the shared run ended with renders its categories, the test
    kind's among them, and opens on the run's own first page: the headline with its nulls marked, and each kind's
    calibrated floors beside them (the shipped floors, which do not cover a tiny model: said so); the console of
    neither shows an error."""
    page = browser(probe_out / "report.html")
    assert page["images"] and all(width > 0 for _, width in page["images"]), page["images"]
    assert page["tables"] == 1 and page["errors"] == [], page["errors"]  # the empty one is listed, not shown
    report = browser(workflow_report, wait_for="A probe written in the tests")
    assert report["errors"] == [], report["errors"]
    assert "A probe written in the tests" in report["text"] and "Implicit sentiment" in report["text"]
    first = report["rendered"]
    assert "What this run measured" in first and "null (CI covers 0)" in first, first[:3000]
    # each kind's section (Likert, entailment, CSI) ends with its floors, or says the shipped file has none of it
    from qclm.analysis import floors

    shipped = {r["kind"] for r in floors.read(ROOT / floors.SHIPPED)}
    tables = first.count("Calibrated floors of this probe on the run's models")
    assert tables == len(shipped & {"likert", "entailment", "csi"}) >= 1  # the Likert floors ship
    assert tables + first.count("No calibrated floor of this probe kind in") >= 3
    assert "not calibrated on this model" in first


def test_qclm_probe_likert_scores_each_questionnaire_given_as_an_instance_of_its_own(shared_run, tmp_path, capsys):
    """`qclm probe likert --questionnaire A --questionnaire B` (as a config's questionnaires): each file its own
    instance named by its file, on the one loaded model, with the workflow's raw cells and the state-trait table of
    the pair. Another kind's instance of the same id in the same --out would overwrite its cells: refused before the
    model loads, naming --id."""
    from qclm.commands import main

    out = tmp_path / "probe"
    q = ROOT / "resources" / "questionnaires"
    assert main(["probe", "likert", "--model", "tiny-llama", "--models", str(shared_run.workdir / "models.tsv"),
                 "--out", str(out), "--config", str(shared_run.config), "--conditions", "vanilla,stress",
                 "--questionnaire", str(q / "stai_s.yaml"), "--questionnaire", str(q / "stai_t.yaml")]) == 0
    for name in ("stai_s", "stai_t"):
        for cond in ("vanilla", "stress"):
            pd.testing.assert_frame_equal(
                pd.read_parquet(out / "logprobs" / "tiny-llama" / name / f"{cond}.parquet"),
                pd.read_parquet(shared_run.results / "logprobs" / "tiny-llama" / name / f"{cond}.parquet"))
    items = pd.read_parquet(out / "scores" / "item_scores.parquet")
    assert set(items["questionnaire"]) == {"stai_s", "stai_t"} and set(items["condition"]) == {"vanilla", "stress"}
    state_trait = pd.read_csv(out / "analysis" / "per_model_state_trait.csv")
    assert set(state_trait["model"]) == {"tiny-llama"} and len(state_trait) > 0
    capsys.readouterr()
    assert main(["probe", "yesno_probe", "--model", "tiny-llama", "--models", str(shared_run.workdir / "models.tsv"),
                 "--out", str(out), "--instrument", str(q / "stai_s.yaml")]) == 2  # named by its file too
    err = capsys.readouterr().err
    assert "--id: " in err and "holds the cells of a likert instance named stai_s, which this yesno_probe instance " \
        "would overwrite" in err, err


def _dry_run(shared_run, tmp_path, change) -> str:
    config = yaml.safe_load(shared_run.config.read_text())
    change(config)
    cfg = tmp_path / "changed.yaml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", "-n", "-s", str(ROOT / "Snakefile"), "--directory",
           str(shared_run.workdir), "--cores", "2", "--resources", "gpu=1", "--configfile", str(cfg),
           "--replace-workflow-config", "--rerun-triggers", "mtime", "params", "input", "software-env"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=workflow_env(), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def _jobs(dry_run_output: str) -> set[str]:
    """The rules of a dry run's job table ("Job stats:", then "job count", dashes, one line per rule, "total")."""
    if "Job stats:" not in dry_run_output:
        return set()
    jobs = set()
    for line in dry_run_output.split("Job stats:", 1)[1].splitlines()[3:]:
        if not line.strip() or line.split()[0] == "total":
            break
        jobs.add(line.split()[0])
    return jobs


def test_a_changed_scoring_math_setting_reruns_no_scoring_job(shared_run, tmp_path):
    """Settings by stage: the scoring math (config `scoring`) is not in the scoring jobs' params, the engine
    settings are."""
    out = _dry_run(shared_run, tmp_path, lambda c: c["equations"].update(aggregation="geometric"))
    math = _jobs(out)
    assert not {j for j in math if j.startswith("score")}, math
    assert {"cells_likert", "collect_likert", "analyze_likert"} <= math, math
    assert "collect_yesno_probe" not in math, out  # its tables do not depend on the scoring math
    engine = _jobs(_dry_run(shared_run, tmp_path, lambda c: c["engine"].update(boundary="split")))
    assert "score" in engine, engine
    nothing = _dry_run(shared_run, tmp_path, lambda c: c["engine"].update(threads=1))
    assert "Nothing to be done" in nothing, nothing[-2000:]


def test_a_changed_wording_setting_rescores_only_the_likert_cells(shared_run, tmp_path):
    """The Likert wordings (templates.score) are in the Likert cells' params only, scored by a job of their own
    (score_likert): changing them schedules no scoring job of another kind, nor its tables; only the analysis of a
    kind that reads the Likert tables (its optional_tables: the behaviour kind's validity table) runs again."""
    from qclm import probes

    jobs = _jobs(_dry_run(shared_run, tmp_path, lambda c: c["templates"].update(score="first")))
    readers = {f"analyze_{i.kind}" for i in probes.instances(yaml.safe_load(shared_run.config.read_text()))
               if any(kind == "likert" for kind, _ in probes.kind_class(i.kind).optional_tables.values())}
    assert readers == {"analyze_behaviour"}
    assert {"score_likert", "cells_likert", "collect_likert", "analyze_likert"} <= jobs, jobs
    assert not {j for j in jobs if j.startswith(("score", "cells_", "collect_", "analyze_"))} - {
        "score_likert", "cells_likert", "collect_likert", "analyze_likert"} - readers, jobs


def test_a_finished_run_has_nothing_to_do(shared_run, tmp_path):
    assert "Nothing to be done" in _dry_run(shared_run, tmp_path, lambda c: None)


def _status(shared_run, tmp_path, change) -> list[str]:
    """`qclm status` on the shared run's config as changed by ``change``: its lines (it exits 0)."""
    config = yaml.safe_load(shared_run.config.read_text())
    change(config)
    cfg = tmp_path / "status.yaml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "status", "--config", str(cfg)],
                         cwd=shared_run.workdir, capture_output=True, text=True, env=workflow_env(), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.splitlines()


def test_qclm_status_counts_the_cells_the_workflow_made(shared_run, tmp_path):
    """`qclm status`: every cell of the finished run done, per model and in all (the count is the raw tables the run
    wrote); under a changed engine setting every cell stale (the scoring jobs would run again, as the dry run above
    says); with only the cell cache of a killed job, every cell cached."""
    written = sorted((shared_run.results / "logprobs").glob("*/*/*.parquet"))
    n = len(written)
    lines = _status(shared_run, tmp_path, lambda c: None)
    for model in shared_run.models:
        row = next(line.split() for line in lines if line.split()[0] == model)
        cells = len([p for p in written if p.parts[-3] == model])
        assert row[1:6] == [str(cells), str(cells), "0", "0", "0"], lines
    assert f"{n} cells of 2 models: {n} done, 0 cached, 0 stale, 0 left" in lines[len(shared_run.models) + 1], lines
    stale = _status(shared_run, tmp_path, lambda c: c["engine"].update(boundary="split"))
    assert f"{n} cells of 2 models: 0 done, 0 cached, {n} stale, 0 left" in stale[len(shared_run.models) + 1], stale
    killed = tmp_path / "killed"
    shutil.copytree(shared_run.results / "cache", killed / "cache")
    cached = _status(shared_run, tmp_path, lambda c: c.update(results=str(killed)))
    assert f"{n} cells of 2 models: 0 done, {n} cached, 0 stale, 0 left" in cached[len(shared_run.models) + 1], cached



def test_the_entailment_kind_runs_under_every_condition(shared_run):
    """The entailment kind (docs/entailment.md) under every condition: P(True) of the forced choice, the Likert
    tables from the Likert equations, its analysis table with baselines, and the state-trait decomposition."""
    res = shared_run.results
    for model in shared_run.models:
        for cond in SHARED_CONDITIONS:
            raw = pd.read_parquet(res / "logprobs" / model / "gad7_ent" / f"{cond}.parquet")
            # limit_items 2: G01 (3 + 3 cterms) and G02 (2 + 2) x 8 intensifiers, per context
            assert len(raw) == (6 + 4) * 8 * (1 if cond == "vanilla" else 2)
            lp = raw[["logp_true", "logp_false", "logp_neither"]].to_numpy()
            np.testing.assert_allclose(raw["p_raw"], np.exp(lp[:, 0]) / np.exp(lp).sum(axis=1), rtol=1e-9)
            assert read_metadata(res / "logprobs" / model / "gad7_ent" / f"{cond}.parquet")["form"] == "qclm"
    items = pd.read_parquet(res / "scores" / "entailment_item_scores.parquet")
    assert len(items) == 2 * 2 * CONTEXTS and set(items["questionnaire"]) == {"gad7_ent"}
    conds = pd.read_csv(res / "scores" / "entailment_condition_means.csv")
    assert len(conds) == 2 * len(SHARED_CONDITIONS)
    table = pd.read_csv(res / "analysis" / "entailment.csv")
    assert len(table) == 2 * len(SHARED_CONDITIONS) and (table["chance_score"] == 0).all()
    assert table.loc[table["condition"] != "vanilla", "underpowered"].all()  # 2 stimuli < min_stimuli
    assert len(pd.read_csv(res / "analysis" / "entailment_state_trait.csv")) > 0
    assert (res / "analysis" / "figures" / "entailment.png").stat().st_size > 10_000
    assert "## Entailment items" in (res / "analysis" / "overview.md").read_text()


def test_the_csi_kind_runs_under_every_condition(shared_run):
    """The CSI kind (issue 18) in the workflow: every condition's cell on both tiny models (each stimulus a
    context), its score tables, and its analysis: O + P + N = 1 and consistency >= O + P per model and condition,
    the valence control, the condition contrasts paired over words, and the state-trait decomposition with words
    as subjects."""
    from qclm.probes import kind_class

    res = shared_run.results
    for model in shared_run.models:
        for cond in SHARED_CONDITIONS:
            raw = pd.read_parquet(res / "logprobs" / model / "csi" / f"{cond}.parquet")
            contexts = 1 if cond == "vanilla" else 2
            assert len(raw) == contexts * (12 + 12) * 2 and (raw["part"] != "story").all()  # base models
            assert read_metadata(res / "logprobs" / model / "csi" / f"{cond}.parquet")["csi_mode"] == "list"
    words = pd.read_csv(res / "scores" / "csi_words.csv", keep_default_na=False)
    assert len(words) == 2 * len(SHARED_CONDITIONS) * (12 + 12)
    items = pd.read_parquet(res / "scores" / "csi_items.parquet")
    assert len(items) == 2 * 12 * CONTEXTS and set(items["instrument"]) == {"csi"}
    for output in kind_class("csi").analysis_outputs():
        for name in output.files:
            assert (res / "analysis" / name).exists(), name
    scores = pd.read_csv(res / "analysis" / "csi_scores.csv")
    assert len(scores) == 2 * len(SHARED_CONDITIONS)
    np.testing.assert_allclose(scores["O"] + scores["P"] + scores["N"], 1)
    assert (scores["consistency"] >= scores["O"] + scores["P"] - 1e-12).all()
    assert (scores["consistency_random"] == 0.5).all()  # 2 x 0.5^2
    assert (scores["underpowered"] == (scores["interpretable"].astype(str) != "True")).all()
    validity = pd.read_csv(res / "analysis" / "csi_validity.csv")
    control = validity[validity["set"] == "control"]
    assert len(control) == 2 * len(SHARED_CONDITIONS) and control["auc"].between(0, 1).all()
    contrasts = pd.read_csv(res / "analysis" / "csi_contrasts.csv")
    assert len(contrasts) == 2 * 5 and contrasts["underpowered"].all()  # 2 stimuli per condition
    assert (contrasts["n_words"] == 12).all()
    st = pd.read_csv(res / "analysis" / "csi_state_trait.csv")
    assert len(st) == 2 * 5 and (st["n_items"] == 12).all() and st["underpowered"].all()
    overview = (res / "analysis" / "overview.csi.md").read_text()
    assert "Implicit sentiment" in overview and "not interpretable" in overview


def test_a_run_of_part_of_the_workflow_writes_no_report_and_a_failed_report_costs_the_run_nothing(tmp_path,
                                                                                                   monkeypatch):
    """The report a run ends with (qclm.analysis.snakemake_report.write, the Snakefile's onsuccess): where an output
    of the whole workflow is missing (a target, --until), none, and a line saying what to type once they are; where
    `snakemake --report` fails, a line with its exit, its last words and the command to retry, and no exception."""
    from qclm.analysis import snakemake_report

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLURM_CONF", os.devnull)  # as workflow_env: Snakemake's start skips the wait for a controller
    (tmp_path / "a.csv").write_text("x\n")
    lines: list[str] = []
    assert snakemake_report.write(ROOT / "Snakefile", {}, "res", ["a.csv", "res/b.csv"], log=lines.append) is None
    assert lines == ["res/report.html: not written: 1 of the workflow's outputs are not there (a run of part of it), "
                     "for one res/b.csv; once they are, run the workflow again or type: snakemake --report "
                     "res/report.html"]
    assert not (tmp_path / ".snakemake").exists() and not (tmp_path / "res").exists()
    lines.clear()
    assert snakemake_report.write(tmp_path / "no-such-Snakefile", {"models": "m.tsv"}, "res", ["a.csv"],
                                  log=lines.append) is None
    assert lines[0] == "Writing the run's report: res/report.html (snakemake --report)"
    assert lines[1].startswith("res/report.html: not written: snakemake --report ended with exit 1: ")
    assert lines[1].endswith(f"--configfile {snakemake_report.CONFIG_COPY} --replace-workflow-config --cores 1 "
                             "--report res/report.html)") and len(lines) == 2
    assert not (tmp_path / "res" / "report.html").exists()
