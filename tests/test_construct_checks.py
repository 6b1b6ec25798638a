"""The paper's two open readings of a state effect, per model (issue 54): the construct-specific part of a shift
(a questionnaire less its control form) and the stimulus types' contrasts (every two types Holm-adjusted, all at
once by Welch's ANOVA), checked on planted signals, against SciPy, pingouin and statsmodels, and through the
command a researcher types."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from qclm.analysis import stats
from qclm.analysis.synthetic import synthetic_item_scores
from qclm.commands import main
from qclm.equations import questionnaire_scores
from qclm.errors import InputError
from qclm.probes.likert.analysis import analyze
from qclm.probes.likert.analysis.construct_checks import OMNIBUS, control_table, types_table

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # pingouin 0.7 on pandas 3.1
TYPES = ("social", "cognitive", "somatic")


def _items(stress: dict[str, float], types: dict[str, float] | None = None, seed: int = 0, n_models: int = 2,
           stimulus_sd: float = 0.02) -> pd.DataFrame:
    extra = {t: {"ORIG": v, "CTRL": 0.0} for t, v in (types or {}).items()}
    return synthetic_item_scores(n_models=n_models, questionnaires=("ORIG", "CTRL"), n_items=8, n_stimuli=24,
                                 stress_shift=stress, seed=seed, extra_conditions=extra, stimulus_sd=stimulus_sd,
                                 trait_correlation=0.0)


def _instruments(path) -> None:
    pd.DataFrame({"questionnaire": ["ORIG", "CTRL"], "construct": ["anxiety", "anxiety (control)"],
                  "framing": ["state", "state"], "control_of": ["", "ORIG"]}).to_csv(path, index=False)


def test_the_construct_specific_part_finds_a_planted_difference_and_is_the_shift_less_the_controls():
    items = _items({"ORIG": 0.30, "CTRL": 0.10})
    q = questionnaire_scores(items)
    table = control_table(q, {"CTRL": "ORIG"}, [("stress", "vanilla"), ("neutral", "stress")], 2000, 0, 10)
    assert len(table) == 2 * 2  # models x contrasts
    for _, row in table.iterrows():
        assert row["specific"] == pytest.approx(row["shift"] - row["control_shift"], abs=1e-12)
    planted = table[table["contrast"] == "stress vs vanilla"]
    # each model's planted shifts are 0.3 and 0.1 times (1 + its sensitivity): the specific part is their difference
    assert (planted["ci_low"] > 0).all() and (planted["p"] < 1e-6).all()
    # the t-test is SciPy's one-sample t of the per-stimulus differences against vanilla's
    m = q[q["model"] == "model-00"].pivot_table(index=["condition", "stimulus_id"], columns="questionnaire",
                                                  values="score")
    y = m["ORIG"] - m["CTRL"]
    d = y.loc["stress"].to_numpy() - y.loc["vanilla"].to_numpy()[0]
    ref = sps.ttest_1samp(d, 0.0)
    row = planted[planted["model"] == "model-00"].iloc[0]
    assert row["t"] == pytest.approx(ref.statistic, rel=1e-9) and row["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert row["design"] == "vanilla" and row["n_stimuli"] == 24 and not row["underpowered"]
    # the independent design is Welch's t
    ind = table[(table["contrast"] == "neutral vs stress") & (table["model"] == "model-00")].iloc[0]
    ref = sps.ttest_ind(y.loc["neutral"].to_numpy(), y.loc["stress"].to_numpy(), equal_var=False)
    assert ind["t"] == pytest.approx(ref.statistic, rel=1e-9) and ind["df"] == pytest.approx(ref.df, rel=1e-9)


def test_a_control_that_moves_as_much_as_the_original_leaves_no_specific_part():
    """The null: both forms moved alike by the context. Over seeds the 95% CI of the independent design (both sides
    sampled over stimuli) covers 0 about 95% of the time (a vanilla side is one fixed context, whose value the
    estimate is conditional on)."""
    covered = []
    for seed in range(20):
        q = questionnaire_scores(_items({"ORIG": 0.2, "CTRL": 0.2}, seed=seed, n_models=1))
        row = control_table(q, {"CTRL": "ORIG"}, [("neutral", "stress")], 400, seed, 10).iloc[0]
        covered.append(row["ci_low"] <= 0 <= row["ci_high"])
    assert sum(covered) >= 16


def test_stimulus_types_find_the_type_that_differs_against_scipy_pingouin_and_statsmodels():
    items = _items({"ORIG": 0.3, "CTRL": 0.0}, types={"social": 0.3, "cognitive": 0.3, "somatic": 0.0})
    q = questionnaire_scores(items)
    table = types_table(q, list(TYPES), 1000, 0, 10)
    one = table[(table["model"] == "model-00") & (table["questionnaire"] == "ORIG")].set_index("comparison")
    assert list(one.index) == ["social vs cognitive", "social vs somatic", "cognitive vs somatic", OMNIBUS]
    assert one.loc["social vs somatic", "p_holm"] < 0.001 and one.loc["cognitive vs somatic", "p_holm"] < 0.001
    assert one.loc["social vs cognitive", "ci_low"] <= 0 <= one.loc["social vs cognitive", "ci_high"]
    sub = q[(q["model"] == "model-00") & (q["questionnaire"] == "ORIG") & q["condition"].isin(TYPES)]
    by = {t: sub.loc[sub["condition"] == t, "score"].to_numpy() for t in TYPES}
    ref = sps.ttest_ind(by["social"], by["somatic"], equal_var=False)
    assert one.loc["social vs somatic", "statistic"] == pytest.approx(ref.statistic, rel=1e-9)
    assert one.loc["social vs somatic", "df2"] == pytest.approx(ref.df, rel=1e-9)
    holm = multipletests(one["p"].iloc[:3].to_numpy(), method="holm")[1]
    np.testing.assert_allclose(one["p_holm"].iloc[:3].to_numpy(), holm, rtol=1e-12)
    welch = pg.welch_anova(sub, dv="score", between="condition")
    assert one.loc[OMNIBUS, "statistic"] == pytest.approx(welch["F"].iloc[0], rel=1e-9)
    assert one.loc[OMNIBUS, "df2"] == pytest.approx(welch["ddof2"].iloc[0], rel=1e-9)
    assert one.loc[OMNIBUS, "p"] == pytest.approx(welch["p_unc"].iloc[0], rel=1e-6)
    assert one.loc[OMNIBUS, "n_first"] == 72 and one.loc[OMNIBUS, "n_second"] == 3
    # the control form, which no type moves, shows no difference between types
    ctrl = table[(table["model"] == "model-00") & (table["questionnaire"] == "CTRL")].set_index("comparison")
    assert ctrl.loc[OMNIBUS, "p"] > 0.01


def test_welch_anova_is_nan_where_a_type_has_one_stimulus_or_no_spread():
    assert np.isnan(stats.welch_anova([np.array([1.0]), np.array([1.0, 2.0])]).F)
    assert np.isnan(stats.welch_anova([np.array([1.0, 1.0]), np.array([1.0, 2.0])]).df2)


def test_qclm_analyze_writes_both_tables_and_their_first_page_sections(tmp_path):
    items = _items({"ORIG": 0.3, "CTRL": 0.1}, types={"social": 0.3, "cognitive": 0.3, "somatic": 0.0})
    items.to_parquet(tmp_path / "items.parquet")
    _instruments(tmp_path / "instruments.csv")
    code = main(["analyze", "--scores", str(tmp_path / "items.parquet"), "--out", str(tmp_path / "out"),
                 "--bootstrap", "200", "--no-figures", "--instruments", str(tmp_path / "instruments.csv"),
                 "--contrasts", "vanilla:stress,vanilla:social,vanilla:somatic",
                 "--stimulus-types", "social,cognitive,somatic"])
    assert code == 0
    control = pd.read_csv(tmp_path / "out" / "per_model_control.csv")
    assert set(control["contrast"]) == {"vanilla vs stress", "vanilla vs social", "vanilla vs somatic"}
    assert set(control["control"]) == {"CTRL"} and set(control["questionnaire"]) == {"ORIG"}
    types = pd.read_csv(tmp_path / "out" / "stimulus_types.csv")
    assert len(types) == 2 * 2 * 4  # models x questionnaires x (three pairs and the omnibus)
    page = (tmp_path / "out" / "overview.md").read_text()
    assert "### Construct or terms: control forms" in page and "### Stimulus types" in page
    assert "ORIG (CTRL)" in page and "social vs somatic" in page and "F(2, " in page


def test_without_a_control_form_or_types_the_tables_are_empty_and_the_page_says_nothing(tmp_path):
    items = synthetic_item_scores(n_models=1, n_items=4, n_stimuli=10)
    items.to_csv(tmp_path / "s.csv", index=False)
    res = analyze(tmp_path / "s.csv", tmp_path / "out", bootstrap=20, figures=False)
    assert res["per_model_control"].empty and res["stimulus_types"].empty
    page = (tmp_path / "out" / "overview.md").read_text()
    assert "control forms" not in page and "### Stimulus types" not in page


@pytest.mark.parametrize("types, message", [
    (("stress",), "one type (stress); give two or more"),
    (("stress", "calm"), "--stimulus-types, entry 2: condition 'calm' is not in"),
    (("vanilla", "stress"), "entry 1: vanilla has no stimulus"),
    (("stress", "stress"), "a type is given twice"),
])
def test_bad_stimulus_types_are_input_errors(tmp_path, types, message):
    items = synthetic_item_scores(n_models=1, n_items=2, n_stimuli=2)
    items.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(InputError) as err:
        analyze(tmp_path / "s.csv", tmp_path / "out", bootstrap=10, figures=False, stimulus_types=types)
    assert message in str(err.value)


def test_the_kind_compares_the_configs_types_that_were_scored_and_none_when_one_is_left(tmp_path):
    """The workflow's analyze rule (LikertProbe.analyze) reads the config's stimulus_types; a run of some conditions
    only (qclm probe --conditions) compares those scored, and none where fewer than two are left."""
    from qclm.probes.likert.kind import LikertProbe

    items = _items({"ORIG": 0.3, "CTRL": 0.1}, types={"social": 0.3, "cognitive": 0.3, "somatic": 0.0})
    config = {"conditions": ["vanilla", "stress", "neutral", *TYPES], "stimulus_types": list(TYPES),
              "analysis": {"bootstrap": 50}, "contrasts": [["vanilla", "stress"]]}
    items.to_parquet(tmp_path / "all.parquet")
    res = LikertProbe.analyze({"items": str(tmp_path / "all.parquet")}, tmp_path / "all", config)
    assert set(res["stimulus_types"]["comparison"]) == {"social vs cognitive", "social vs somatic",
                                                        "cognitive vs somatic", OMNIBUS}
    items[~items["condition"].isin(["cognitive", "somatic"])].to_parquet(tmp_path / "one.parquet")
    res = LikertProbe.analyze({"items": str(tmp_path / "one.parquet")}, tmp_path / "one", config)
    assert res["stimulus_types"].empty


@pytest.mark.parametrize("value, message", [
    ("social,,somatic", "entry 2 is an empty entry, not a condition"),
    ("social,social", "names condition 'social' twice"),
    ("social,a b", "entry 2 is 'a b', not a condition"),
])
def test_the_stimulus_types_option_is_read_as_conditions_are(tmp_path, capsys, value, message):
    """--stimulus-types goes through the shared conditions type (qclm.argtypes.conditions): argparse's one line."""
    items = synthetic_item_scores(n_models=1, n_items=2, n_stimuli=2)
    items.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(SystemExit) as err:
        main(["analyze", "--scores", str(tmp_path / "s.csv"), "--out", str(tmp_path / "out"), "--no-figures",
              "--stimulus-types", value])
    assert err.value.code == 2 and message in capsys.readouterr().err
