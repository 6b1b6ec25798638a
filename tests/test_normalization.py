"""The two forms of the two-way normalization (method.md section 4a, ``equations.normalization``): the one pass
unchanged to the bit, the iterated form's margins and its invariance to scaling a row or a column, the error on a
matrix no scaling balances, the key reaching the Likert and entailment kinds' item scores, and the Likert
analysis's ``normalization_sensitivity`` table."""

import logging

import numpy as np
import pandas as pd
import pytest

from qclm import equations
from qclm.equations import ITEM_KEYS, item_scores, normalize
from qclm.probes import kind_class
from qclm.probes.base import Instance

WEIGHTS = np.array([-2, -2, -1, -1, 1, 1, 2, 2.0])  # four levels, two phrases each, as the shipped scales
N_PLUS = 3


def variant_table(mats: dict[tuple, np.ndarray]) -> pd.DataFrame:
    """Variants of items, one matrix (cterms x intensifiers, the first N_PLUS rows S+) per (model, condition,
    stimulus_id, template, item_id)."""
    frames = []
    for (model, condition, stimulus, template, item), m in mats.items():
        rows, cols = np.indices(m.shape).reshape(2, -1)
        frames.append(pd.DataFrame({
            "model": model, "questionnaire": "q", "condition": condition, "stimulus_id": stimulus,
            "template": template, "item_id": item, "cterm": [f"c{r}" for r in rows],
            "polarity": np.where(rows < N_PLUS, "+", "-"), "intensifier": [f"i{c}" for c in cols],
            "level": [f"l{c // 2}" for c in cols], "weight": WEIGHTS[cols], "p_raw": m.ravel()}))
    return pd.concat(frames, ignore_index=True)


def random_matrix(rng, shape=(6, 8)) -> np.ndarray:
    """Probabilities as a model gives them: spread over orders of magnitude, with main effects of the terms and of
    the intensifiers."""
    r, c = shape
    return np.exp(rng.normal(0, 1, shape) + rng.normal(0, 1, (r, 1)) + rng.normal(0, 2, (1, c)) - 6)


def scores(mats: list[np.ndarray], form: str) -> np.ndarray:
    items = item_scores(normalize(variant_table({("m", "vanilla", "", "t", f"I{k}"): m for k, m in enumerate(mats)}),
                                  0.0, form))
    return items.set_index("item_id").loc[[f"I{k}" for k in range(len(mats))], "score"].to_numpy()


def one_pass_before(variants: pd.DataFrame, epsilon: float) -> pd.DataFrame:
    """The two-way normalization as it was before the iterated form existed (the paper's, reproduced to 1e-4),
    line for line."""
    equations.check_complete(variants)
    out = variants.copy()
    p = out["p_raw"] + epsilon
    columns = [out[k] for k in ITEM_KEYS + ["intensifier"]]
    out["p_norm"] = p / p.groupby(columns, sort=False, dropna=False).transform("sum")
    p = out["p_norm"] + epsilon
    out["p_norm"] = p / p.groupby([out[k] for k in ITEM_KEYS + ["cterm"]], sort=False, dropna=False).transform("sum")
    return out


def real_shaped(rng) -> pd.DataFrame:
    """Two models, vanilla and three stress stimuli, two wordings, four items, 6 x 8 matrices, rows shuffled."""
    contexts = [("vanilla", "")] + [("stress", f"s{k}") for k in range(3)]
    mats = {(model, cond, stim, template, f"I{k}"): random_matrix(rng)
            for model in ("m1", "m2") for cond, stim in contexts for template in ("t1", "t2") for k in range(4)}
    return variant_table(mats).sample(frac=1, random_state=0)


@pytest.mark.parametrize("epsilon", [0.0, 1e-10, 1e-3])
def test_the_one_pass_is_the_normalization_before_the_option_to_the_bit(epsilon):
    variants = real_shaped(np.random.default_rng(3))
    before = one_pass_before(variants, epsilon)
    pd.testing.assert_frame_equal(normalize(variants, epsilon), before, check_exact=True)
    pd.testing.assert_frame_equal(normalize(variants, epsilon, "one_pass"), before, check_exact=True)
    assert not np.array_equal(normalize(variants, epsilon, "iterated")["p_norm"], before["p_norm"])


