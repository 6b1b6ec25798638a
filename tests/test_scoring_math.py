"""Eqs. 1-3, the two-way normalization and the silhouette, against hand-computed examples and
against matrix forms of the equations written here as oracles (the package has one implementation
of each equation, the table form the workflow uses)."""

import math

import numpy as np
import pandas as pd
import pytest

from qclm import equations as scoring

# -- oracles: the method's equations on one item's matrix (rows cterms, columns intensifiers) ------------

def harmonic_mean_probability(logprobs) -> float:
    """Eq. 1: P_h = ((1/n) sum_k 1/p_k)^-1."""
    lp = np.asarray(logprobs, dtype=np.float64)
    return float(len(lp) / np.exp(-lp).sum())


def two_way_normalize(p) -> np.ndarray:
    """Section 4: columns divided by their sums over cterms, then rows by their sums over intensifiers."""
    p = np.asarray(p, dtype=np.float64)
    p = p / p.sum(axis=0, keepdims=True)
    return p / p.sum(axis=1, keepdims=True)


def item_score_matrix(p_norm, plus_rows, weights) -> float:
    """Eq. 2: sum over S+ rows and intensifier columns of P_norm(l|s) w(l) / (|S+| |L|)."""
    p_norm = np.asarray(p_norm, dtype=np.float64)
    plus_rows = np.asarray(plus_rows, dtype=bool)
    return float((p_norm[plus_rows] * np.asarray(weights, float)[None, :]).sum() / (plus_rows.sum() * p_norm.shape[1]))


def test_harmonic_mean_probability_eq1_by_hand():
    # p = 0.5 and 0.25: harmonic mean = 2 / (2 + 4) = 1/3
    assert harmonic_mean_probability(np.log([0.5, 0.25])) == pytest.approx(1 / 3)
    assert harmonic_mean_probability(np.log([0.2])) == pytest.approx(0.2)


def test_two_way_normalization_by_hand():
    p = np.array([[0.1, 0.3],
                  [0.3, 0.1]])
    # columns sum to 0.4: [[.25, .75], [.75, .25]]; rows then sum to 1 already
    np.testing.assert_allclose(two_way_normalize(p), [[0.25, 0.75], [0.75, 0.25]])
    q = np.array([[0.2, 0.2],
                  [0.6, 0.2]])
    # columns: [[.25, .5], [.75, .5]]; rows: [[1/3, 2/3], [.6, .4]]
    np.testing.assert_allclose(two_way_normalize(q), [[1 / 3, 2 / 3], [0.6, 0.4]])


def test_two_way_normalization_equals_softmax_of_log_along_each_axis():
    rng = np.random.default_rng(1)
    p = rng.uniform(1e-4, 0.5, size=(6, 8))

    def softmax(x, axis):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    ref = softmax(np.log(softmax(np.log(p), axis=0)), axis=1)  # the reference implementation's form
    np.testing.assert_allclose(two_way_normalize(p), ref, rtol=1e-12)


def test_item_score_eq2_by_hand():
    p_norm = np.array([[0.1, 0.2, 0.3, 0.4],   # S+
                       [0.4, 0.3, 0.2, 0.1],   # S+
                       [0.7, 0.1, 0.1, 0.1]])  # S- (not scored)
    w = np.array([-2, -1, 1, 2])
    # row 1: -.2 -.2 +.3 +.8 = .7 ; row 2: -.8 -.3 +.2 +.2 = -.7 ; sum 0 -> 0
    assert item_score_matrix(p_norm, [True, True, False], w) == pytest.approx(0.0)
    # only row 1 in S+: .7 / (1 * 4)
    assert item_score_matrix(p_norm, [True, False, False], w) == pytest.approx(0.175)


def _tokens(rng, contexts=(("m", "q", "stress", "s1"),), items=("I1", "I2")):
    rows = []
    for model, q, cond, stim in contexts:
        for item in items:
            for cterm, pol in (("tense", "+"), ("uneasy", "+"), ("calm", "-")):
                for phrase, level, weight in (("no", "low", -1.0), ("not really", "low", -1.0),
                                              ("yes", "high", 1.0), ("very much", "high", 1.0)):
                    for k in range(len(phrase.split())):
                        rows.append(dict(model=model, questionnaire=q, condition=cond, stimulus_id=stim,
                                         item_id=item, cterm=cterm, polarity=pol, intensifier=phrase,
                                         level=level, weight=weight, token_index=k, token_id=k,
                                         token=str(k), logprob=float(np.log(rng.uniform(0.01, 0.9)))))
    return pd.DataFrame(rows)


