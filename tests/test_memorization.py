"""The memorization probe: a model trained on some decoy items knows them (exposure near 1 against the decoy, over
their own word-order neighbours too) and not the others (near 0.5); a model that knows only the kind of text (its
words), not the items, is not flagged; recall scores each candidate against its own mean over the prompts, with a
permutation null over the item-to-prompt assignment; every forced choice stores log-probabilities; prompts name
an instrument by its published name, the decoy by one that does not give it away; the middle target is the
integer midpoint; every baseline formula against a simulation (Han et al.'s target baselines included); the
permutation null's false-positive rate near 5% on a model that has seen neither set; the plain item list format,
bad entries named by file and item; `qclm probe memorization` on a plain item list."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, load_dir, loaded_model

from qclm.contexts import Context, ContextSettings
from qclm.errors import InputError
from qclm.instruments import load_instrument
from qclm.jobs.score_model import CellSpec, score_cell
from qclm.models.table import parse_model_row
from qclm.probes.base import Asking, Instance
from qclm.probes.memorization import metrics as m
from qclm.probes.memorization.analysis import FALLBACK_NOTE, memorization_table
from qclm.probes.memorization.kind import CLOZE, DIMENSION, NEIGHBOUR, RECALL, TARGETS, MemorizationProbe
from qclm.probes.memorization.perturb import neighbours

DECOY = ROOT / "resources/memorization/decoy.yaml"
GAD7 = ROOT / "resources/questionnaires/gad7.yaml"
NO_NA = pd.DataFrame(columns=["model", "condition", "task", "instrument", "reason"])


def _split_decoy(tmp_path, groups: dict[str, list[int]], decoy_of: str) -> dict[str, str]:
    """Plain item lists made of the shipped decoy's items (by index): one file per group."""
    data = yaml.safe_load(DECOY.read_text())
    out = {}
    for name, idx in groups.items():
        part = {k: v for k, v in data.items() if k not in ("items", "id", "decoy")}
        part.update(id=name, name=f"Inventory {name}", decoy=name == decoy_of, items=[data["items"][i] for i in idx])
        # declare the dimensions the group's items are in (a declared dimension without items is refused)
        part["dimensions"] = [d for d in data["dimensions"] if any(it["dimension"] == d for it in part["items"])]
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(part, sort_keys=False))
        out[name] = str(path)
    return out


def _exposure(model, tok, spec, files: dict[str, str], decoy: str) -> pd.DataFrame:
    settings = {"instruments": [f for k, f in files.items() if k != decoy], "decoy": files[decoy],
                "tasks": ["exposure"], "inventories": {}, "mode": "logprob", "max_new_tokens": 8}
    cell = CellSpec("memorization", "memorization", "vanilla", settings, tuple(files.values()))
    raw, _ = score_cell(loaded_model(spec, model, tok), cell, ContextSettings())
    return raw


def _spec(path, prompt_format="raw"):
    return parse_model_row({"name": "tiny", "source": str(path), "revision": "", "params_b": "0.001",
                            "type": "base" if prompt_format == "raw" else "instruct", "family": "t",
                            "dtype": "float32", "prompt_format": prompt_format}, "test", 0)


def _probe(**settings) -> MemorizationProbe:
    return MemorizationProbe(Instance("memorization", "memorization", {**MemorizationProbe.defaults(), **settings}))


def _train(model, tok, texts: list[str], steps: int) -> None:
    """A few optimizer steps on the texts, all in one padded batch (seeded)."""
    import torch

    torch.manual_seed(0)
    enc = tok(texts, return_tensors="pt", padding=True)
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        model(**enc, labels=labels).loss.backward()
        optim.step()
        optim.zero_grad()
    model.eval()


