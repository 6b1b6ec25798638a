"""Experiments as data in the analysis stage: any conditions and contrasts, the single-model state-trait
analysis and interaction, and the marks that say what a run cannot support."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as sps

from matplotlib.text import Text

from qclm.analysis import permodel, plotting, registry, runner
from qclm.analysis.synthetic import synthetic_item_scores
from qclm.commands import main
from qclm.errors import InputError
from qclm.probes.likert.analysis import analyze
from qclm.probes.likert.kind import LikertProbe

LIKERT_OUTPUTS = LikertProbe.analysis_outputs()

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # pingouin 0.7 on pandas 3.1
TABLES = registry.names(LIKERT_OUTPUTS, registry.TABLE)
FIGURE_NAMES = registry.names(LIKERT_OUTPUTS, registry.FIGURE)

QS = ("STAI-S", "STAI-T", "MOOD")
FOUR = {"relax": {"STAI-S": -0.1, "STAI-T": -0.02, "MOOD": -0.2},
        "stress+relax": {"STAI-S": 0.08, "STAI-T": 0.03, "MOOD": 0.0}}


@pytest.fixture(scope="module")
def four_conditions(tmp_path_factory):
    """Four stimulus conditions (stress, neutral, relax, stress+relax) and vanilla, three questionnaires."""
    d = tmp_path_factory.mktemp("four")
    items = synthetic_item_scores(n_models=4, questionnaires=QS, n_items=6, n_stimuli=12, seed=4,
                                  stress_shift={"STAI-S": 0.3, "STAI-T": 0.05, "MOOD": 0.2},
                                  extra_conditions=FOUR)
    items.to_parquet(d / "items.parquet")
    contrasts = "vanilla:stress,vanilla:relax,stress:stress+relax,neutral:stress"
    code = main(["analyze", "--scores", str(d / "items.parquet"), "--out", str(d / "out"), "--bootstrap", "300",
                 "--contrasts", contrasts, "--min-models", "10"])
    assert code == 0
    return items, d / "out"


def test_every_table_and_figure_with_four_conditions_and_three_questionnaires(four_conditions):
    items, out = four_conditions
    for name in TABLES:
        assert (out / f"{name}.csv").exists(), name
    for name in FIGURE_NAMES:
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000, name
    labels = ["vanilla vs stress", "vanilla vs relax", "stress vs stress+relax", "neutral vs stress"]
    paired = pd.read_csv(out / "paired_tests.csv")
    assert list(paired["contrast"]) == labels * 3  # questionnaire outer, contrast inner
    assert len(pd.read_csv(out / "anova_oneway.csv")) == 4 * 3 * 3
    inter = pd.read_csv(out / "anova_interaction.csv")
    assert len(inter) == 4 * 3 and set(inter["contrast"]) == set(labels)  # 3 pairs of questionnaires
    zs = pd.read_csv(out / "zscores.csv")
    assert list(pd.unique(zs["condition"])) == ["vanilla", "neutral", "relax", "stress", "stress+relax"]
    for name in ("per_model", "per_model_state_trait"):
        t = pd.read_csv(out / f"{name}.csv")
        assert len(t) == 4 * 3 * 4
        design = t.drop_duplicates("contrast").set_index("contrast")["design"]
        assert design.to_dict() == {"vanilla vs stress": "vanilla", "vanilla vs relax": "vanilla",
                                    "stress vs stress+relax": "paired", "neutral vs stress": "independent"}
    assert len(pd.read_csv(out / "per_model_interaction.csv")) == 4 * 4 * 3


def test_paired_contrast_pairs_composed_stimuli_by_their_shared_class(four_conditions):
    items, out = four_conditions
    sub = items[(items["model"] == "model-01") & (items["questionnaire"] == "MOOD")]
    q = sub.groupby(["condition", "stimulus_id"])["score"].mean()
    stress = q["stress"]
    composed = q["stress+relax"].rename(lambda s: s.split("+")[0])
    diffs = (stress - composed.reindex(stress.index)).to_numpy()
    row = pd.read_csv(out / "per_model.csv").set_index(["model", "questionnaire", "contrast"]).loc[
        ("model-01", "MOOD", "stress vs stress+relax")]
    assert row["n_stimuli"] == 12
    assert row["mean_diff"] == pytest.approx(diffs.mean())
    assert row["cohens_d"] == pytest.approx(diffs.mean() / diffs.std(ddof=1))


def test_single_model_state_trait_equals_pingouin_with_items_as_subjects(four_conditions):
    items, out = four_conditions
    table = pd.read_csv(out / "per_model_state_trait.csv").set_index(["model", "questionnaire", "contrast"])
    for contrast, (first, second) in {"vanilla vs stress": ("vanilla", "stress"),
                                      "neutral vs stress": ("neutral", "stress")}.items():
        sub = items[(items["model"] == "model-02") & (items["questionnaire"] == "STAI-S")
                    & items["condition"].isin([first, second])]
        means = sub.groupby(["item_id", "condition"], as_index=False)["score"].mean()
        aov = pg.rm_anova(means, dv="score", within="condition", subject="item_id", detailed=True)
        row = table.loc[("model-02", "STAI-S", contrast)]
        ss_total = means["score"].var(ddof=0) * len(means)
        assert row["eta2_condition"] == pytest.approx(aov.loc[0, "SS"] / ss_total, rel=1e-9)
        assert row["eta2_residual"] == pytest.approx(aov.loc[1, "SS"] / ss_total, rel=1e-9)
        assert row["eta2_condition"] + row["eta2_item"] + row["eta2_residual"] == pytest.approx(1.0)
        assert row["F"] == pytest.approx(aov.loc[0, "F"], rel=1e-9) and row["p"] == pytest.approx(aov.loc[0, "p_unc"])
        assert row["eta2_condition_ci_low"] <= row["eta2_condition"] <= row["eta2_condition_ci_high"]
        assert (row["n_items"], row["df1"], row["df2"]) == (6, 1, 5)
    # a strong planted shift puts STAI-S far to the state side, STAI-T (shift 0.05) less so
    vs = table.xs("vanilla vs stress", level="contrast")
    assert (vs.xs("STAI-S", level="questionnaire")["eta2_condition"]
            > vs.xs("STAI-T", level="questionnaire")["eta2_condition"]).all()


def test_state_trait_bootstrap_is_seeded_and_resamples_stimuli(four_conditions):
    items, _ = four_conditions
    one = items[items["model"] == "model-00"]
    a = permodel.state_trait_table(one, [("vanilla", "stress")], 200, seed=5)
    b = permodel.state_trait_table(one, [("vanilla", "stress")], 200, seed=5)
    c = permodel.state_trait_table(one, [("vanilla", "stress")], 200, seed=6)
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["eta2_condition_ci_low"], c["eta2_condition_ci_low"])
    # one stimulus: no resampling possible, no interval
    single = one[(one["condition"] == "vanilla") | (one["stimulus_id"] == "stress-00")]
    t = permodel.state_trait_table(single, [("vanilla", "stress")], 200, seed=5)
    assert t["eta2_condition_ci_low"].isna().all() and t["underpowered"].all()


# --------------------------------------------------------------------------- the standardized interaction

def _one_model(n_items: tuple[int, int], shift: tuple[float, float], spread: tuple[float, float], seed: int,
               n_stimuli: int = 12) -> pd.DataFrame:
    """One model, two questionnaires: item effects with the given spread, a shift in units of that spread."""
    rng = np.random.default_rng(seed)
    rows = []
    for q, n, sh, sp in zip(("A", "B"), n_items, shift, spread):
        item = rng.normal(0, sp, size=n)
        rows += [("m", q, f"{q}{i}", "vanilla", "", item[i]) for i in range(n)]
        for j in range(n_stimuli):
            noise = rng.normal(0, 0.5 * sp, size=n)
            rows += [("m", q, f"{q}{i}", "stress", f"s{j}", item[i] + sh * sp + noise[i]) for i in range(n)]
    return pd.DataFrame(rows, columns=["model", "questionnaire", "item_id", "condition", "stimulus_id", "score"])


def test_interaction_finds_a_planted_difference_whatever_the_scales():
    items = _one_model((20, 20), shift=(2.0, 0.0), spread=(0.1, 5.0), seed=1)
    row = permodel.interaction_table(items, [("vanilla", "stress")]).iloc[0]
    assert row["p"] < 1e-4 and row["shift_a"] < -1 and abs(row["shift_b"]) < 0.5
    # in raw units B (spread 5) would look like the mover; standardized, A is
    assert (row["n_items_a"], row["n_items_b"]) == (20, 20) and 19 <= row["df"] <= 38


def test_interaction_is_scale_free():
    items = _one_model((15, 10), shift=(1.0, 0.5), spread=(1.0, 1.0), seed=2)
    base = permodel.interaction_table(items, [("vanilla", "stress")]).iloc[0]
    scaled = items.assign(score=np.where(items["questionnaire"] == "B", 100 * items["score"] + 7, items["score"]))
    again = permodel.interaction_table(scaled, [("vanilla", "stress")]).iloc[0]
    for col in ("statistic", "df", "p", "shift_b"):
        assert again[col] == pytest.approx(base[col], rel=1e-9)


def test_without_shifts_the_statistic_is_scipys_welch_t_on_standardized_shifts():
    items = _one_model((15, 10), shift=(0.0, 0.0), spread=(1.0, 2.0), seed=3)
    groups = {q: d for _, q, _, d in permodel.per_model_groups(items, [("vanilla", "stress")])}
    z = {q: (lambda sh: sh[0] / sh[1])(permodel.standardized_shifts(d)) for q, d in groups.items()}
    t, df, p = permodel.shift_difference_test(permodel.standardized_shifts(groups["A"]),
                                              permodel.standardized_shifts(groups["B"]))
    # the unit's variance term (mean / s)^2 / (2 (n - 1)) is tiny here: the test is close to Welch's
    ref = sps.ttest_ind(z["A"], z["B"], equal_var=False)
    assert t == pytest.approx(ref.statistic, rel=0.02) and p == pytest.approx(ref.pvalue, rel=0.05)


def test_the_delta_method_variance_matches_a_bootstrap_over_items():
    rng = np.random.default_rng(0)
    item = rng.normal(0, 1, size=40)
    data = permodel.ContrastData("vanilla", [f"i{k}" for k in range(40)], item[:, None],
                                 (item - 1.5 + rng.normal(0, 0.3, size=40))[:, None])
    shifts, spread = permodel.standardized_shifts(data)
    d, var = permodel.standardized_mean(shifts, spread)
    boot = []
    for _ in range(4000):
        k = rng.integers(0, 40, size=40)
        b = permodel.ContrastData("vanilla", [], data.first[k], data.second[k])
        boot.append(permodel.standardized_mean(*permodel.standardized_shifts(b))[0])
    assert d == pytest.approx(1.5, rel=0.2)
    assert np.sqrt(var) == pytest.approx(np.std(boot), rel=0.2)


def test_interaction_without_a_planted_difference_holds_its_level():
    p = np.array([permodel.interaction_table(_one_model((12, 12), (1.0, 1.0), (1.0, 3.0), seed=s),
                                             [("vanilla", "stress")])["p"].iloc[0] for s in range(200)])
    assert 0.01 <= (p < 0.05).mean() <= 0.09


# --------------------------------------------------------------------------- what the run cannot support

def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text)]


def _draw(run, output: registry.Output, tables: dict[str, pd.DataFrame], ctx):
    """A registered figure drawn in memory from ``tables`` (None when its data do not allow it)."""
    with plt.rc_context(plotting.STYLE):
        fig = runner.resolve(output)(ctx, *(tables[name] for name in output.reads))
    if isinstance(fig, str):
        return None
    texts = _texts(fig)
    plt.close(fig)
    return texts


def test_few_models_are_marked_in_the_tables_and_in_the_figures(two_models_run):
    res = two_models_run.result
    for name in ("paired_tests", "anova_oneway", "anova_interaction", "condition_summary"):
        assert res[name]["underpowered"].all(), name
    ctx = two_models_run.context
    for name in ("fig3_condition_means", "fig4_model_scores", "fig5_variance_decomposition", "state_trait_spectrum"):
        texts = _draw(two_models_run, registry.get(LIKERT_OUTPUTS, registry.FIGURE, name), res, ctx)
        assert "underpowered: 2 models" in texts, name
    assert res["per_model_state_trait"]["underpowered"].all()  # 5 stimuli < 10
    overview = (two_models_run.out / "overview.md").read_text()
    assert "rest on 2 models, fewer than 10: they are UNDERPOWERED" in overview
    assert "**Conditions**: vanilla, neutral (5 stimuli), stress (5 stimuli)" in overview
    assert "| model-00 | STAI-S | vanilla vs stress |" in overview
    assert (two_models_run.out / "overview.rst").read_text().startswith("What this run measured\n")


def test_every_figure_marks_what_its_table_marks(two_models_run):
    """The mark in a figure is its table's ``underpowered`` column: all rows marked, the figure says
    "underpowered"; none marked, the word appears nowhere in it (whatever the counts)."""
    ctx = two_models_run.context
    checked = []
    for output in registry.select(LIKERT_OUTPUTS, registry.FIGURE):
        if output.table is None:
            continue
        for marked in (True, False):
            tables = dict(two_models_run.result)
            tables[output.table] = tables[output.table].assign(underpowered=marked)
            texts = _draw(two_models_run, output, tables, ctx)
            if texts is None:
                continue
            assert any("underpowered" in t for t in texts) == marked, (output.name, marked)
            checked.append(output.name)
    # every figure but the wording one (no second template here; test_wording draws it) was drawn both ways
    assert sorted(set(checked)) == sorted(o.name for o in registry.select(LIKERT_OUTPUTS, registry.FIGURE)
                                          if o.table and o.name != "wording")
    assert len(checked) == 2 * len(set(checked))


@pytest.mark.parametrize("contrasts, message", [
    ("vanilla:calm", "condition 'calm' is not in"),
    ("vanilla:stress,vanilla:stress", "repeats entry 1 (vanilla vs stress)"),
    ("stress:stress", "compares condition 'stress' with itself"),
    ("vanilla-stress", "'vanilla-stress' is not FIRST:SECOND"),
])
def test_bad_contrasts_are_input_errors(tmp_path, contrasts, message):
    items = synthetic_item_scores(n_models=2, n_items=2, n_stimuli=2)
    items.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(InputError) as err:
        analyze(tmp_path / "s.csv", tmp_path / "out", bootstrap=10, figures=False, contrasts=contrasts)
    assert message in str(err.value)


def test_one_questionnaire_and_default_contrasts_for_the_conditions_present(tmp_path):
    items = synthetic_item_scores(n_models=1, questionnaires=("ONLY",), n_items=5, n_stimuli=10, seed=3,
                                  neutral_shift={"ONLY": 0.0})
    items = items[items["condition"] != "neutral"]
    items.to_csv(tmp_path / "s.csv", index=False)
    res = analyze(tmp_path / "s.csv", tmp_path / "out", bootstrap=100, figures=False)
    assert set(res["per_model"]["contrast"]) == {"vanilla vs stress"}
    assert res["anova_interaction"].empty and res["per_model_interaction"].empty
    row = res["per_model_state_trait"].iloc[0]
    assert row["n_stimuli"] == 10 and not row["underpowered"] and np.isfinite(row["eta2_condition"])
