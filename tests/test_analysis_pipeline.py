"""`qclm analyze` end to end: output tables against independent computations on a paper-sized run, planted
effects, few models, bad input. The runs several tests read are session fixtures (tests/analysis_fixtures.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as sps
from statsmodels.stats.anova import AnovaRM
from statsmodels.stats.multitest import multipletests

from qclm.analysis import registry
from qclm.analysis.synthetic import synthetic_item_scores, synthetic_variant_probs
from qclm.analysis.table_files import to_markdown
from qclm.commands import main
from qclm.errors import InputError
from qclm.probes.likert.analysis import analyze
from qclm.probes.likert.kind import LikertProbe

LIKERT_OUTPUTS = LikertProbe.analysis_outputs()

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # pingouin 0.7 on pandas 3.1
TABLES = registry.names(LIKERT_OUTPUTS, registry.TABLE)
FIGURES = registry.names(LIKERT_OUTPUTS, registry.FIGURE)
N = 35  # models in the paper run


def _condition_scores(items: pd.DataFrame) -> pd.DataFrame:
    """Independent aggregation: item mean per stimulus (eq. 3/5), then mean over the stimuli of a class."""
    q = items.groupby(["model", "questionnaire", "condition", "stimulus_id"], as_index=False)["score"].mean()
    c = q.groupby(["model", "questionnaire", "condition"], as_index=False)["score"].mean()
    van = c[c["condition"] == "vanilla"].groupby("questionnaire")["score"].agg(["mean", "std"])
    c["z"] = (c["score"] - c["questionnaire"].map(van["mean"])) / c["questionnaire"].map(van["std"])
    return c


# --------------------------------------------------------------------------- tables against references

def test_all_tables_written_with_markdown_copies(paper_run):
    out = paper_run.out
    for name in TABLES:
        assert (out / f"{name}.csv").stat().st_size > 0
        md = (out / "tables" / f"{name}.md").read_text().splitlines()
        assert len(md) == len(pd.read_csv(out / f"{name}.csv")) + 2
        assert (out / "tables" / f"{name}.html").exists()
    assert (out / "run_info.json").exists()


def test_zscores_match_independent_aggregation(paper_run):
    items, result, out = paper_run.items, paper_run.result, paper_run.out
    ref = _condition_scores(items)
    got = pd.read_csv(out / "zscores.csv").merge(ref, on=["model", "questionnaire", "condition"])
    assert len(got) == len(ref) == N * 2 * 3
    np.testing.assert_allclose(got["raw"], got["score"], rtol=1e-12)
    np.testing.assert_allclose(got["z_x"], got["z_y"], rtol=1e-10)
    van = got[got["condition"] == "vanilla"].groupby("questionnaire")["z_x"]
    np.testing.assert_allclose(van.mean(), 0, atol=1e-12)
    np.testing.assert_allclose(van.std(ddof=1), 1, rtol=1e-12)


def test_paired_tests_match_scipy_and_holm_matches_statsmodels(paper_run):
    items, result = paper_run.items, paper_run.result
    ref = _condition_scores(items)
    table = result["paired_tests"]
    assert set(table["contrast"]) == {"vanilla vs stress", "vanilla vs neutral", "neutral vs stress"}
    for row in table.itertuples():
        first, second = row.contrast.split(" vs ")
        w = ref[ref["questionnaire"] == row.questionnaire].pivot(index="model", columns="condition", values="z")
        t = sps.ttest_rel(w[first], w[second])
        assert row.t == pytest.approx(t.statistic, rel=1e-9)
        assert row.p == pytest.approx(t.pvalue, rel=1e-7)
        d = w[first] - w[second]
        assert row.cohens_d == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-9)
        assert row.mean_diff == pytest.approx(d.mean(), rel=1e-9)
    np.testing.assert_allclose(table["p_holm"], multipletests(table["p"], method="holm")[1], rtol=1e-12)


def test_oneway_anova_matches_pingouin_and_statsmodels(paper_run):
    items, result = paper_run.items, paper_run.result
    ref = _condition_scores(items)
    ref = ref[ref["condition"].isin(["vanilla", "stress"])]
    table = result["anova_oneway"]
    assert set(table["contrast"]) == {"vanilla vs stress", "vanilla vs neutral", "neutral vs stress"}
    table = table[table["contrast"] == "vanilla vs stress"]
    for q, sub in table.groupby("questionnaire"):
        data = ref[ref["questionnaire"] == q]
        aov = pg.rm_anova(data, dv="z", within="condition", subject="model", detailed=True, effsize="np2")
        stim = sub.set_index("source").loc["stimuli"]
        assert stim["F"] == pytest.approx(aov.loc[0, "F"], rel=1e-9)
        assert stim["p"] == pytest.approx(aov.loc[0, "p_unc"], rel=1e-7)
        assert stim["partial_eta2"] == pytest.approx(aov.loc[0, "np2"], rel=1e-8)
        assert stim["ss"] == pytest.approx(aov.loc[0, "SS"], rel=1e-9)
        assert sub.set_index("source").loc["residual", "ss"] == pytest.approx(aov.loc[1, "SS"], rel=1e-9)
        sm = AnovaRM(data, "z", "model", within=["condition"]).fit().anova_table
        assert stim["F"] == pytest.approx(sm.loc["condition", "F Value"], rel=1e-9)
        assert sub["eta2"].sum() == pytest.approx(1.0, rel=1e-12)
        assert (sub["eta2_ci_low"] <= sub["eta2"] + 1e-12).all() and (sub["eta2"] <= sub["eta2_ci_high"] + 1e-12).all()
        assert list(sub["df"]) == [1, N - 1, N - 1]
    stim = table[table["source"] == "stimuli"]
    np.testing.assert_allclose(stim["p_holm"], multipletests(stim["p"], method="holm")[1], rtol=1e-12)


def test_interaction_matches_statsmodels_and_pingouin(paper_run):
    items, result = paper_run.items, paper_run.result
    ref = _condition_scores(items)
    data = ref[ref["condition"].isin(["vanilla", "stress"])]
    row = result["anova_interaction"].set_index("contrast").loc["vanilla vs stress"]
    sm = AnovaRM(data, "z", "model", within=["condition", "questionnaire"]).fit().anova_table
    assert row["F"] == pytest.approx(sm.loc["condition:questionnaire", "F Value"], rel=1e-9)
    assert row["p"] == pytest.approx(sm.loc["condition:questionnaire", "Pr > F"], rel=1e-7)
    assert (row["df1"], row["df2"]) == (1, N - 1)
    aov = pg.rm_anova(data, dv="z", within=["condition", "questionnaire"], subject="model", effsize="np2")
    assert row["partial_eta2"] == pytest.approx(aov.iloc[2]["np2"], rel=1e-8)


def test_validation_matches_pingouin_and_scipy(paper_run):
    items, result = paper_run.items, paper_run.result
    val = result["validation"].set_index(["metric", "questionnaire"])["value"]
    van = items[items["condition"] == "vanilla"]
    for q in ("STAI-S", "STAI-T"):
        wide = van[van["questionnaire"] == q].pivot(index="model", columns="item_id", values="score")
        assert val[("cronbach_alpha", q)] == pytest.approx(pg.cronbach_alpha(wide)[0], rel=1e-10)
    qs = van.groupby(["model", "questionnaire"])["score"].mean().unstack()
    r = sps.spearmanr(qs["STAI-S"], qs["STAI-T"])
    assert val[("spearman_r", "STAI-S~STAI-T")] == pytest.approx(r.statistic)
    assert val[("spearman_p", "STAI-S~STAI-T")] == pytest.approx(r.pvalue)
    assert ("silhouette_mean", "all") in val.index and ("silhouette_sd", "STAI-S") in val.index


def test_by_size_classes_count_models_and_decompose(paper_run):
    items, result = paper_run.items, paper_run.result
    sizes = items.groupby("model")["params_b"].first()
    expected = {"<3B": (sizes < 3).sum(), "3-8B": ((sizes >= 3) & (sizes < 8)).sum(), ">=8B": (sizes >= 8).sum()}
    table = result["anova_by_size"]
    for cls, n in table.groupby("size_class")["n"].first().items():
        assert n == expected[cls]
    for _, sub in table.groupby(["size_class", "questionnaire", "contrast"]):
        if sub["n"].iloc[0] >= 2:
            assert sub["eta2"].sum() == pytest.approx(1.0)


def test_per_model_shifts_match_direct_computation(paper_run):
    items, result = paper_run.items, paper_run.result
    q = items.groupby(["model", "questionnaire", "condition", "stimulus_id"], as_index=False)["score"].mean()
    m, qn = "model-03", "STAI-S"
    sub = q[(q["model"] == m) & (q["questionnaire"] == qn)]
    diffs = sub.loc[sub["condition"] == "vanilla", "score"].item() - sub.loc[sub["condition"] == "stress", "score"].to_numpy()
    table = result["per_model"].set_index(["model", "questionnaire", "contrast"])
    row = table.loc[(m, qn, "vanilla vs stress")]  # first minus second, as in paired_tests
    assert row["design"] == "vanilla"
    assert row["mean_diff"] == pytest.approx(diffs.mean()) and row["mean_diff"] < 0  # stress raises the score
    assert row["cohens_d"] == pytest.approx(diffs.mean() / diffs.std(ddof=1))
    assert row["share_first_higher"] == pytest.approx((diffs > 0).mean())
    assert row["ci_low"] < row["mean_diff"] < row["ci_high"]
    assert row["n_stimuli"] == 24
    # neutral vs stress: independent stimulus sets, difference of means over the pooled SD
    neutral = sub.loc[sub["condition"] == "neutral", "score"].to_numpy()
    stress = sub.loc[sub["condition"] == "stress", "score"].to_numpy()
    row = table.loc[(m, qn, "neutral vs stress")]
    pooled = np.sqrt((23 * neutral.var(ddof=1) + 23 * stress.var(ddof=1)) / 46)
    assert row["design"] == "independent" and row["n_stimuli"] == 48
    assert row["mean_diff"] == pytest.approx(neutral.mean() - stress.mean())
    assert row["cohens_d"] == pytest.approx((neutral.mean() - stress.mean()) / pooled)
    assert row["share_first_higher"] == pytest.approx((neutral[:, None] > stress[None, :]).mean())


def test_csv_and_parquet_inputs_give_the_same_tables(tmp_path):
    items = synthetic_item_scores(n_models=6, n_items=3, n_stimuli=4, seed=3)
    items.to_parquet(tmp_path / "scores.parquet")
    items.assign(model_type="base", family="x").to_csv(tmp_path / "scores.csv", index=False)  # extra columns
    a = analyze(tmp_path / "scores.parquet", tmp_path / "a", bootstrap=50, figures=False)
    b = analyze(tmp_path / "scores.csv", tmp_path / "b", bootstrap=50, figures=False)
    assert list(a) == list(b) == list(TABLES)
    for name in TABLES:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)


# --------------------------------------------------------------------------- planted effects

def test_planted_stress_effect_larger_for_one_questionnaire_gives_significant_interaction(tmp_path):
    items = synthetic_item_scores(n_models=20, n_items=5, n_stimuli=6, seed=11,
                                  stress_shift={"STAI-S": 0.3, "STAI-T": 0.05})
    items.to_parquet(tmp_path / "s.parquet")
    res = analyze(tmp_path / "s.parquet", tmp_path / "out", bootstrap=0, figures=False)  # tests, no CIs
    inter = res["anova_interaction"].iloc[0]
    assert inter["p"] < 0.001 and inter["partial_eta2"] > 0.3
    tests = res["paired_tests"].set_index(["questionnaire", "contrast"])
    assert tests.loc[("STAI-S", "vanilla vs stress"), "mean_diff"] < 0  # stress raises the score
    assert tests.loc[("STAI-S", "vanilla vs stress"), "p_holm"] < 0.001
    assert tests.loc[("STAI-S", "vanilla vs neutral"), "p_holm"] > 0.05  # neutral shift planted at 0
    eta = res["anova_oneway"].query("source == 'stimuli' and contrast == 'vanilla vs stress'").set_index(
        "questionnaire")["eta2"]
    assert eta["STAI-S"] > eta["STAI-T"]  # the more sensitive instrument is more state-like


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_null_data_show_no_effect(tmp_path, seed):
    items = synthetic_item_scores(n_models=20, n_items=5, n_stimuli=6, seed=seed,
                                  stress_shift={"STAI-S": 0.0, "STAI-T": 0.0}, sensitivity_sd=0.0,
                                  stimulus_sd=0.0)  # a stimulus effect shared by all models is a real effect
    items.to_parquet(tmp_path / "s.parquet")
    res = analyze(tmp_path / "s.parquet", tmp_path / "out", bootstrap=0, figures=False)  # tests, no CIs
    inter = res["anova_interaction"]
    assert inter.set_index("contrast").loc["vanilla vs stress", "p"] > 0.05
    assert (multipletests(inter["p"], method="holm")[1] > 0.05).all()  # three contrasts: one family
    assert (res["anova_oneway"].query("source == 'stimuli'")["p_holm"] > 0.05).all()
    assert (res["paired_tests"]["p_holm"] > 0.05).all()


# --------------------------------------------------------------------------- few models

@pytest.mark.parametrize("n_models", [1, 2])
def test_one_or_two_models_write_tables_and_figures_with_warnings(request, n_models):
    run = request.getfixturevalue("one_model_run" if n_models == 1 else "two_models_run")
    res = run.result
    assert f"WARNING only {n_models} model(s)" in run.log and "marked underpowered" in run.log
    assert res["anova_oneway"]["underpowered"].all()
    assert res["paired_tests"]["underpowered"].all()
    per_model = res["per_model"]
    assert len(per_model) == n_models * 2 * 3  # questionnaires x the paper's three contrasts
    assert per_model["ci_low"].notna().all() and (per_model["share_first_higher"] < 0.5).any()
    assert res["per_model_state_trait"]["underpowered"].all()  # 5 stimuli < 10
    for name in FIGURES:
        assert (run.out / "figures" / f"{name}.png").stat().st_size > 0
    if n_models == 2:
        assert np.isfinite(res["paired_tests"]["t"]).all()


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.drop(columns="score"), "missing column `score`"),
    (lambda d: d.assign(condition=d["condition"].replace("stress", "stress+")), "value(s) ['stress+'] that are not "
     "conditions"),
    (lambda d: d.assign(stimulus_id="x"), "`stimulus_id` must be empty for condition vanilla"),
    (lambda d: pd.concat([d, d.iloc[:1]]), "duplicate rows"),
    (lambda d: d.assign(score=d["score"].astype(object).where(d.index != 3, "high")), "non-numeric value 'high'"),
])
def test_bad_input_names_file_and_column(tmp_path, mutate, message):
    items = synthetic_item_scores(n_models=3, n_items=2, n_stimuli=2)
    mutate(items).to_csv(tmp_path / "scores.csv", index=False)
    with pytest.raises(InputError) as err:
        analyze(tmp_path / "scores.csv", tmp_path / "out", bootstrap=10, figures=False)
    assert "scores.csv" in str(err.value) and message in str(err.value)


def test_unknown_heatmap_item_is_an_input_error(tmp_path):
    items = synthetic_item_scores(n_models=3, n_items=2, n_stimuli=2)
    items.to_csv(tmp_path / "scores.csv", index=False)
    synthetic_variant_probs(items, n_models=1).to_parquet(tmp_path / "vp.parquet")
    with pytest.raises(InputError, match=r"vp.parquet: heatmap item 'STAI-S:nope' not found in column `item_id`"):
        analyze(tmp_path / "scores.csv", tmp_path / "out", bootstrap=10, variant_probs=tmp_path / "vp.parquet",
                heatmap_item="STAI-S:nope")


def test_cli_returns_2_and_logs_the_error(tmp_path, capsys):
    pd.DataFrame({"model": ["a"], "score": [1.0]}).to_csv(tmp_path / "scores.csv", index=False)
    assert main(["analyze", "--scores", str(tmp_path / "scores.csv"), "--out", str(tmp_path / "o")]) == 2
    assert "missing column `questionnaire`, `item_id`, `condition`, `stimulus_id`" in capsys.readouterr().err


def test_markdown_table_format():
    md = to_markdown(pd.DataFrame({"name": ["a|b", "c"], "p": [0.0001234, 0.5], "n": [3, 40]}))
    lines = md.splitlines()
    assert lines[0].split("|")[1].strip() == "name" and len(lines) == 4
    assert lines[1].startswith("| ---") and lines[1].rstrip().endswith(": |")
    assert "a\\|b" in lines[2] and "1.23e-04" in lines[2] and "0.500" in lines[3]


# --------------------------------------------------------------------------- full size

def test_full_size_run_with_10000_bootstraps_draws_all_figures(paper_run):
    """A paper-sized table (35 models, 20 items, 24 stimuli per class) with 10000 bootstraps draws every
    figure (its speed is for a benchmark to say, not a test: a timing assertion fails on a busy machine). The run
    is the session fixture that the reference tests above read."""
    for name in FIGURES:
        for ext in ("png", "pdf"):
            assert (paper_run.out / "figures" / f"{name}.{ext}").stat().st_size > 1000
    oneway = pd.read_csv(paper_run.out / "anova_oneway.csv")
    assert (oneway["eta2_ci_high"] - oneway["eta2_ci_low"] > 0).all()
    info = json.loads((paper_run.out / "run_info.json").read_text())
    assert info["bootstrap"] == 10_000 and info["n_models"] == N and info["heatmap_item"] == "STAI-T:stai-t-02"


def test_the_likert_kind_analyses_the_config_contrasts_whose_conditions_were_scored(tmp_path):
    """`qclm probe likert --conditions vanilla,stress` with a config whose contrasts name neutral too: the kind's
    analyze compares what was scored (it failed on the contrasts naming neutral); the workflow, which scores every
    condition, is unchanged."""
    from qclm.analysis.synthetic import synthetic_item_scores
    from qclm.probes.likert.kind import LikertProbe

    items = synthetic_item_scores(n_models=2, n_items=3, n_stimuli=3)
    items[items["condition"] != "neutral"].to_parquet(tmp_path / "items.parquet")
    config = {"conditions": ["vanilla", "stress", "neutral"], "analysis": {"bootstrap": 20}}
    out = LikertProbe.analyze({"items": tmp_path / "items.parquet"}, tmp_path / "out", config)
    assert set(out["per_model"]["contrast"]) == {"vanilla vs stress"}
    assert set(out["paired_tests"]["contrast"]) == {"vanilla vs stress"}