def test_items_a_model_was_trained_on_are_above_the_decoy(tmp_path, tiny_llama_dir):
    import torch

    files = _split_decoy(tmp_path, {"seen": list(range(0, 30, 3)), "unseen": list(range(1, 30, 3)),
                                    "null": list(range(2, 30, 3))}, decoy_of="null")
    model, tok = load_dir(tiny_llama_dir)
    torch.manual_seed(0)
    seen = [it.text for it in load_instrument(files["seen"]).items]
    batch = [tok(t, return_tensors="pt")["input_ids"] for t in seen]
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(8):  # a few steps on the seen items only
        for ids in batch:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optim.step()
            optim.zero_grad()
    model.eval()
    raw = _exposure(model, tok, _spec(tiny_llama_dir), files, "null")
    table = memorization_table(raw, NO_NA, "null", n_perm=2000, n_boot=200)
    auc = table[table["metric"] == "auc_min_k"].set_index("instrument")
    assert auc.loc["seen", "value"] > 0.95 and auc.loc["seen", "p_value"] < 0.01, auc
    assert 0.2 < auc.loc["unseen", "value"] < 0.8 and auc.loc["unseen", "p_value"] > 0.05, auc
    # against their own word-order neighbours: the trained order is preferred, beyond the decoy's preference
    gap = table[table["metric"] == "auc_min_k_gap"].set_index("instrument")
    assert gap.loc["seen", "value"] > 0.9 and gap.loc["seen", "p_value"] < 0.01, gap
    assert gap.loc["unseen", "p_value"] > 0.05, gap
    assert bool(gap.loc["seen", "above_decoy"]) and not bool(gap.loc["unseen", "above_decoy"])
    paired = table[(table["metric"] == "min_k_gap") & (table["baseline_kind"] == "perturbed")].set_index("instrument")
    assert paired.loc["seen", "value"] > paired.loc["seen", "decoy_value"] and paired.loc["seen", "p_value"] < 0.01
    assert not table.loc[table["metric"] == "auc_min_k", "above_decoy"].any()  # the raw AUC marks nothing


def test_knowing_the_kind_of_text_is_not_exposure(tmp_path, tiny_llama_dir):
    """A model trained on sentences made of some words (the kind of text) but not on the items, which are new
    sentences of those words: their raw Min-K% is far above the decoy's (words the model never saw), as prose
    passages no model can have seen score 0.70-0.81 against the decoy on the embedded models; their gap over their
    own word-order neighbours is not, and nothing is flagged as exposed."""
    import re

    words = sorted({w for it in yaml.safe_load(DECOY.read_text())["items"] + yaml.safe_load(GAD7.read_text())["items"]
                    for w in re.findall(r"[a-z]+", it["text"].lower()) if len(w) > 2})
    rng = np.random.default_rng(0)
    words = list(rng.permutation(words))
    kind, other = words[:len(words) // 2], words[len(words) // 2:]

    def sentences(pool, n):
        return [" ".join(rng.choice(pool, 6, replace=False)).capitalize() + "." for _ in range(n)]

    model, tok = load_dir(tiny_llama_dir)
    _train(model, tok, sentences(kind, 40), steps=12)
    files = {}
    for name, texts in (("kind", sentences(kind, 15)), ("null", sentences(other, 20))):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"id": name, "name": f"Inventory {name}", "decoy": name == "null",
                                        "items": [{"id": f"{name}{i}", "text": t} for i, t in enumerate(texts)]}))
        files[name] = str(path)
    raw = _exposure(model, tok, _spec(tiny_llama_dir), files, "null")
    assert set(raw["task"]) == {"exposure", NEIGHBOUR}
    table = memorization_table(raw, NO_NA, "null", n_perm=2000, n_boot=200).set_index(["instrument", "metric"])
    assert table.loc[("kind", "auc_min_k"), "value"] > 0.7 and table.loc[("kind", "auc_min_k"), "p_holm"] < 0.05
    assert 0.3 < table.loc[("kind", "auc_min_k_gap"), "value"] < 0.7, table.loc["kind"]
    assert table.loc[("kind", "auc_min_k_gap"), "p_holm"] > 0.05
    assert not table["above_decoy"].any()


def test_neighbours_are_word_order_swaps_fixed_by_the_text():
    text = "Feeling nervous, anxious, or on edge."
    got = neighbours(text, 5)
    assert got == neighbours(text, 5) and len(got) == 5 == len(set(got)) and text not in got
    for n in got:  # one adjacent pair swapped: the same words, the capital first and the full stop last
        assert sorted(n.lower().rstrip(".").split()) == sorted(text.lower().rstrip(".").split())
        assert n[0].isupper() and n.endswith(".") and n.count(".") == 1
        diff = [i for i, (a, b) in enumerate(zip(n.lower().split(), text.lower().split())) if a != b]
        assert len(diff) == 2 and diff[1] == diff[0] + 1
    assert neighbours("Sad") == [] and sorted(neighbours("I am calm", 5)) == ["Am I calm", "I calm am"]