def test_the_iterated_margins_hold_and_it_only_scales_rows_and_columns():
    rng = np.random.default_rng(4)
    variants = pd.concat([real_shaped(rng), variant_table({("m1", "vanilla", "", "t1", "I9"): random_matrix(
        rng, (4, 8))})], ignore_index=True)  # an item with fewer terms: its columns sum to 4 / 8
    out = normalize(variants, 0.0, "iterated")
    rows = out.groupby(ITEM_KEYS + ["cterm"])["p_norm"].sum()
    np.testing.assert_allclose(rows, 1.0, rtol=0, atol=1e-14)
    columns = out.groupby(ITEM_KEYS + ["intensifier"])["p_norm"].sum()
    n_terms = np.where(columns.index.get_level_values("item_id") == "I9", 4, 6)
    assert np.abs(columns.to_numpy() - n_terms / 8).max() <= equations.MARGIN_TOLERANCE
    # P_norm = D P E: log(P_norm / P) is a row term plus a column term (its double-centred residual is 0)
    for _, g in out.groupby(ITEM_KEYS):
        ratio = np.log(g.pivot(index="cterm", columns="intensifier", values="p_norm")
                       / g.pivot(index="cterm", columns="intensifier", values="p_raw")).to_numpy()
        residual = ratio - ratio.mean(axis=0) - ratio.mean(axis=1, keepdims=True) + ratio.mean()
        assert np.abs(residual).max() < 1e-9


def test_only_the_iterated_form_is_blind_to_a_main_effect_of_the_terms():
    """Scaling the S+ rows (every anxious term more or less likely whatever the intensifier, no change in the
    interaction) moves the one-pass item score and not the iterated one; scaling any row or column moves neither
    under the iterated form."""
    rng = np.random.default_rng(5)
    mats = [random_matrix(rng) for _ in range(200)]
    for factor in (2.0, 0.5):
        scaled = [np.vstack([m[:N_PLUS] * factor, m[N_PLUS:]]) for m in mats]
        assert np.abs(scores(scaled, "iterated") - scores(mats, "iterated")).max() < 1e-9
        moved = np.abs(scores(scaled, "one_pass") - scores(mats, "one_pass"))
        assert np.median(moved) > 1e-3 and moved.max() > 1e-2
    rows, columns = np.exp(rng.normal(0, 2, (6, 1))), np.exp(rng.normal(0, 2, (1, 8)))
    assert np.abs(scores([m * rows * columns for m in mats], "iterated") - scores(mats, "iterated")).max() < 1e-9


def test_a_matrix_no_scaling_balances_is_an_error_naming_the_item(monkeypatch):
    rng = np.random.default_rng(6)
    zero_row = random_matrix(rng)
    zero_row[2] = 0.0
    variants = variant_table({("m", "stress", "s1", "t", "I1"): random_matrix(rng),
                              ("m", "stress", "s1", "t", "I2"): zero_row})
    with pytest.raises(ValueError, match=r"^item I2 of q \(model m, condition stress, stimulus s1, template t\): the "
                                         r"iterated two-way normalization does not converge: a row or column sums to "
                                         r"0; .* set equations.normalization_epsilon above 0"):
        normalize(variants, 0.0, "iterated")
    assert np.isfinite(normalize(variants, 1e-10, "iterated")["p_norm"]).all()
    # no zero row or column, but zeros without a balanced pattern: the margins approach their targets like 1/k
    monkeypatch.setattr(equations, "MAX_ITERATIONS", 50)
    stuck = variant_table({("m", "vanilla", "", "t", "I3"): np.array([[1.0, 1.0], [0.0, 1.0]])})
    with pytest.raises(ValueError, match=r"^item I3 of q \(model m, condition vanilla, template t\): .* after 50 "
                                         r"alternations its column sums are still up to"):
        normalize(stuck, 0.0, "iterated")
    with pytest.raises(ValueError, match=r"normalization must be one of \('one_pass', 'iterated'\), got 'sinkhorn'"):
        normalize(stuck, 0.0, "sinkhorn")


