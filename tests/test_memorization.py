"""The memorization probe: a model trained on some decoy items knows them (exposure AUC near 1) and not the others
(near 0.5); every baseline formula against a simulation; the permutation null's false-positive rate near 5% on a
model that has seen neither set; the plain item list format, bad entries named by file and item; `qclm probe
memorization` on a plain item list."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, load_dir, loaded_model

from qclm.contexts import Protocol
from qclm.errors import InputError
from qclm.instruments import load_instrument
from qclm.jobs.score_model import Cell, score_cell
from qclm.models.table import parse_model_row
from qclm.probes.memorization import metrics as m
from qclm.probes.memorization.analysis import memorization_table

DECOY = ROOT / "resources/memorization/decoy.yaml"


def _split_decoy(tmp_path, groups: dict[str, list[int]], decoy_of: str) -> dict[str, str]:
    """Plain item lists made of the shipped decoy's items (by index): one file per group."""
    data = yaml.safe_load(DECOY.read_text())
    out = {}
    for name, idx in groups.items():
        part = {k: v for k, v in data.items() if k not in ("items", "id", "decoy")}
        part.update(id=name, name=f"Inventory {name}", decoy=name == decoy_of, items=[data["items"][i] for i in idx])
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(part, sort_keys=False))
        out[name] = str(path)
    return out


def _exposure(model, tok, spec, files: dict[str, str], decoy: str) -> pd.DataFrame:
    settings = {"instruments": [f for k, f in files.items() if k != decoy], "decoy": files[decoy],
                "tasks": ["exposure"], "inventories": {}, "mode": "logprob", "max_new_tokens": 8}
    cell = Cell("memorization", "memorization", "vanilla", settings, tuple(files.values()))
    raw, _ = score_cell(loaded_model(spec, model, tok), cell, Protocol())
    return raw


def _spec(path):
    return parse_model_row({"name": "tiny", "source": str(path), "revision": "", "params_b": "0.001",
                            "type": "base", "family": "t", "dtype": "float32"}, "test", 0)


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
    table = memorization_table(raw, pd.DataFrame(columns=["model", "condition", "task", "instrument", "reason"]),
                               "null", n_perm=2000, n_boot=200)
    auc = table[table["metric"] == "auc_min_k"].set_index("instrument")
    assert auc.loc["seen", "value"] > 0.95 and auc.loc["seen", "p_value"] < 0.01, auc
    assert 0.2 < auc.loc["unseen", "value"] < 0.8 and auc.loc["unseen", "p_value"] > 0.05, auc
    assert bool(auc.loc["seen", "above_decoy"]) and not bool(auc.loc["unseen", "above_decoy"])


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
    assert set(raw["task"]) == {"exposure", "recall", "cloze", "dimension", "option_score"}
    assert (out / "analysis" / "figures" / "memorization.png").stat().st_size > 10_000


def test_target_score_matching_on_a_hand_made_table():
    """A four-option scale (0-3): the middle target, 1.5, lies between two options; each target's error and the
    uniform answer's expected error by summation."""
    rows = []
    for goal, chosen in (("minimum", 0), ("middle", 1), ("maximum", 3)):
        for score in range(4):
            rows.append({"model": "m", "condition": "vanilla", "task": "target", "instrument": "x", "item_id": "i1",
                         "target": goal, "candidate_value": float(score), "logprob": 0.0 if score == chosen else -5.0,
                         "is_true": False, "option": "", "inventory": ""})
    table = memorization_table(pd.DataFrame(rows), pd.DataFrame(columns=["model", "condition", "task", "instrument",
                                                                        "reason"]), "decoy", n_boot=0)
    got = table.set_index("metric")
    assert got.loc["mae_minimum", "value"] == 0 and got.loc["mae_maximum", "value"] == 0
    assert got.loc["mae_middle", "value"] == 0.5
    assert got.loc["mae_middle", "baseline"] == pytest.approx(1.0)  # mean |1.5 - s| over s = 0..3
    assert got.loc["mae_maximum", "baseline"] == pytest.approx(1.5)  # mean |3 - s|
    assert got.loc["expected_mae_middle", "value"] < 1.0