def test_the_permutation_null_rejects_about_five_percent(tmp_path, tiny_llama_dir):
    """A model that has seen neither set: the exposure AUC test of random splits of the same items rejects at its
    level (5%), within a binomial interval, and not always or never."""
    files = _split_decoy(tmp_path, {"a": list(range(30)), "null": list(range(5))}, decoy_of="null")
    model, tok = load_dir(tiny_llama_dir)
    raw = _exposure(model, tok, _spec(tiny_llama_dir), files, "null")
    scores = raw[raw["instrument"] == "a"].drop_duplicates("item_id")
    values = np.array([m.min_k_logprob(lp) for lp in scores["token_logprobs"]])
    rng = np.random.default_rng(1)
    tests = 300
    rejected = 0
    for _ in range(tests):
        order = rng.permutation(len(values))
        _, p = m.auc_permutation(values[order[:15]], values[order[15:]], 499, rng)
        rejected += p < 0.05
    rate = rejected / tests
    assert 0.015 <= rate <= 0.095, rate


def test_baselines_equal_their_simulation():
    rng = np.random.default_rng(0)
    for k in (4, 5, 7):
        x, y = rng.integers(0, k, 400_000), rng.integers(0, k, 400_000)
        assert abs(np.abs(x - y).mean() - m.random_option_mae(k)) < 0.01
    for n in (3, 7, 30):
        ranks = rng.integers(1, n + 1, 400_000)
        assert abs((1 / ranks).mean() - m.random_mrr(n)) < 0.005
        assert abs((ranks == 1).mean() - 1 / n) < 0.005
    scores = [0.0, 1.0, 2.0, 3.0]
    for target in (0.0, 1.5, 3.0):
        guesses = rng.choice(scores, 400_000)
        assert abs(np.abs(guesses - target).mean() - m.random_target_mae(scores, target)) < 0.01
    # the macro-F1 of random guesses over D balanced dimensions is about 1/D
    gold = np.repeat(["a", "b", "c"], 40)
    f1 = np.mean([m.macro_f1(gold, rng.choice(["a", "b", "c"], len(gold)), ["a", "b", "c"]) for _ in range(400)])
    assert abs(f1 - 1 / 3) < 0.02


def test_the_metrics_on_hand_made_cases():
    assert m.min_k_logprob([-1, -5, -2, -9, -3], 0.2) == -9
    assert m.min_k_logprob([-1, -5, -2, -9, -3], 0.4) == -7
    assert m.auc([3, 4], [1, 2]) == 1 and m.auc([1, 2], [3, 4]) == 0 and m.auc([1], [1]) == 0.5
    assert m.rank_of_true([0.1, 0.9, 0.5], 2) == 2 and m.rank_of_true([1, 1, 0], 0) == 1.5
    assert m.macro_f1(["a", "b"], ["a", "b"], ["a", "b"]) == 1 and m.macro_f1(["a", "b"], ["b", "a"], ["a", "b"]) == 0
    assert m.token_f1("feeling nervous and anxious", "Feeling nervous, anxious, or on edge") == pytest.approx(
        2 * (3 / 4) * (3 / 6) / (3 / 4 + 3 / 6))
    assert m.rouge_l("a b c d", "a x c d") == pytest.approx(0.75)