def test_the_config_key_reaches_the_likert_and_entailment_kinds_item_scores():
    rng = np.random.default_rng(7)
    variants = variant_table({("m", "stress", "s1", "t", f"I{k}"): random_matrix(rng) for k in range(3)})
    tokens = variants.assign(token_index=0, token_id=0, token="x", logprob=np.log(variants["p_raw"])).drop(
        columns="p_raw")
    got = {}
    for kind, raw in (("likert", tokens), ("entailment", variants)):
        probe = kind_class(kind)(Instance("q", kind, {}))
        for form in ("one_pass", "iterated"):
            config = probe.stage_config({"equations": {"normalization": form}})
            items = probe.cell_scores(raw, config)["items"].set_index("item_id")["score"]
            want = item_scores(normalize(variants, 0.0, form)).set_index("item_id")["score"]
            np.testing.assert_allclose(items.loc[want.index], want, rtol=1e-12)
            got[kind, form] = items
    for kind in ("likert", "entailment"):
        assert np.abs(got[kind, "one_pass"] - got[kind, "iterated"]).max() > 1e-4


def test_the_sensitivity_table_shows_a_contrast_that_is_only_the_terms_main_effect(tmp_path, caplog):
    """Under stress every S+ term is twice as likely whatever the intensifier (no interaction changes): the
    one-pass contrast vanilla vs stress is that main effect, the iterated one is 0, and the table's one-pass
    column is per_model.csv's contrast of the scores the run computed."""
    from qclm.probes.likert.analysis.normalization import sensitivity_table
    from qclm.probes.likert.analysis.stage import analyze

    rng = np.random.default_rng(8)
    base = {(model, f"I{k}"): random_matrix(rng) for model in ("m1", "m2") for k in range(4)}
    mats = {}
    for (model, item), m in base.items():
        mats[model, "vanilla", "", "t", item] = m
        for s in range(3):
            noise = np.exp(rng.normal(0, 1e-4, m.shape))  # the stimuli replicate, with a little interaction
            mats[model, "stress", f"s{s}", "t", item] = np.vstack([m[:N_PLUS] * 2, m[N_PLUS:]]) * noise
    variants = normalize(variant_table(mats), 0.0, "one_pass")
    variants.to_parquet(tmp_path / "variants.parquet")
    items = item_scores(variants).assign(default_template=True)
    items.to_parquet(tmp_path / "items.parquet")
    res = analyze(tmp_path / "items.parquet", tmp_path / "out", bootstrap=0, variant_probs=tmp_path /
                  "variants.parquet", figures=False, contrasts="vanilla:stress", min_models=1, min_stimuli=1,
                  equations={"normalization": "one_pass"})
    table = pd.read_csv(tmp_path / "out" / "normalization_sensitivity.csv").set_index(["model", "questionnaire"])
    shifts = res["per_model"].set_index(["model", "questionnaire"])
    assert len(table) == 2 and set(table["normalization"]) == {"one_pass"}
    np.testing.assert_allclose(table["mean_diff_one_pass"], shifts.loc[table.index, "mean_diff"], rtol=1e-12)
    np.testing.assert_allclose(table["eta2_condition_one_pass"],
                               res["per_model_state_trait"].set_index(["model", "questionnaire"]).loc[
                                   table.index, "eta2_condition"], rtol=1e-12)
    assert (table["mean_diff_iterated"].abs() < 1e-5).all() and (table["mean_diff_one_pass"].abs() > 1e-4).all()
    np.testing.assert_allclose(table["mean_diff_difference"],
                               table["mean_diff_one_pass"] - table["mean_diff_iterated"], rtol=1e-12)
    # the overview's headline puts both forms beside the run's difference, with the terms' main effect
    overview = (tmp_path / "out" / "overview.md").read_text()
    assert "| difference, one pass | difference, iterated | terms' main effect (one pass - iterated) | d |" in overview
    # told the scores were iterated when their p_norm is the one pass: the table says so in the log
    with caplog.at_level(logging.WARNING, logger="qclm.analysis"):
        other = sensitivity_table(variants, None, "first", [("vanilla", "stress")],
                                  {"normalization": "iterated", "normalization_epsilon": 0.0, "item_score": "eq2"},
                                  1, "variants.parquet")
    assert "variants.parquet: p_norm differs by up to" in caplog.text
    np.testing.assert_allclose(other["mean_diff_one_pass"], table["mean_diff_one_pass"].to_numpy(), rtol=1e-12)
    assert set(other["normalization"]) == {"iterated"}