def test_table_pipeline_matches_matrix_functions():
    rng = np.random.default_rng(0)
    tokens = _tokens(rng, contexts=(("m", "q", "stress", "s1"), ("m", "q", "stress", "s2")))
    variants, items = scoring.condition_tables(tokens)
    for (stim, item), g in variants.groupby(["stimulus_id", "item_id"]):
        raw = g.pivot(index="cterm", columns="intensifier", values="p_raw")
        # eq. 1 per variant
        for (cterm, phrase), p in raw.stack().items():
            lp = tokens[(tokens.stimulus_id == stim) & (tokens.item_id == item) & (tokens.cterm == cterm)
                        & (tokens.intensifier == phrase)]["logprob"]
            assert p == pytest.approx(harmonic_mean_probability(lp.to_numpy()))
        norm = g.pivot(index="cterm", columns="intensifier", values="p_norm").loc[raw.index, raw.columns]
        np.testing.assert_allclose(norm.to_numpy(), two_way_normalize(raw.to_numpy()), rtol=1e-12)
        plus = g.drop_duplicates("cterm").set_index("cterm").loc[raw.index, "polarity"] == "+"
        weights = g.drop_duplicates("intensifier").set_index("intensifier").loc[raw.columns, "weight"]
        want = item_score_matrix(norm.to_numpy(), plus.to_numpy(), weights.to_numpy())
        got = items[(items.stimulus_id == stim) & (items.item_id == item)]["score"].item()
        assert got == pytest.approx(want, rel=1e-12)
    assert set(items["n_plus"]) == {2} and set(items["n_intensifiers"]) == {4}


def test_the_oracles_agree_with_the_table_forms_on_one_item():
    # eq. 1 through the table form on a two-token variant
    tokens = _tokens(np.random.default_rng(5), items=("I1",))
    v = scoring.variant_probabilities(tokens)
    row = v[(v.cterm == "tense") & (v.intensifier == "very much")].iloc[0]
    lp = tokens[(tokens.cterm == "tense") & (tokens.intensifier == "very much")]["logprob"]
    assert row.p_raw == pytest.approx(1 / np.mean(1 / np.exp(lp)))
    assert row.template == "default"


def test_the_authors_item_score_forms_and_normalization_epsilon_by_hand():
    rng = np.random.default_rng(7)
    tokens = _tokens(rng, items=("I1",))
    variants, _ = scoring.condition_tables(tokens)
    raw = variants.pivot(index="cterm", columns="intensifier", values="p_raw")
    weights = variants.drop_duplicates("intensifier").set_index("intensifier").loc[raw.columns, "weight"].to_numpy()
    plus = np.array([c in ("tense", "uneasy") for c in raw.index])
    norm = two_way_normalize(raw.to_numpy())
    eq2 = item_score_matrix(norm, plus, weights)
    c = np.where(plus, 1 / plus.sum(), -1 / (~plus).sum())  # the authors' dict_pos_neg cterm weights
    cells = norm * weights[None, :] * c[:, None]
    for form, want in (("eq2", eq2), ("mean_score_positive", cells[plus].mean()), ("mean_score_all", cells.mean())):
        _, items = scoring.condition_tables(tokens, item_score=form)
        assert items["score"].item() == pytest.approx(want, rel=1e-12), form
    assert cells[plus].mean() == pytest.approx(eq2 / plus.sum())
    # epsilon added before each step: softmax(log(p + eps)) along cterms, then along intensifiers
    eps = 1e-3
    first = (raw.to_numpy() + eps) / (raw.to_numpy() + eps).sum(axis=0, keepdims=True)
    want = (first + eps) / (first + eps).sum(axis=1, keepdims=True)
    got = scoring.normalize(scoring.variant_probabilities(tokens), epsilon=eps).pivot(
        index="cterm", columns="intensifier", values="p_norm").loc[raw.index, raw.columns]
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-12)
    with pytest.raises(ValueError, match="item score must be one of"):
        scoring.item_scores(variants, "median")