def test_the_plain_item_list_names_bad_entries(tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text(yaml.safe_dump({"name": "Mine", "dimensions": ["x", "y"], "items": [
        {"id": "i1", "text": "I like tea", "dimension": "x", "keyword": "coffee"},
        {"id": "i1", "text": "I like rain", "dimension": "z"},
        {"id": "i3", "dimension": "y"},
        {"id": "i4", "text": "I sing", "keying": "sideways"}]}))
    with pytest.raises(InputError) as err:
        load_instrument(bad)
    lines = err.value.lines
    assert f"{bad}: item i1 (#1): field keyword: keyword 'coffee' does not occur in the item's text as a word" in lines
    assert f"{bad}: item i1 (#2): field id: duplicate item id (item #1 has it too)" in lines
    assert f"{bad}: item i1 (#2): field dimension: 'z' is not one of the file's dimensions (x, y)" in lines
    assert f"{bad}: item i3: field text: missing required field" in lines
    assert f"{bad}: item i4: field dimension: missing: the file declares dimensions" in lines
    assert any(line.startswith(f"{bad}: item i4: field keying: must be one of direct, reverse") for line in lines)
    good = tmp_path / "ok.yaml"
    good.write_text(yaml.safe_dump({"name": "Mine", "items": [{"id": 1, "text": "I like tea", "keyword": "tea"}]}))
    inst = load_instrument(good)
    assert inst.id == "ok" and inst.has_wording and inst.items[0].number == 1 and inst.items[0].id == "1"


def test_qclm_probe_memorization_on_a_plain_item_list(tmp_path, tiny_llama_dir):
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"name": "My inventory", "dimensions": ["calm", "busy"],
                                    "original_scale": {"options": [{"label": "No", "score": 0},
                                                                   {"label": "Yes", "score": 1}]},
                                    "items": [{"id": f"m{i}", "text": t, "dimension": d, "keyword": k}
                                              for i, (t, d, k) in enumerate([
                                                  ("I sit quietly by the window", "calm", "window"),
                                                  ("I rush from one errand to the next", "busy", "errand"),
                                                  ("I breathe slowly before I speak", "calm", "breathe"),
                                                  ("I fill every hour of my diary", "busy", "diary")])]}))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "probe", "memorization", "--model",
                          str(tiny_llama_dir), "--out", str(out), "--instrument", str(mine), "--decoy", str(DECOY)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    table = pd.read_csv(out / "analysis" / "memorization.csv")
    got = set(zip(table["instrument"], table["task"]))
    for task in ("exposure", "recall", "cloze", "dimension", "option_score"):
        assert ("mine", task) in got, task
    assert table.loc[(table["instrument"] == "mine") & (table["task"] == "target"), "note"].str.contains(
        "chat-format").all()
    assert set(table["baseline_kind"].dropna()) >= {"decoy", "random", "permutation"}
    raw = pd.read_parquet(out / "scores" / "memorization_raw.parquet")
    assert set(raw["task"]) == {"exposure", NEIGHBOUR, "recall", "cloze", "dimension", "option_score"}
    assert (out / "analysis" / "figures" / "memorization.png").stat().st_size > 10_000


def test_target_score_matching_on_a_hand_made_table():
    """A four-option scale (0-3): the middle target is Han et al.'s integer midpoint, 1, which one option reaches
    (the half-way 1.5 no answer could reach); each target's error and the uniform answer's expected error by
    summation; the note says which score the middle is."""
    rows = []
    for goal, chosen in (("minimum", 0), ("middle", 1), ("maximum", 3)):
        for score in range(4):
            rows.append({"model": "m", "condition": "vanilla", "task": "target", "instrument": "x", "item_id": "i1",
                         "target": goal, "candidate_value": float(score), "logprob": 0.0 if score == chosen else -5.0,
                         "is_true": False, "option": "", "inventory": ""})
    table = memorization_table(pd.DataFrame(rows), NO_NA, "decoy", n_boot=0)
    got = table.set_index("metric")
    assert got.loc["mae_minimum", "value"] == 0 and got.loc["mae_maximum", "value"] == 0
    assert got.loc["mae_middle", "value"] == 0
    assert got.loc["mae_middle", "baseline"] == pytest.approx(1.0)  # mean |1 - s| over s = 0..3
    assert got.loc["mae_maximum", "baseline"] == pytest.approx(1.5)  # mean |3 - s|
    assert got.loc["expected_mae_middle", "value"] < 1.0
    assert got.loc["mae_middle", "note"].startswith("target score 1 of 0-3: the option score nearest the middle 1.5")


def test_generated_recall_is_scored_against_each_items_text_once_whatever_the_stimuli():
    """Under a condition with several stimuli every context has the items' exposure rows: each item's text is its
    truth once (a recall of item i1 that says i1's text scores F1 1 against its own, 0 against the other's); it
    once came back as a Series and ended the analysis (the recall-by-generation row of the table)."""
    rows = []
    for stimulus in ("s1", "s2"):
        for item, text in (("i1", "worry about many things"), ("i2", "feel calm and rested")):
            common = {"model": "m", "condition": "stress", "stimulus_id": stimulus, "instrument": "x",
                      "item_id": item, "option": "", "inventory": "", "target": ""}
            rows.append({**common, "task": "exposure", "text": text, "logprob": -3.0, "logprob_mean": -1.0,
                         "is_true": True, "candidate": item})
            rows.append({**common, "task": "recall_generated", "text": text, "logprob": np.nan,
                         "logprob_mean": np.nan, "is_true": False, "candidate": ""})
    from qclm.probes.memorization.analysis import _generated

    sub = pd.DataFrame(rows)
    generated = sub[sub["task"] == "recall_generated"]
    f1 = {r["metric"]: r for r in _generated(generated, sub, "m", "stress", "x", 0, 0)}["token_f1"]
    assert f1["value"] == 1.0 and f1["baseline"] == 0.0 and f1["n_items"] == 4


