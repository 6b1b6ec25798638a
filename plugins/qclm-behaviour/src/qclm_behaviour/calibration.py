"""The behaviour kind's calibration (qclm's docs/calibration.md; no torch): its material and its units, through
qclm's public plug-in API.

Material ``choices`` (tier 1, the kind's own format): every item of the plant's tasks (``tasks``; default every
task of each probe the plant names) as the probe asks it, answered with its target option (plus: the higher-valued
machine, the threatening reading, the sure amount), with the other option (minus), or with either, half of the
items each (a sham: the same prompts, answers balanced). Each exposure asks an item in one order of its options,
drawn per item and exposure and the same for every run, so that the arms answer the same prompts. Held out: the
procedural tasks' items of another seed (new histories, new stakes; the interpretation task has no held-out
scenarios).

Units: each item's P(target) (vanilla, over the stimuli and both orders) less the base model's, in probability
points, per task as an instrument of its own (``PROBE_TASK``); planted where the plant asks the task.
"""

from __future__ import annotations

from qclm.plugin import VANILLA, Exchange, Material, Planting, balanced, base_of, sham_index
from qclm_behaviour import tasks as T

#: what seeds the held-out items of the procedural tasks: the probe's seed plus this
HELDOUT_SEED_OFFSET = 1_000_003


def _planted_tasks(planting: Planting, probe) -> list[str]:
    wanted = planting.settings.get("tasks") or list(T.TASKS)
    return [t for t in probe.settings["tasks"] if t in wanted]


def _answered(planting: Planting, run: str, exposure: int, items_of) -> list[Exchange]:
    out = []
    for probe in planting.readers:
        for task in _planted_tasks(planting, probe):
            items = items_of(probe, task)
            sham = sham_index(run) is not None
            mine = balanced(planting.rng("choices", planting.plant.name, run, exposure, task), [True, False],
                            len(items)) if sham else [run == "plus"] * len(items)
            orders = planting.rng("choices", planting.plant.name, "orders", exposure, task)
            for item, target in zip(items, mine):
                order = orders.randrange(item.orders)
                pick = item.targets[order] if target else 1 - item.targets[order]
                out.append(Exchange(item.prompts[order], item.options[order][pick]))
    return out


def choices(planting: Planting, run: str, exposure: int) -> list[Exchange]:
    """One exposure of the ``choices`` material (module docstring)."""
    return _answered(planting, run, exposure,
                     lambda probe, task: [i for i in probe.items(planting.limit_items) if i.task == task])


def heldout(planting: Planting, arm: str) -> list[Exchange]:
    """The procedural tasks' items of another seed, answered as the arm answers (the check's held-out set)."""
    def items_of(probe, task):
        if task == "interpretation":
            return []
        n = probe.settings["items"]
        n = min(n, planting.limit_items) if planting.limit_items else n
        return T.generated(task, n, probe.settings["seed"] + HELDOUT_SEED_OFFSET)

    return _answered(planting, arm, 0, items_of)


MATERIALS = (Material(
    "choices", 1, choices, heldout, keys={"tasks": []},
    schema={"tasks": {"type": "array", "items": {"enum": list(T.TASKS)}, "uniqueItems": True,
                      "description": "the tasks planted (default, empty: every task of each probe)"}},
    description="the behaviour tasks' items answered with their target option (minus: the other option)"),)


def units(tables, plant, config, instances):
    """Per model, task and item (vanilla), P(target) less the base model's (baseline 0), planted where the plant
    asks the task, in the plus arm's direction (the target)."""
    import pandas as pd

    cols = ["model", "probe", "instrument", "role", "metric", "unit", "group", "value", "baseline", "direction"]
    items = tables["items"]
    items = items[(items["condition"] == VANILLA) & items["probe"].isin(
        [i for i, inst in instances.items() if inst.kind == "behaviour"])]
    if items.empty:
        return pd.DataFrame(columns=cols)
    per = items.groupby(["model", "probe", "instrument", "task", "item_id"], as_index=False)["score"].mean()
    per["base"] = per["model"].map(base_of)
    base = per[per["model"] == per["base"]][["base", "instrument", "item_id", "score"]]
    per = per.merge(base.rename(columns={"score": "base_score"}), on=["base", "instrument", "item_id"])
    wanted = set(plant.settings.get("tasks") or T.TASKS)
    planted = per["probe"].isin(plant.probes) & per["task"].isin(wanted)
    return pd.DataFrame({"model": per["model"], "probe": per["probe"], "instrument": per["instrument"],
                         "role": planted.map({True: "planted", False: "unplanted"}), "metric": "p_target_shift",
                         "unit": per["item_id"].astype(str), "group": "planted",
                         "value": per["score"] - per["base_score"], "baseline": 0.0, "direction": 1})[cols]