def test_a_missing_variant_is_an_error_naming_the_item():
    tokens = _tokens(np.random.default_rng(2))
    gap = tokens[~((tokens.item_id == "I2") & (tokens.cterm == "uneasy") & (tokens.intensifier == "yes"))]
    with pytest.raises(ValueError, match=r"item I2 of q \(model m, condition stress, stimulus s1, template "
                                         r"default\): 11 variants, not 3 cterms x 4 intensifiers; missing "
                                         r"\(cterm, intensifier\) cells: \[\('uneasy', 'yes'\)\]"):
        scoring.condition_tables(gap)


def test_select_templates_first_all_or_one():
    items = pd.DataFrame({"model": "m", "questionnaire": "q", "condition": "vanilla", "stimulus_id": "",
                          "item_id": ["a", "a", "b", "b"], "template": ["t1", "t2", "t1", "t2"],
                          "default_template": [True, False, True, False], "score": [0.1, 0.3, -0.2, 0.0],
                          "params_b": 1.0})
    first = scoring.select_templates(items, "first")
    assert first.set_index("item_id")["score"].to_dict() == pytest.approx({"a": 0.1, "b": -0.2})
    assert "template" not in first.columns
    both = scoring.select_templates(items, "all")
    assert both.set_index("item_id")["score"].to_dict() == pytest.approx({"a": 0.2, "b": -0.1})
    assert both["params_b"].tolist() == [1.0, 1.0]
    assert scoring.select_templates(items, "t2").set_index("item_id")["score"].to_dict() == pytest.approx(
        {"a": 0.3, "b": 0.0})
    with pytest.raises(ValueError, match="template 't3' is not a template of questionnaire"):
        scoring.select_templates(items, "t3")
    # a second template scored on some contexts only: its mean would mix wordings, so "all" refuses
    uneven = pd.concat([items, items[items["template"] == "t1"].assign(stimulus_id="s1", condition="stress"),
                        items[items["template"] == "t1"].assign(stimulus_id="s2", condition="stress")])
    with pytest.raises(ValueError, match="questionnaire q: the templates were scored on some contexts only"):
        scoring.select_templates(uneven, "all")


def test_questionnaire_and_condition_means_eq3():
    items = pd.DataFrame({"model": "m", "questionnaire": "q", "condition": "stress",
                          "stimulus_id": ["s1", "s1", "s2", "s2"], "item_id": ["a", "b", "a", "b"],
                          "score": [0.1, 0.3, -0.2, 0.0]})
    qs = scoring.questionnaire_scores(items)
    assert qs.set_index("stimulus_id")["score"].to_dict() == pytest.approx({"s1": 0.2, "s2": -0.1})
    cm = scoring.condition_means(qs)
    assert cm["score"].item() == pytest.approx(0.05)
    assert cm["n_stimuli"].item() == 2


def test_geometric_and_product_aggregations_are_recorded_options():
    tokens = _tokens(np.random.default_rng(3))
    g = scoring.variant_probabilities(tokens, "geometric")
    p = scoring.variant_probabilities(tokens, "product")
    two = g[g.intensifier == "very much"].iloc[0]
    lp = tokens[(tokens.item_id == two.item_id) & (tokens.cterm == two.cterm) & (tokens.intensifier == "very much")]["logprob"]
    assert two.p_raw == pytest.approx(math.exp(lp.mean()))
    assert p[p.intensifier == "very much"].iloc[0].p_raw == pytest.approx(math.exp(lp.sum()))
    assert set(g["aggregation"]) == {"geometric"}
    with pytest.raises(ValueError, match="aggregation must be one of"):
        scoring.variant_probabilities(tokens, "mean")


def test_silhouette_by_hand_with_correlation_distance():
    x = np.array([[0.1, 0.2, 0.3, 0.4],
                  [0.1, 0.2, 0.35, 0.35],
                  [0.4, 0.3, 0.2, 0.1],
                  [0.5, 0.3, 0.1, 0.1]])
    labels = np.array([True, True, False, False])
    d = 1 - np.corrcoef(x)
    s = []
    for i in range(4):
        same = [j for j in range(4) if labels[j] == labels[i] and j != i]
        other = [j for j in range(4) if labels[j] != labels[i]]
        a, b = d[i, same].mean(), d[i, other].mean()
        s.append((b - a) / max(a, b))
    assert scoring.item_silhouette(x, labels) == pytest.approx(np.mean(s))
    assert np.isnan(scoring.item_silhouette(x, [True] * 4))