def test_the_target_baselines_are_han_et_al_s():
    """Han et al.: a uniform answer's MAE averaged over the minimum, mean and maximum targets is 1.73 on a 5-point
    and 2.17 on a 6-point scale, with integer targets (1, 3, 5 on 1-5)."""
    for k, expected in ((5, 1.73), (6, 2.17)):
        scores = list(range(1, k + 1))
        mae = np.mean([m.random_target_mae(scores, m.target_score(scores, goal)) for goal in TARGETS])
        assert round(mae, 2) == expected, (k, mae)
        for goal in TARGETS:  # their closed form, for the integer target t on 1..K
            t = m.target_score(scores, goal)
            assert m.random_target_mae(scores, t) == pytest.approx(((t - 1) * t + (k - t) * (k - t + 1)) / (2 * k))
    assert [m.target_score([1, 2, 3, 4, 5], g) for g in TARGETS] == [1, 3, 5]


def test_recall_removes_each_candidate_s_own_likelihood():
    """Each candidate's likelihood differs by far more (0.5 nats a step) than a prompt moves it (0.05): ranked by
    the raw log-prob the same candidate wins under every prompt, a fixed outcome; against its own mean over the
    prompts the true item wins each time, and the permutation null over the item-to-prompt assignment says how
    rare that is. Without the prompt's effect the outcome is fixed, and its p is 1, not a draw's."""
    n = 8
    rows = []
    for k in range(n):
        for j in range(n):
            lp = -0.5 * j + (0.05 if j == k else 0.0)
            rows.append({"model": "m", "condition": "vanilla", "stimulus_id": "", "task": "recall", "instrument": "x",
                         "inventory": "", "item_id": f"i{k}", "option": "", "target": "", "candidate": f"i{j}",
                         "is_true": j == k, "logprob": 3 * lp, "logprob_mean": lp})
    raw = pd.DataFrame(rows)
    got = memorization_table(raw, NO_NA, "decoy", n_perm=2000, n_boot=100).set_index("metric")
    assert got.loc["top1", "value"] == 1 and got.loc["mrr", "value"] == 1
    assert got.loc["top1", "baseline_kind"] == "permutation" and got.loc["top1", "baseline"] == pytest.approx(1 / n,
                                                                                                            abs=0.02)
    assert got.loc["mrr", "baseline"] == pytest.approx(m.random_mrr(n), abs=0.02)  # H_N / N
    assert got.loc["top1", "p_value"] < 0.002 and got.loc["mrr", "p_value"] < 0.002
    flat = raw.assign(logprob_mean=[-0.5 * int(c[1:]) for c in raw["candidate"]])
    got = memorization_table(flat, NO_NA, "decoy", n_perm=2000, n_boot=100).set_index("metric")
    assert got.loc["top1", "p_value"] == 1 and got.loc["mrr", "p_value"] == 1


def test_recall_on_a_model_that_learned_the_item_numbers(tmp_path, tiny_llama_dir):
    """A tiny model trained on "NAME, item K: TEXT" of ten decoy items recalls them by number against the
    contrast's permutation null; the untrained model, whose candidates' own likelihoods are far further apart than a
    prompt moves them, does not (p above 0.05)."""
    files = _split_decoy(tmp_path, {"known": list(range(10)), "null": list(range(10, 20))}, decoy_of="null")
    known = load_instrument(files["known"])
    settings = {"instruments": [files["known"]], "decoy": files["null"], "tasks": ["recall"]}
    cell = CellSpec("memorization", "memorization", "vanilla", settings, tuple(files.values()))
    model, tok = load_dir(tiny_llama_dir)
    before, _ = score_cell(loaded_model(_spec(tiny_llama_dir), model, tok), cell, ContextSettings())
    scores = before[before["instrument"] == "known"].pivot(index="item_id", columns="candidate",
                                                           values="logprob_mean").to_numpy()
    between = np.ptp(scores.mean(axis=0))  # how far apart the candidates' own likelihoods are
    within = np.abs(scores - scores.mean(axis=0)).mean()  # how far a prompt moves a candidate
    assert between > 5 * within  # the candidates' own likelihood decides most of the raw ranking
    untrained = memorization_table(before, NO_NA, "null", n_perm=2000, n_boot=100).set_index(["instrument", "metric"])
    assert untrained.loc[("known", "top1"), "p_value"] > 0.05
    _train(model, tok, [RECALL.format(name=known.published_name or known.name, number=it.number) + " " + it.text
                        for it in known.items], steps=15)
    after, _ = score_cell(loaded_model(_spec(tiny_llama_dir), model, tok), cell, ContextSettings())
    trained = memorization_table(after, NO_NA, "null", n_perm=2000, n_boot=100).set_index(["instrument", "metric"])
    assert trained.loc[("known", "top1"), "value"] >= 0.5 and trained.loc[("known", "top1"), "p_value"] < 0.01
    assert trained.loc[("null", "top1"), "p_value"] > 0.01


