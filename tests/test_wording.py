"""The wording decomposition (method.md section 7b) by hand, against statsmodels, and through qclm analyze."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

from matplotlib.text import Text

from qclm.analysis import plotting
from qclm.probes.likert.analysis import analyze
from qclm.probes.likert.analysis import wording_figures
from qclm.probes.likert.analysis.wording import decompose, wording_table


def test_decomposition_by_hand():
    # two templates x two items, one context: means 3; template means 1.5, 4.5; item means 2, 4
    y = np.array([[1.0, 2.0], [3.0, 6.0]])[:, :, None]
    parts = decompose(y)
    assert parts["template"] == (pytest.approx(9.0), 1)  # 2 x ((1.5-3)^2 + (4.5-3)^2)
    assert parts["item"] == (pytest.approx(4.0), 1)  # 2 x ((2-3)^2 + (4-3)^2)
    assert parts["template:item"] == (pytest.approx(1.0), 1)  # cells off by +-0.5
    assert parts["stimulus"] == (0.0, 0) and parts["residual"] == (0.0, 0)


def test_decomposition_equals_statsmodels_on_a_balanced_design():
    rng = np.random.default_rng(4)
    t, i, s = 3, 5, 4
    y = (rng.normal(0, 0.3, (t, 1, 1)) + rng.normal(0, 1, (1, i, 1)) + rng.normal(0, 0.2, (1, 1, s))
         + rng.normal(0, 0.1, (t, i, s)))
    df = pd.DataFrame([(a, b, c, y[a, b, c]) for a in range(t) for b in range(i) for c in range(s)],
                      columns=["template", "item", "stimulus", "score"])
    fit = smf.ols("score ~ C(template) * C(item) + C(stimulus)", data=df).fit()
    ref = anova_lm(fit, typ=2)
    parts = decompose(y)
    for mine, theirs in (("template", "C(template)"), ("item", "C(item)"), ("stimulus", "C(stimulus)"),
                         ("template:item", "C(template):C(item)"), ("residual", "Residual")):
        assert parts[mine][0] == pytest.approx(ref.loc[theirs, "sum_sq"], rel=1e-9)
        assert parts[mine][1] == ref.loc[theirs, "df"]


def _items(n_models=3, template_shift=(0.0, 0.3, -0.2), seed=0, extra_contexts=2, all_contexts=5):
    """Item scores with a planted template effect; templates after the first on the first contexts only."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(n_models):
        item = rng.normal(0, 0.5, size=6)
        for k in range(all_contexts + 1):
            cond, sid = ("vanilla", "") if k == 0 else ("stress", f"s{k}")
            for t, shift in enumerate(template_shift):
                if t > 0 and k > extra_contexts:
                    continue
                for i in range(6):
                    rows.append((f"m{m}", "Q", cond, sid, f"t{t}", t == 0, f"i{i}",
                                 item[i] + shift + 0.1 * (cond == "stress") + rng.normal(0, 0.02)))
    return pd.DataFrame(rows, columns=["model", "questionnaire", "condition", "stimulus_id", "template",
                                       "default_template", "item_id", "score"])


def test_wording_table_uses_the_contexts_every_template_has():
    table = wording_table(_items(), min_models=10)
    stress = table[(table["scope"] == "model") & (table["model"] == "m0") & (table["condition"] == "stress")]
    assert set(stress["n_stimuli"]) == {2} and set(stress["n_templates"]) == {3} and set(stress["n_items"]) == {6}
    assert stress["share"].sum() == pytest.approx(1.0)
    share = stress.set_index("source")["share"]
    assert share["template"] > 0.2 and share["stimulus"] < 0.01  # planted: template shifts, no stimulus effect
    across = table[table["scope"] == "across models"]
    assert set(across["source"]) == {"model", "template", "residual"} and across["underpowered"].all()
    assert set(across["n_models"]) == {3}


def test_no_second_template_gives_an_empty_table():
    items = _items()
    assert wording_table(items[items["template"] == "t0"], 10).empty


def test_analyze_writes_the_wording_table_and_uses_the_first_template_for_scores(tmp_path):
    items = _items(n_models=3)
    items.to_parquet(tmp_path / "items.parquet")
    res = analyze(tmp_path / "items.parquet", tmp_path / "out", bootstrap=50, templates="first")
    assert (tmp_path / "out" / "wording.csv").exists() and (tmp_path / "out" / "figures" / "wording.png").exists()
    assert len(res["wording"]) == 2 * 3 * 5 + 2 * 3  # (vanilla, stress) x models x sources + across
    # questionnaire scores from the first template only: the template shifts do not enter
    first = items[items["template"] == "t0"]
    want = first[first["condition"] == "vanilla"].groupby("model")["score"].mean()
    got = pd.read_csv(tmp_path / "out" / "zscores.csv").query("condition == 'vanilla'").set_index("model")["raw"]
    np.testing.assert_allclose(got.loc[want.index], want, rtol=1e-12)
    # the figure marks what the table marks: the across-model rows rest on 3 of 10 models
    for marked in (True, False):
        with plotting.plt.rc_context(plotting.STYLE):
            fig = wording_figures.wording(None, res["wording"].assign(underpowered=marked))
        texts = [t.get_text() for t in fig.findobj(Text)]
        plotting.plt.close(fig)
        assert ("underpowered: 3 models" in texts) == marked
