"""The instrument library's analysis: validation per instrument, the construct map against planted correlations
and the literature's signs, the state-trait spectrum over all instruments, and `qclm analyze --instruments`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as sps

from qclm.analysis import registry, stats
from qclm.analysis.synthetic import synthetic_library_scores, synthetic_silhouette
from qclm.commands import main
from qclm.equations import questionnaire_scores
from qclm.errors import InputError
from qclm.probes.likert.analysis import analyze, constructs, library
from qclm.probes.likert.analysis.score_tables import load_instruments
from qclm.probes.likert.kind import LikertProbe
from qclm.probes.likert.outputs import LIBRARY as LIBRARY_CATEGORY
from qclm.questionnaire import INSTRUMENT_COLUMNS, instrument_rows

LIKERT_OUTPUTS = LikertProbe.analysis_outputs()

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # pingouin 0.7 on pandas 3.1

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("instrument_validation", "construct_map", "instrument_spectrum")

# six instruments; the context (and model) correlations planted between them, and the verdict each pair must get
INSTRUMENTS = {"anx": ("anxiety", "state"), "dep": ("depression", "state"), "brs": ("resilience", "trait"),
               "neu": ("neuroticism", "trait"), "se": ("self-esteem", "trait"), "opn": ("openness", "trait")}
PLANTED = {  # pair: (planted r, expected sign, verdict)
    ("anx", "dep"): (0.8, "+", "yes"),     # Reuben et al. 2024: anxiety ~ depression positive
    ("anx", "brs"): (-0.6, "-", "yes"),    # Smith et al. 2008: resilience negative with anxiety
    ("neu", "se"): (0.6, "-", "no"),       # Judge et al. 2002 expect negative: planted against it
    ("anx", "neu"): (0.0, "+", "n.s."),    # Kotov et al. 2010 expect positive: planted zero
    ("anx", "opn"): (0.5, "", ""),         # no expectation for openness
}


def _corr() -> np.ndarray:
    names = list(INSTRUMENTS)
    r = np.eye(len(names))
    for (a, b), (value, _, _) in PLANTED.items():
        r[names.index(a), names.index(b)] = r[names.index(b), names.index(a)] = value
    for (a, b), value in ((("dep", "brs"), -0.48), (("dep", "opn"), 0.4)):  # implied by the planted ones
        r[names.index(a), names.index(b)] = r[names.index(b), names.index(a)] = value
    assert np.linalg.eigvalsh(r).min() > 0.05  # a valid correlation matrix
    return r


def _pair(table: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    return table[((table["questionnaire_a"] == a) & (table["questionnaire_b"] == b))
                 | ((table["questionnaire_a"] == b) & (table["questionnaire_b"] == a))]


# --------------------------------------------------------------------------- the literature table

def test_expected_relations_are_symmetric_cited_and_unique():
    seen = set()
    for rel in constructs.EXPECTED_RELATIONS:
        key = frozenset(map(constructs.normalize_construct, (rel.construct_a, rel.construct_b)))
        assert len(key) == 2 and key not in seen
        seen.add(key)
        assert rel.sign in (+1, -1, None) and rel.source and rel.note
        back = constructs.expected_relation(rel.construct_b, rel.construct_a)
        assert back is rel
    rel = constructs.expected_relation("Anxiety", "DEPRESSION")
    assert rel.sign == +1 and "arXiv:2409.19655" in rel.source and "88 models" in rel.note
    for other in ("anxiety", "depression"):  # kept although no sense-of-coherence instrument ships
        assert constructs.expected_relation(other, "sense of coherence").sign == -1
    assert constructs.expected_relation("positive affect", "negative affect").sign is None  # near-orthogonal
    assert constructs.expected_relation("self_esteem", "Depression").sign == -1  # spelling-insensitive
    same = constructs.expected_relation("anxiety", "anxiety")  # STAI-S ~ STAI-T ~ GAD-7
    assert same.sign == +1 and "same construct" in same.source
    assert constructs.expected_relation("openness", "anxiety") is None
    assert constructs.expected_relation("", "anxiety") is None


def test_every_shipped_construct_but_openness_and_agreeableness_has_an_expectation():
    shipped = sorted((ROOT / "resources" / "questionnaires").glob("*.yaml"))
    rows = instrument_rows({p.stem: p for p in shipped if not p.stem.endswith("_control")})  # docs/constructs.md
    table = pd.DataFrame(rows, columns=INSTRUMENT_COLUMNS)
    assert len(table) == 16 and set(table["framing"]) == {"state", "trait"}
    assert table.set_index("questionnaire").loc["stai_t", "templates"] == "question statement interview"
    assert (table["source"] != "").all() and (table["n_items"] >= 6).all()
    related = {c for c in table["construct"]
               if any(constructs.expected_relation(c, other) and c != other for other in table["construct"])}
    assert set(table["construct"]) - related == {"openness", "agreeableness"}


def test_correlation_matrix_matches_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(25, 4)) @ rng.normal(size=(4, 4))
    r, p = stats.correlation_matrix(x)
    rho, p_rho = stats.correlation_matrix(x, rank=True)
    for i in range(4):
        for j in range(i + 1, 4):
            ref = sps.pearsonr(x[:, i], x[:, j])
            assert r[i, j] == pytest.approx(ref.statistic, abs=1e-12) and p[i, j] == pytest.approx(ref.pvalue, rel=1e-9)
            ref = sps.spearmanr(x[:, i], x[:, j])
            assert rho[i, j] == pytest.approx(ref.statistic, abs=1e-12)
            assert p_rho[i, j] == pytest.approx(ref.pvalue, rel=1e-9)


# --------------------------------------------------------------------------- the construct map

@pytest.mark.parametrize("n_models", [2, 30])
def test_construct_map_finds_the_planted_signs(n_models):
    items, inst = synthetic_library_scores(INSTRUMENTS, _corr(), n_models=n_models, n_stimuli=30, seed=1)
    table = constructs.construct_map_table(questionnaire_scores(items), inst, min_models=10, min_stimuli=10)
    within = table[table["scope"] == "within model"]
    assert len(within) == n_models * 15 and (within["n"] == 61).all()  # vanilla + 2 x 30 stimuli
    assert not within["underpowered"].any()
    for (a, b), (r, sign, verdict) in PLANTED.items():
        rows = _pair(within, a, b)
        assert (rows["expected_sign"] == sign).all()
        assert np.abs(rows["pearson_r"] - r).max() < 0.35, (a, b)
        shares = rows["agrees"].value_counts(normalize=True)
        assert shares.get(verdict, 0) >= 0.9, (a, b, shares.to_dict())  # nearly every model, as planted
    assert set(_pair(within, "anx", "brs")["source"]) == {constructs.SMITH_2008}
    across = table[table["scope"] == "across models"]
    if n_models < constructs.MIN_MODELS_ACROSS:
        assert across.empty
    else:
        assert len(across) == 15 and (across["n"] == n_models).all() and (across["model"] == "(all models)").all()
        assert not across["underpowered"].any()
        for (a, b), (r, sign, verdict) in PLANTED.items():
            row = _pair(across, a, b).iloc[0]
            assert row["expected_sign"] == sign and row["agrees"] == verdict, (a, b, row["pearson_r"])
        few = constructs.construct_map_table(questionnaire_scores(items), inst, min_models=40)
        assert few.loc[few["scope"] == "across models", "underpowered"].all()


def test_construct_map_holm_and_verdict_rule():
    assert constructs.verdict(+1, 0.5, 0.01) == "yes" and constructs.verdict(-1, 0.5, 0.01) == "no"
    assert constructs.verdict(-1, 0.5, 0.06) == "n.s." and constructs.verdict(None, 0.9, 1e-9) == ""
    assert constructs.verdict(+1, np.nan, np.nan) == "undefined"
    items, inst = synthetic_library_scores(INSTRUMENTS, _corr(), n_models=1, n_stimuli=6, seed=2)
    table = constructs.construct_map_table(questionnaire_scores(items), inst, min_stimuli=20)
    assert np.allclose(table["p_holm"], stats.holm(table["pearson_p"].to_numpy()))
    assert table["underpowered"].all()  # 13 contexts < 20


def test_construct_map_with_missing_contexts_uses_the_complete_pairs():
    items, inst = synthetic_library_scores(INSTRUMENTS, _corr(), n_models=1, n_stimuli=8, seed=7)
    items = items[~((items["questionnaire"] == "dep") & (items["stimulus_id"].isin(["stress-00", "neutral-03"])))]
    q = questionnaire_scores(items)
    table = constructs.construct_map_table(q, inst)
    wide = q.pivot_table(index=["condition", "stimulus_id"], columns="questionnaire", values="score")
    for (a, b), n in ((("anx", "dep"), 15), (("anx", "brs"), 17)):
        row = _pair(table, a, b).iloc[0]
        ok = wide[[a, b]].dropna()
        assert row["n"] == n == len(ok)
        assert row["pearson_r"] == pytest.approx(sps.pearsonr(ok[a], ok[b]).statistic, abs=1e-12)
        assert row["spearman_p"] == pytest.approx(sps.spearmanr(ok[a], ok[b]).pvalue, rel=1e-9)


def test_construct_map_without_instrument_table_has_no_expectations():
    items, _ = synthetic_library_scores(INSTRUMENTS, _corr(), n_models=3, n_stimuli=5, seed=3)
    table = constructs.construct_map_table(questionnaire_scores(items), None)
    assert len(table) == 4 * 15 and (table["expected_sign"] == "").all() and (table["agrees"] == "").all()
    assert table["pearson_r"].notna().all() and (table["construct_a"] == "").all()


# --------------------------------------------------------------------------- validation per instrument

def test_within_model_alpha_equals_pingouin_and_across_model_alpha_too():
    items, inst = synthetic_library_scores(INSTRUMENTS, _corr(), n_models=4, n_items=5, n_stimuli=8, seed=4,
                                           noise_sd={"opn": 0.8})
    table = library.instrument_validation_table(items, None, inst).set_index(["model", "questionnaire"])
    for model, q in (("model-00", "anx"), ("model-03", "opn")):
        sub = items[(items["model"] == model) & (items["questionnaire"] == q)]
        wide = sub.pivot_table(index=["condition", "stimulus_id"], columns="item_id", values="score")
        ref, _ = pg.cronbach_alpha(data=wide)
        row = table.loc[(model, q)]
        assert row["alpha_within"] == pytest.approx(ref, rel=1e-9)
        assert row["n_contexts"] == 17 and row["n_items"] == 5
    vanilla = items[(items["condition"] == "vanilla") & (items["questionnaire"] == "dep")]
    ref, _ = pg.cronbach_alpha(data=vanilla.pivot(index="model", columns="item_id", values="score"))
    all_row = table.loc[("(all models)", "dep")]
    assert all_row["alpha_across"] == pytest.approx(ref, rel=1e-9) and all_row["n_models"] == 4
    assert all_row["underpowered"]  # 4 < 10 models
    assert table.loc[("model-00", "anx"), "construct"] == "anxiety"
    # items drowned in noise do not move together: low consistency, flagged
    assert "low consistency (within-model alpha" in table.loc[("model-03", "opn"), "flag"]
    assert table.loc[("model-03", "anx"), "flag"] == ""
    # with two models there is no across-model row
    two = library.instrument_validation_table(items[items["model"].isin(["model-00", "model-01"])], None, inst)
    assert "(all models)" not in set(two["model"])


def test_instruments_whose_terms_do_not_separate_are_flagged():
    items, inst = synthetic_library_scores(INSTRUMENTS, _corr(), n_models=3, n_items=6, n_stimuli=5, seed=5)
    sil = synthetic_silhouette(items, seed=1)  # around 0.23
    bad = sil["questionnaire"] == "brs"
    sil.loc[bad, "silhouette"] = np.random.default_rng(0).uniform(-0.3, -0.01, bad.sum())  # never separate
    half = (sil["questionnaire"] == "se") & sil["item_id"].str.endswith(("01", "02", "03", "04"))
    sil.loc[half, "silhouette"] = -0.05  # four of six items at or below 0, the mean still positive
    table = library.instrument_validation_table(items, sil, inst).set_index(["model", "questionnaire"])
    brs = table.xs("brs", level="questionnaire")
    assert len(brs) == 4 and brs["flag"].str.startswith("S+/S- not separated (mean silhouette").all()
    assert (brs["silhouette_share_le0"] == 1.0).all()
    se = table.xs("se", level="questionnaire")
    assert (se["silhouette_mean"] > 0).all()
    assert se["flag"].str.contains("S+/S- not separated in 67% of items", regex=False).all()
    others = table.drop(index=["brs", "se"], level="questionnaire")
    assert (others["flag"] == "").all()
    line = library.overview_line({"instrument_validation": table.reset_index(), "construct_map":
                                  constructs.construct_map_table(questionnaire_scores(items), inst)})
    assert line.startswith("Instrument library: flagged instruments: brs (4 rows: S+/S- not separated)")
    assert "construct map within model:" in line


def test_silhouettes_of_the_selected_templates():
    items = pd.DataFrame({"model": "m", "questionnaire": "q", "item_id": ["i1", "i1"], "condition": "vanilla",
                          "stimulus_id": "", "score": [0.1, 0.2], "template": ["a", "b"],
                          "default_template": [True, False]})
    sil = pd.DataFrame({"model": "m", "questionnaire": "q", "item_id": "i1", "template": ["a", "b"],
                        "silhouette": [0.4, -0.2]})
    assert library.selected_silhouettes(sil, items, "first")["silhouette"].tolist() == [0.4]
    assert library.selected_silhouettes(sil, items, "b")["silhouette"].tolist() == [-0.2]
    assert library.selected_silhouettes(sil, items, "all")["silhouette"].tolist() == pytest.approx([0.1])
    assert library.selected_silhouettes(None, items, "all") is None


# --------------------------------------------------------------------------- qclm analyze --instruments

FIVE = {"stai_s": ("anxiety", "state"), "phq9": ("depression", "state"), "brs": ("resilience", "trait"),
        "ipip_neuroticism": ("neuroticism", "trait"), "pa_trait": ("positive affect", "trait")}


@pytest.fixture(scope="module")
def five_instruments(tmp_path_factory):
    d = tmp_path_factory.mktemp("library")
    r = np.eye(5)
    r[0, 1] = r[1, 0] = 0.8
    r[0, 2] = r[2, 0] = -0.5
    r[1, 2] = r[2, 1] = -0.4
    items, inst = synthetic_library_scores(FIVE, r, n_models=3, n_items=5, n_stimuli=10, seed=6,
                                           stress_shift={"stai_s": 0.4, "phq9": 0.3}, context_sd=0.05)
    items.to_parquet(d / "items.parquet")
    inst.to_csv(d / "instruments.csv", index=False)
    sil = synthetic_silhouette(items)
    sil.loc[sil["questionnaire"] == "brs", "silhouette"] = -0.1
    sil.to_csv(d / "sil.csv", index=False)
    code = main(["analyze", "--scores", str(d / "items.parquet"), "--out", str(d / "out"), "--bootstrap", "200",
                 "--silhouette", str(d / "sil.csv"), "--instruments", str(d / "instruments.csv")])
    assert code == 0
    return items, d


def test_analyze_with_instruments_writes_every_library_table_and_figure(five_instruments):
    items, d = five_instruments
    out = d / "out"
    for kind in (registry.TABLE, registry.FIGURE):
        outputs = registry.select(LIKERT_OUTPUTS, kind)
        assert {o.name for o in outputs if o.category == LIBRARY_CATEGORY} == set(LIBRARY)
    for name in LIBRARY:
        assert (out / f"{name}.csv").stat().st_size > 1000, name
        assert (out / "tables" / f"{name}.md").exists() and (out / "tables" / f"{name}.html").exists()
        for ext in ("png", "pdf"):
            assert (out / "figures" / f"{name}.{ext}").stat().st_size > 1000, name
    val = pd.read_csv(out / "instrument_validation.csv", keep_default_na=False)
    assert len(val) == 5 * 3 + 5 and set(val.loc[val["questionnaire"] == "brs", "flag"].str[:20]) == {
        "S+/S- not separated "}
    cmap = pd.read_csv(out / "construct_map.csv", keep_default_na=False)
    assert len(cmap) == 10 * 3 + 10  # 10 pairs per model, 3 models, and across models
    assert set(_pair(cmap, "stai_s", "phq9")["expected_sign"]) == {"+"}
    spectrum = pd.read_csv(out / "instrument_spectrum.csv", keep_default_na=False)
    assert set(spectrum["scope"]) == {"across models", "within model"}
    oneway = pd.read_csv(out / "anova_oneway.csv")
    st = pd.read_csv(out / "per_model_state_trait.csv")
    row = spectrum[(spectrum["scope"] == "across models") & (spectrum["questionnaire"] == "phq9")
                   & (spectrum["contrast"] == "vanilla vs stress")].iloc[0]
    ref = oneway[(oneway["questionnaire"] == "phq9") & (oneway["contrast"] == "vanilla vs stress")].set_index("source")
    assert row["eta2_condition"] == pytest.approx(ref.loc["stimuli", "eta2"])
    assert row["eta2_subject"] == pytest.approx(ref.loc["model", "eta2"]) and row["framing"] == "state"
    assert row["underpowered"] in (True, "True", "yes")
    within = spectrum[spectrum["scope"] == "within model"]
    assert len(within) == len(st) and within["eta2_condition"].sort_values().tolist() == pytest.approx(
        st["eta2_condition"].sort_values().tolist())
    # the planted stress shift puts the state instruments further right in every model
    vs = within[within["contrast"] == "vanilla vs stress"].groupby("framing")["eta2_condition"].median()
    assert vs["state"] > vs["trait"]
    overview = (out / "overview.md").read_text()
    assert "Instrument library: flagged instruments: brs" in overview and "expected signs agree" in overview
    assert json.loads((out / "run_info.json").read_text())["instruments"].endswith("instruments.csv")


def test_analyze_without_instruments_still_maps_constructs(five_instruments, tmp_path):
    _, d = five_instruments
    res = analyze(d / "items.parquet", tmp_path / "out", bootstrap=50, figures=False)
    assert (res["construct_map"]["expected_sign"] == "").all() and len(res["construct_map"]) == 40
    assert (res["instrument_validation"]["construct"] == "").all()
    assert res["instrument_validation"]["silhouette_mean"].isna().all()
    assert "construct map without expected signs" in (tmp_path / "out" / "overview.md").read_text()


def test_instrument_table_errors_name_file_and_column(tmp_path, caplog):
    path = tmp_path / "inst.csv"
    pd.DataFrame({"questionnaire": ["a"], "construct": ["anxiety"]}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"inst.csv: missing column `framing`"):
        load_instruments(path)
    pd.DataFrame({"questionnaire": ["a", "a"], "construct": "x", "framing": "state"}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"inst.csv: column `questionnaire` repeats 'a'"):
        load_instruments(path)
    pd.DataFrame({"questionnaire": ["b", "a"], "construct": ["x", ""], "framing": "trait"}).to_csv(path, index=False)
    got = load_instruments(path, ["a", "c"])
    assert got["questionnaire"].tolist() == ["a", "c"] and got["construct"].tolist() == ["", ""]
    assert "no row for questionnaire(s) c" in caplog.text


def test_instruments_a_model_has_seen_are_flagged_from_the_memorization_table(five_instruments, tmp_path, caplog):
    """The memorization probe's exposure rows above the decoy join the flag of that model's row of
    instrument_validation, and the (all models) row counts the models; a bad table is named by file and column."""
    items, d = five_instruments
    rows = [  # model-00 has seen phq9 (Min-K% and zlib AUCs), model-01 has not; model-02 saw stai_s
        ("model-00", "phq9", "auc_min_k", 0.91, 0.002, True), ("model-00", "phq9", "auc_zlib", 0.88, 0.004, True),
        ("model-01", "phq9", "auc_min_k", 0.52, 0.9, False), ("model-02", "stai_s", "auc_min_k", 0.95, 0.001, True),
        ("model-00", "decoy", "auc_min_k", 0.5, 1.0, False)]
    mem = pd.DataFrame(rows, columns=["model", "instrument", "metric", "value", "p_holm", "above_decoy"]).assign(
        condition="vanilla", task="exposure")
    mem.to_csv(tmp_path / "memorization.csv", index=False)
    out = tmp_path / "out"
    args = ["analyze", "--scores", str(d / "items.parquet"), "--out", str(out), "--bootstrap", "50",
            "--instruments", str(d / "instruments.csv"), "--no-figures"]
    assert main([*args, "--memorization", str(tmp_path / "memorization.csv")]) == 0
    val = pd.read_csv(out / "instrument_validation.csv", keep_default_na=False).set_index(["model", "questionnaire"])
    assert val.loc[("model-00", "phq9"), "flag"].endswith(
        "items exposed above the decoy (memorization: auc_min_k 0.91, Holm p 0.002, vanilla; "
        "auc_zlib 0.88, Holm p 0.004, vanilla)")
    assert "exposed" not in val.loc[("model-01", "phq9"), "flag"]
    assert "exposed" not in val.loc[("model-00", "stai_s"), "flag"]
    assert "items exposed above the decoy in 1 model (memorization)" in val.loc[("(all models)", "phq9"), "flag"]
    assert "exposed" not in val.loc[("(all models)", "ipip_neuroticism"), "flag"]
    assert json.loads((out / "run_info.json").read_text())["memorization"] == str(tmp_path / "memorization.csv")
    # without the table: no such flag anywhere
    plain = pd.read_csv(d / "out" / "instrument_validation.csv", keep_default_na=False)
    assert not plain["flag"].str.contains("exposed").any()
    mem.drop(columns="p_holm").to_csv(tmp_path / "bad.csv", index=False)
    assert main([*args, "--memorization", str(tmp_path / "bad.csv")]) == 2
    assert f"{tmp_path / 'bad.csv'}" in caplog.text and "p_holm" in caplog.text