def test_every_forced_choice_stores_log_probabilities(tmp_path, tiny_llama_dir):
    """The logprob column of the cloze, dimension, option -> score and target rows is log P(option | prompt), the
    same number a log-likelihood request of the prompt and the option gives (not the option's logit, short of the
    vocabulary's log-sum-exp)."""
    from qclm.engine.requests import ChoiceRequest, LoglikRequest

    model, tok = load_dir(tiny_llama_dir)
    loaded = loaded_model(_spec(tiny_llama_dir, "chat"), model, tok)
    settings = {"instruments": [str(GAD7)], "decoy": str(DECOY), "tasks": ["cloze", "dimension", "option_score",
                                                                        "target"]}
    raw, _ = score_cell(loaded, CellSpec("memorization", "memorization", "vanilla", settings, (str(GAD7), str(DECOY))),
                        ContextSettings())
    assert set(raw["task"]) == {"cloze", "dimension", "option_score", "target"}
    assert (raw["logprob"] < 0).all()
    np.testing.assert_allclose(raw["logprob"], [sum(t) for t in raw["token_logprobs"]], atol=1e-9)
    probe = _probe(**settings)
    choices = [x for x in probe.requests(Context("vanilla"), loaded.prompts, Asking())
               if isinstance(x.request, ChoiceRequest)]
    sample = choices[:: max(1, len(choices) // 12)]
    direct = loaded.backend.loglikelihood([LoglikRequest(x.request.context, o) for x in sample
                                           for o in x.request.options])
    stored = []
    for x in sample:
        rows = raw[(raw["task"] == x.key["task"]) & (raw["instrument"] == x.key["instrument"])
                   & (raw["item_id"] == x.key["item_id"]) & (raw["option"] == x.key.get("option", ""))
                   & (raw["target"] == x.key.get("target", ""))]
        assert len(rows) == len(x.request.options), x.describe
        stored.extend(rows["logprob"])
    np.testing.assert_allclose(stored, [r.logprob for r in direct], atol=2e-4)


def test_prompts_name_an_instrument_by_its_published_name(tmp_path, tiny_llama_dir):
    """Han et al. prompt with the inventory's name as training text has it ("GAD-7"), not the file's title; a file
    without a published_name is asked by its name, and the raw table and memorization.csv say so."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"name": "My inventory", "original_scale": {"options": [
        {"label": "No", "score": 0}, {"label": "Yes", "score": 1}]}, "items": [
        {"id": "m1", "text": "I sit quietly by the window", "keyword": "window"},
        {"id": "m2", "text": "I rush from one errand to the next", "keyword": "errand"}]}))
    settings = {"instruments": [str(GAD7), str(mine)], "decoy": str(DECOY),
                "tasks": ["recall", "cloze", "option_score", "target"]}
    model, tok = load_dir(tiny_llama_dir)
    loaded = loaded_model(_spec(tiny_llama_dir, "chat"), model, tok)
    reqs = _probe(**settings).requests(Context("vanilla"), loaded.prompts, Asking())
    gad = [x for x in reqs if x.key["instrument"] == "gad7"]
    assert {x.key["task"] for x in gad} == {"recall", "cloze", "option_score", "target"}
    for x in gad:
        assert "GAD-7" in x.request.context and "adapted for causal" not in x.request.context, x.request.context
        assert (x.key["asked_name"], x.key["name_source"]) == ("GAD-7", "published_name")
    assert any(RECALL.format(name="GAD-7", number=1) in x.request.context for x in gad)
    own = [x for x in reqs if x.key["instrument"] == "mine"]
    assert own and all("My inventory" in x.request.context and x.key["name_source"] == "name" for x in own)
    settings["tasks"] = ["recall"]
    raw, meta = score_cell(loaded, CellSpec("memorization", "memorization", "vanilla", settings,
                                        (str(GAD7), str(mine), str(DECOY))), ContextSettings())
    assert meta["asked_names"]["gad7"] == {"name": "GAD-7", "source": "published_name"}
    assert meta["asked_names"]["mine"] == {"name": "My inventory", "source": "name"}
    assert set(zip(raw["instrument"], raw["name_source"])) == {("gad7", "published_name"), ("mine", "name"),
                                                               ("decoy", "published_name")}
    table = memorization_table(raw, NO_NA, "decoy", n_perm=200, n_boot=50).set_index(["instrument", "metric"])
    assert FALLBACK_NOTE in table.loc[("mine", "top1"), "note"]
    assert FALLBACK_NOTE not in str(table.loc[("gad7", "top1"), "note"])


def test_the_decoy_is_asked_the_way_the_instruments_are(tmp_path, tiny_llama_dir):
    """The decoy's prompts are the instruments' prompts with its published-style name: none says that it is a
    decoy (the file does, in name, decoy and source); a decoy whose prompts would give it away is refused."""
    model, tok = load_dir(tiny_llama_dir)
    loaded = loaded_model(_spec(tiny_llama_dir, "chat"), model, tok)
    probe = _probe(instruments=[str(GAD7)], decoy=str(DECOY))
    decoy = load_instrument(DECOY)
    assert decoy.decoy and "decoy" in decoy.name and "decoy" not in decoy.published_name.lower()
    reqs = probe.requests(Context("vanilla"), loaded.prompts, Asking())
    asked = [x for x in reqs if x.key["instrument"] == "decoy" and x.key["task"] != "exposure"
             and x.key["task"] != NEIGHBOUR]
    assert {x.key["task"] for x in asked} == {"recall", "cloze", "dimension", "option_score", "target"}
    for x in asked:
        text = x.request.context.lower()
        assert not any(tell in text for tell in ("decoy", "qclm", "never published")), x.request.context
        assert decoy.published_name in x.request.context
    item = decoy.items[0]
    assert any(RECALL.format(name=decoy.published_name, number=1) in x.request.context for x in asked)
    assert any(DIMENSION.format(inventory=decoy.published_name, text=item.text) in x.request.context for x in asked)
    assert any(CLOZE.split(",")[0].format(name=decoy.published_name) in x.request.context for x in asked)
    assert probe.problems() == []
    telling = tmp_path / "decoy.yaml"
    data = yaml.safe_load(DECOY.read_text())
    telling.write_text(yaml.safe_dump({k: v for k, v in data.items() if k != "published_name"}))
    probe = MemorizationProbe(Instance("memorization", "memorization", {
        **MemorizationProbe.defaults(), "instruments": [str(GAD7)], "decoy": str(telling)},
        source="config.yaml", where="probes.memorization"))
    problems = probe.problems()
    assert len(problems) == 1 and problems[0][:2] == ("config.yaml", "probes.memorization.decoy"), problems
    assert problems[0][2].startswith(f"{telling}: field name: ")
    assert "decoy" in problems[0][2] and "published_name" in problems[0][2]


def test_recall_by_generation_runs_on_a_chat_format_model(tmp_path, tiny_llama_dir):
    """``--mode generate`` on a chat-format model: the recall task's greedy continuations beside its forced
    choices (a generation's result has token log-probabilities too, and is not a log-likelihood's)."""
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "probe", "memorization", "--model",
                          str(tiny_llama_dir), "--prompt-format", "chat", "--out", str(out), "--instrument",
                          str(ROOT / "resources/questionnaires/gad7.yaml"), "--decoy", str(DECOY), "--tasks",
                          "recall", "--mode", "generate"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    raw = pd.read_parquet(out / "scores" / "memorization_raw.parquet")
    generated = raw[raw["task"] == "recall_generated"]
    assert set(raw["task"]) == {"recall", "recall_generated"} and len(generated) == 7 + 30
    assert generated["logprob"].isna().all() and (generated["candidate"] == "").all()
