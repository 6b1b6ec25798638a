"""The behaviour kind (plugins/qclm-behaviour, docs/validity.md), a package of its own on qclm's plug-in API: its
items in both orders of their options, its calibration material, its readouts beside chance and the
shuffled-options band, the predictive-validity table at each level beside its baselines (checked against SciPy),
its bad input, and the kind in the shared workflow run beside the Likert questionnaires."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT
from scipy import stats as sps

from qclm import probes
from qclm.plugin import Instance, ProbeAnalysis
from qclm_behaviour import analysis, tasks, validity
from qclm_behaviour.kind import ANSWER_COLUMNS, BehaviourProbe, item_table


def _probe(**settings) -> BehaviourProbe:
    defaults = {"tasks": list(tasks.TASKS), "items": 6, "scenarios": "", "seed": 0, "unrelated": []}
    return BehaviourProbe(Instance("beh", "behaviour", {**defaults, **settings}))


def test_the_installed_package_registers_the_kind():
    assert probes.kind_class("behaviour") is BehaviourProbe


def test_every_item_is_asked_in_both_orders_of_its_options_and_its_target_follows():
    items = _probe().items()
    assert Counter(i.task for i in items) == {"bandit": 6, "interpretation": 6, "risk": 6}
    for item in items:
        if item.task == "interpretation":  # continuations: one prompt, no label, the threatening reading first
            assert item.orders == 1 and item.targets == (0,)
            continue
        assert item.orders == 2 and item.prompts[0] != item.prompts[1] and item.targets[0] != item.targets[1]
    for item in (i for i in items if i.task == "bandit"):
        assert item.features["v"] >= 0 and item.features["tu"] > 0  # the target: the higher posterior mean
        # each machine is called F in one order and J in the other: the history's letters swap
        swapped = item.prompts[0].replace("Machine F", "Machine X").replace("Machine J", "Machine F") \
            .replace("Machine X", "Machine J")
        assert swapped == item.prompts[1]
    for item in (i for i in items if i.task == "risk"):
        first = item.prompts[0].split("Option 1: ")[1].split("\n")[0]
        assert first.startswith("Receive $") and item.targets == (0, 1)
    assert _probe().items() == items and _probe(seed=1).items() != items  # the seed decides the items


def _answers(p_target_first: float, p_target_second: float, items: int = 20, task: str = "risk",
             stimuli: int = 1, condition: str = "vanilla", model: str = "m") -> pd.DataFrame:
    """Answers of a model whose P(target) is ``p_target_first`` where the target is the first option and
    ``p_target_second`` where it is the second, in both orders of each item."""
    rows = []
    for s in range(stimuli):
        for i in range(items):
            for order, target in ((0, 0), (1, 1)):
                p = p_target_first if target == 0 else p_target_second
                p_first = p if target == 0 else 1 - p
                rows.append([model, "beh", condition, f"st{s}" if stimuli > 1 else "", task, f"{task}{i:03d}", "",
                             order, target, np.log(p_first), np.log(1 - p_first), p_first, p,
                             *[np.nan] * len(tasks.FEATURES)])
    return pd.DataFrame(rows, columns=ANSWER_COLUMNS)


def _context(tmp_path, answers: pd.DataFrame, config: dict | None = None, **tables) -> ProbeAnalysis:
    files = {}
    for name, table in {"answers": answers, **tables}.items():
        files[name] = tmp_path / f"{name}.parquet"
        table.to_parquet(files[name])
    return ProbeAnalysis("behaviour", files, config or {"analysis": {"bootstrap": 500, "min_stimuli": 10}})


def test_a_pull_towards_a_position_cancels_over_the_orders_and_stays_in_the_shuffled_band(tmp_path):
    # a model that says "1" four times in five whatever the options: P(target) 0.8 or 0.2 by the order
    positional = analysis.readouts_table(_context(tmp_path, _answers(0.8, 0.2))).iloc[0]
    assert positional["readout"] == pytest.approx(0.5) and positional["position"] == pytest.approx(0.8)
    assert positional["shuffled_low"] < 0.5 < positional["shuffled_high"] and not positional["beyond_shuffled"]
    # a model that picks the sure amount wherever it stands: beyond the band, and beyond chance
    seeking = analysis.readouts_table(_context(tmp_path, _answers(0.9, 0.9))).iloc[0]
    assert seeking["readout"] == pytest.approx(0.9) and seeking["beyond_shuffled"]
    assert seeking["chance"] == 0.5 and seeking["ci_low"] <= 0.9 <= seeking["ci_high"]
    # the items table is the item-score shape: one row per item and context, the mean over the orders
    items = item_table(_answers(0.8, 0.2))
    assert len(items) == 20 and set(items["score"].round(12)) == {0.5} and set(items["instrument"]) == {"beh_risk"}


def _planted(seed: int = 0, stimuli: int = 12):
    """A run of two models whose questionnaire ``q`` and task readout go together across the stimuli of the
    stress condition (and ``u``, an unrelated instrument, does not): the answers and the per-context scores."""
    rng = np.random.default_rng(seed)
    answers, scores = [], []
    for model in ("m1", "m2"):
        for condition, n in (("vanilla", 1), ("stress", stimuli)):
            x = rng.normal(size=n)
            for s in range(n):
                stimulus = f"st{s}" if condition != "vanilla" else ""
                p = 1 / (1 + np.exp(-(0.8 * x[s] + rng.normal(0, 0.2))))
                frame = _answers(p, p, items=8, stimuli=1, condition=condition, model=model)
                frame["stimulus_id"] = stimulus
                answers.append(frame)
                for q, value in (("q", x[s]), ("u", rng.normal())):
                    scores.append({"model": model, "questionnaire": q, "condition": condition,
                                   "stimulus_id": stimulus, "score": value})
    return pd.concat(answers, ignore_index=True), pd.DataFrame(scores)


def test_validity_finds_a_planted_association_beside_its_baselines_and_marks_what_the_run_cannot_support(tmp_path):
    answers, scores = _planted()
    context = _context(tmp_path, answers)
    table = validity.validity_table(context, scores, answers, {"beh": ("u",)})
    stim = table[(table["level"] == "stimulus") & (table["questionnaire"] == "q")]
    assert len(stim) == 2 and stim["supported"].all() and (stim["n"] == 12).all()
    for row in stim.itertuples():
        # the estimate is Pearson's r of the per-stimulus score and readout (SciPy's)
        sub = answers[(answers["model"] == row.model) & (answers["condition"] == "stress")]
        readout = sub.groupby("stimulus_id")["p_target"].mean()
        x = scores[(scores["model"] == row.model) & (scores["questionnaire"] == "q") & (scores["condition"] == "stress")
                   ].set_index("stimulus_id")["score"].reindex(readout.index)
        assert row.estimate == pytest.approx(sps.pearsonr(x, readout).statistic, abs=1e-12)
        assert row.estimate > 0.8 and row.ci_low > 0 and row.beyond_shuffled
        assert row.shuffled_low < 0 < row.shuffled_high  # the shuffled readout follows nothing
        unrelated = table[(table["level"] == "stimulus") & (table["questionnaire"] == "u") &
                          (table["model"] == row.model)].iloc[0]
        assert row.unrelated == "u" and row.unrelated_estimate == unrelated["estimate"]
        assert unrelated["role"] == "unrelated" and abs(unrelated["estimate"]) < 0.7
    # one primed condition: its effects are given, a correlation across conditions is not supported
    cond = table[(table["level"] == "condition") & (table["questionnaire"] == "q")]
    effects = cond[cond["condition"] == "stress"]
    assert len(effects) == 2 and effects["score_effect"].notna().all() and effects["readout_effect"].notna().all()
    across = cond[cond["condition"] == ""]
    assert not across["supported"].any() and across["note"].str.contains("1 primed conditions").all()
    # two base models: the model level is marked, with the reason, never left out
    model = table[(table["level"] == "model") & (table["questionnaire"] == "q")].iloc[0]
    assert not model["supported"] and model["underpowered"] and "2 models (10 needed" in model["note"]
    assert np.isnan(model["estimate"])


def test_validity_reads_checkpoints_as_a_level_of_their_own(tmp_path):
    answers, scores = _planted()
    rows, extra = [], []
    for k, shift in enumerate((-0.2, 0.0, 0.1, 0.3)):
        ckpt = f"m1@cal_x_run{k}-e1"
        frame = _answers(0.5 + shift, 0.5 + shift, items=8, model=ckpt)
        rows.append(frame)
        extra.append({"model": ckpt, "questionnaire": "q", "condition": "vanilla", "stimulus_id": "",
                      "score": scores[(scores["model"] == "m1") & (scores["questionnaire"] == "q") &
                                      (scores["condition"] == "vanilla")]["score"].iloc[0] + shift})
    answers = pd.concat([answers, *rows], ignore_index=True)
    scores = pd.concat([scores, pd.DataFrame(extra)], ignore_index=True)
    table = validity.validity_table(_context(tmp_path, answers), scores, answers, {})
    ckpt = table[(table["level"] == "checkpoint") & (table["questionnaire"] == "q")].iloc[0]
    assert ckpt["model"] == "m1" and ckpt["n"] == 4 and ckpt["supported"]
    assert ckpt["estimate"] == pytest.approx(1.0)  # every checkpoint moves both by the same amount


def test_the_calibration_material_answers_the_target_in_the_plus_arm_and_pairs_the_arms():
    from qclm.calibration import plants

    config = {"probes": {"beh": {"kind": "behaviour", "items": 4}},
              "calibration": {"plants": {"own": {"material": "choices", "probes": ["beh"], "tasks": ["risk", "bandit"]}}}}
    plant = plants(config)["own"]
    planting = plant.planting(config)
    texts = {run: plant.declared.units(planting, run, 0) for run in ("plus", "minus", "sham0")}
    assert len(texts["plus"]) == 8 and [t.user for t in texts["plus"]] == [t.user for t in texts["minus"]]
    items = {i.prompts[o]: (i, o) for i in _probe(items=4).items() for o in range(i.orders)}
    for run, wanted in (("plus", True), ("minus", False)):
        for t in texts[run]:
            item, order = items[t.user]
            assert (t.assistant == item.options[order][item.targets[order]]) == wanted
    hits = [t.assistant == items[t.user][0].options[items[t.user][1]][items[t.user][0].targets[items[t.user][1]]]
            for t in texts["sham0"]]
    assert sum(hits) == 4  # a sham answers half of the items with the target
    held = plant.declared.heldout(planting, "plus")
    assert len(held) == 8 and not {t.user for t in held} & {t.user for t in texts["plus"]}


def _validate(config: dict, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return subprocess.run([sys.executable, "-m", "qclm.commands", "validate", "--config", str(path)],
                          capture_output=True, text=True, timeout=300)


def test_a_bad_scenario_file_is_one_line_naming_the_file_the_item_and_the_field(tmp_path):
    data = yaml.safe_load(tasks.SCENARIOS.read_text())
    data["items"][2]["benign"] = "Your friend is busy."
    bad = tmp_path / "scenarios.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False))
    base = {"models": str(ROOT / "config/models.tsv"), "conditions": ["vanilla"]}
    run = _validate({**base, "probes": {"beh": {"kind": "behaviour", "scenarios": str(bad)}}}, tmp_path)
    assert run.returncode != 0
    item = data["items"][2]["id"]
    assert f"{bad}: item {item}: field threatening/benign: word counts differ" in run.stdout + run.stderr
    run = _validate({**base, "probes": {"beh": {"kind": "behaviour", "scenarios": str(tmp_path / "none.yaml")}}},
                    tmp_path)
    assert f"field probes.beh.scenarios: file {tmp_path / 'none.yaml'} does not exist" in run.stdout + run.stderr
    run = _validate({**base, "probes": {"beh": {"kind": "behaviour", "tasks": ["dice"]}}}, tmp_path)
    assert run.returncode != 0 and "field probes.beh.tasks" in run.stdout + run.stderr


@pytest.mark.slow
def test_the_shared_run_writes_the_readouts_the_fits_and_the_validity_table_with_their_marks(shared_run):
    out = shared_run.results / "analysis"
    readouts = pd.read_csv(out / "behaviour_readouts.csv")
    assert set(readouts["task"]) == set(tasks.TASKS) and (readouts["chance"] == 0.5).all()
    assert readouts[["shuffled_low", "shuffled_high"]].notna().all().all()
    fits = pd.read_csv(out / "behaviour_fits.csv")
    assert set(fits["parameter"]) == {"V", "RU", "V/TU", "r", "tau"} and fits["underpowered"].all()  # 2 items
    table = pd.read_csv(out / "validity.csv", keep_default_na=False, na_values=[""])
    assert {"stimulus", "condition", "model"} <= set(table["level"])
    assert {"stai_s", "stai_t"} <= set(table["questionnaire"]) and set(table[table["role"] == "unrelated"]
                                                                         ["questionnaire"]) == {"rses"}
    # two stimuli a condition and two models: the stimulus and model levels are there, marked, with the reason
    stim = table[table["level"] == "stimulus"]
    assert not stim["supported"].any() and stim["note"].str.startswith("2 stimuli").all()
    assert table[table["level"] == "model"]["note"].str.startswith("2 models").all()
    assert (out / "figures" / "validity.png").exists() and (out / "figures" / "behaviour_readouts.png").exists()


def test_the_calibration_units_are_each_items_p_target_less_the_base_models_planted_where_the_plant_asks():
    from qclm.calibration import plants
    from qclm_behaviour import calibration

    config = {"probes": {"beh": {"kind": "behaviour", "items": 4}},
              "calibration": {"plants": {"own": {"material": "choices", "probes": ["beh"], "tasks": ["risk"]}}}}
    plant = plants(config)["own"]
    rows = [{"model": m, "instrument": f"beh_{t}", "item_id": f"{t}{i}", "condition": c, "stimulus_id": "",
             "score": 0.5 + (0.1 if m != "m" else 0.0) + 0.01 * i, "probe": "beh", "task": t}
            for m in ("m", "m@cal_own_plus-e1") for t in ("risk", "bandit") for i in range(3)
            for c in ("vanilla", "stress")]
    instances = {i.id: i for i in probes.instances(config)}
    units = calibration.units({"items": pd.DataFrame(rows)}, plant, config, instances)
    assert len(units) == 12 and set(units["metric"]) == {"p_target_shift"} and (units["direction"] == 1).all()
    moved = units[units["model"] == "m@cal_own_plus-e1"]
    assert np.allclose(moved["value"], 0.1) and np.allclose(units[units["model"] == "m"]["value"], 0.0)
    assert dict(Counter(zip(moved["instrument"], moved["role"]))) == {("beh_risk", "planted"): 3,
                                                                       ("beh_bandit", "unplanted"): 3}


def test_unrelated_names_a_questionnaire_of_the_run(tmp_path):
    base = {"models": str(ROOT / "config/models.tsv"), "conditions": ["vanilla"], "stimuli": {"version": "long"},
            "questionnaires": {"stai_s": str(ROOT / "resources/questionnaires/stai_s.yaml")}}
    ok = _validate({**base, "probes": {"beh": {"kind": "behaviour", "unrelated": ["stai_s"]}}}, tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for name, said in (("rses", "not a probe of the run"), ("beh", "a behaviour probe")):
        run = _validate({**base, "probes": {"beh": {"kind": "behaviour", "unrelated": [name]}}}, tmp_path)
        assert run.returncode != 0
        assert (f"{tmp_path / 'config.yaml'}: field probes.beh.unrelated, entry 1: {name!r} is {said}; the validity "
                "table reads the questionnaires of the entailment and likert kinds (stai_s)") in run.stdout, run.stdout
