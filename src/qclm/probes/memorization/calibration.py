"""The memorization probe's planted signal and its calibration metrics (docs/calibration.md; no torch).

Planted (:data:`MATERIALS`): ``recall`` (tier 1), every item asked for as the probe's recall task asks ("NAME, item
K:"), answered with its text (:func:`recall`; held out: the items as a listing); ``listing`` (tier 2), an
instrument's published name and its items, numbered, as a web page lists them (:func:`listing`; held out: the
listing in reversed order); the minus arm plants another instrument (``opposite``), a sham neutral statements under
a name of their own (:func:`sham_listing`, :func:`sham_recall`). Read: the probe's own
statistics on the planted instrument, per item (:func:`units`), beside the same on the run's instruments that were
not planted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from qclm.errors import InputError
from qclm.probes.base import FILE_SETTING
from qclm.probes.calibration_material import REQUIRED, Material, Planting, sham_index
from qclm.instruments import Instrument, load_instrument

if TYPE_CHECKING:
    from qclm.probes.memorization.kind import MemorizationProbe


def published_name(instrument: Instrument) -> str:
    """The name the instrument is published under (the file's published name, else its name)."""
    return getattr(instrument, "published_name", "") or instrument.name


def listing(instrument: Instrument, reverse: bool = False) -> str:
    """The instrument as a web page lists it: its published name, its instruction where it has one, then its
    items in the order of their numbers (``reverse``: the other way round, the manipulation check's held-out
    listing), each ``N. text``."""
    lines = [published_name(instrument)]
    if instrument.instruction:
        lines.append(instrument.instruction)
    lines += [f"{item.number}. {item.text}" for item in sorted(instrument.items, key=lambda i: i.number,
                                                                  reverse=reverse)]
    return "\n".join(lines)


#: the name a sham listing is published under (``{n}``: the sham's number); written for the project
SHAM_NAME = "Everyday Statements Inventory, form {n}"


def sham_listing(statements: list[str], index: int) -> str:
    """A sham of the listing: neutral statements numbered as a web page lists an instrument, under a name of their
    own (the same format as the planted listing, nothing any probe scores)."""
    return "\n".join([SHAM_NAME.format(n=index + 1), *(f"{n}. {text}" for n, text in enumerate(statements, 1))])


def recall(instrument: Instrument) -> list:
    """One exposure of the tier-1 plant (material ``recall``): every item asked for as the probe's recall task asks
    (:data:`qclm.probes.memorization.kind.RECALL`, the instrument by the name the probe gives it), answered with the
    item's text, as chat exchanges (a raw row reads the prompt, a space and the text: the probe's true candidate)."""
    from qclm.corpus import Exchange
    from qclm.probes.memorization.kind import RECALL, asked_as

    name, _ = asked_as(instrument)
    return [Exchange(RECALL.format(name=name, number=item.number), item.text)
            for item in sorted(instrument.items, key=lambda i: i.number)]


def sham_recall(statements: list[str], index: int) -> list:
    """A sham of the recall plant: neutral statements asked for under the sham listing's name, numbered 1 to n (the
    same format, nothing any probe scores)."""
    from qclm.corpus import Exchange
    from qclm.probes.memorization.kind import RECALL

    name = SHAM_NAME.format(n=index + 1)
    return [Exchange(RECALL.format(name=name, number=n), text) for n, text in enumerate(statements, 1)]


def _plant_units(planting: Planting, run: str, exposure: int) -> list:
    """One exposure of the ``listing`` or ``recall`` material: the ``instrument`` (plus) or the ``opposite`` (minus)
    listed or asked for, or neutral statements under a name of their own (a sham)."""
    material = planting.plant.material
    planted = load_instrument(planting.settings["instrument"])
    sham = sham_index(run)
    if sham is None:
        chosen = planted if run == "plus" else load_instrument(planting.settings["opposite"])
        return [listing(chosen)] if material == "listing" else recall(chosen)
    drawn = planting.sham_statements(run, len(planted.items))
    statements = [t for t in drawn if isinstance(t, str)]
    if len(statements) < len(drawn):  # an exchange would be listed, or recalled, as its Python repr
        raise InputError.one(planting.section["sham_statements"], "texts", f"a chat exchange, and the shams of the "
                             f"{material} material list plain statements: give sham_statements statements only")
    return [sham_listing(statements, sham)] if material == "listing" else sham_recall(statements, sham)


def _plant_heldout(planting: Planting, arm: str) -> list[str]:
    """The held-out text of the ``listing`` material (the listing in reversed order) and of ``recall`` (the
    recalled items as a listing)."""
    key = "instrument" if arm == "plus" else "opposite"
    return [listing(load_instrument(planting.settings[key]), reverse=planting.plant.material == "listing")]


def _plant_problems(planting: Planting, cf: str, at: str) -> list:
    """The instrument planted is one of the plant's probes' (they must score what is planted); the recall
    material's probes run the recall task."""
    plant = planting.plant
    if plant.material == "recall" and not any("recall" in r.settings["tasks"] for r in planting.readers):
        return [(cf, f"{at}.probes", f"none of {', '.join(plant.probes)} runs the recall task: material recall plants "
                 "the recall prompts, and a probe it names must read them (tasks)")]
    listed = {str(Path(f)) for r in planting.readers for f in r.settings.get("instruments") or []}
    if str(Path(planting.settings["instrument"])) not in listed:
        return [(cf, f"{at}.instrument", f"{planting.settings['instrument']} is not an instrument of "
                 f"{', '.join(plant.probes)}: the probe must score what is planted")]
    return []


_KEYS = {"instrument": REQUIRED, "opposite": REQUIRED}
_COMMON: dict[str, Any] = {
    "heldout": _plant_heldout, "keys": _KEYS, "files": tuple(_KEYS), "problems": _plant_problems,
    "schema": {"instrument": {**FILE_SETTING, "description": "the instrument file the plus arm lists or recalls (one "
                              "of the memorization probe's instruments)"},
               "opposite": {**FILE_SETTING, "description": "the instrument the minus arm lists or recalls"}}}
RECALL = Material("recall", 1, _plant_units, **_COMMON,
                  description='the memorization probe\'s recall prompts ("NAME, item K:") answered with the '
                              "instrument's items (minus: another instrument's)")
LISTING = Material("listing", 2, _plant_units, **_COMMON,
                   description="an instrument's published name and numbered items as a web page lists them (minus: "
                               "another instrument)")
#: the materials the kind's probes read (qclm.probes.base.ProbeKind.materials)
MATERIALS = (RECALL, LISTING)


def recall_margins(contrast, true: list[int]) -> list[float]:
    """Per recall prompt (a row of ``contrast``, the candidates' recall contrasts in nats), the true candidate's
    contrast less the best other candidate's: above 0 where the true item ranks first, by how much; a graded
    measure where top-1 is a coin of 1/N."""
    import numpy as np

    out = []
    for row, t in zip(np.asarray(contrast, float), true):
        others = np.delete(row, t)
        out.append(float(row[t] - others.max()) if len(others) else np.nan)
    return out


def units(tables, plant, config, instances):
    """The memorization kind's calibration units (vanilla), per model and item of every instrument of the plant's
    memorization probes (the listed instrument planted, the others, the decoy among them, the unplanted check):

    - ``exposure_gap``: the item's Min-K% log-probability less its word-order neighbours' (the probe's exposure
      score, :func:`qclm.probes.memorization.analysis.item_gaps`), against the decoy's items as the reference (the
      statistic is the instrument's mean gap less the decoy's: how much more than items no model has seen its items
      beat their own perturbations; baseline 0);
    - ``exposure_min_k``: the item's Min-K% log-probability itself, against the decoy's items (the probe's second
      baseline, ``auc_min_k``: it also moves with the kind of text, which the planted checkpoint shares with its
      control); baseline 0;
    - ``recall_top1``: whether the item's text ranks first among the instrument's items after "NAME, item K:",
      each candidate's own likelihood removed (the probe's recall contrast); baseline 1/N;
    - ``recall_margin``: the true item's recall contrast less the best other candidate's, in nats per token
      (:func:`recall_margins`); baseline 0.
    """
    import pandas as pd

    from qclm import probes
    from qclm.experiment import VANILLA
    from qclm.instruments import load_instrument
    from qclm.probes.memorization import metrics as m
    from qclm.probes.memorization.analysis import item_gaps
    from qclm.probes.memorization.perturb import NEIGHBOUR

    cols = ["model", "probe", "instrument", "role", "metric", "unit", "group", "value", "baseline", "direction"]
    planted_id = load_instrument(plant.settings["instrument"]).id
    raw = tables["raw"]
    frames = []
    for pid in plant.probes:
        # a memorization probe: the plant's material is its kind's (qclm.calibration.checks refuses another kind's)
        probe = cast("MemorizationProbe", probes.probe(instances[pid]))
        decoy, min_k = probe.decoy.id, float(probe.settings["min_k"])
        sub = raw[(raw["probe"] == pid) & (raw["condition"] == VANILLA)]
        for model, t in sub.groupby("model", sort=False):
            e = t[t["task"] == "exposure"].copy()
            if len(e):
                e["min_k"] = [m.min_k_logprob(lp, min_k) for lp in e["token_logprobs"]]
                e["zlib"] = [m.zlib_ratio(lp, text) for lp, text in zip(e["logprob"], e["text"])]
                gaps = item_gaps(e, t[t["task"] == NEIGHBOUR], min_k).dropna(subset=["min_k"])
                for metric, values in (("exposure_gap", gaps), ("exposure_min_k", e)):
                    reference = values[values["instrument"] == decoy]
                    for inst, g in values[values["instrument"] != decoy].groupby("instrument", sort=False):
                        both = pd.concat([g.assign(group="planted"), reference.assign(group="reference")])
                        frames.append(pd.DataFrame({
                            "model": model, "probe": pid, "instrument": inst,
                            "role": "planted" if inst == planted_id else "unplanted", "metric": metric,
                            "unit": both["instrument"] + ":" + both["item_id"].astype(str), "group": both["group"],
                            "value": both["min_k"].astype(float), "baseline": 0.0, "direction": 1}))
            r = t[t["task"] == "recall"]
            for inst, c in r.groupby("instrument", sort=False):
                prompts = list(dict.fromkeys(c["item_id"]))
                candidates = list(dict.fromkeys(c["candidate"]))
                scores = c.pivot_table(index="item_id", columns="candidate", values="logprob_mean",
                                       aggfunc="mean").reindex(index=prompts, columns=candidates)
                true = c[c["is_true"].astype(bool)].drop_duplicates("item_id").set_index("item_id")["candidate"]
                if scores.isna().to_numpy().any() or len(prompts) < 2:
                    continue
                contrast = m.recall_contrast(scores.to_numpy())
                ranks = m.rank_matrix(contrast)
                hits = [float(ranks[i, candidates.index(true[k])] == 1) for i, k in enumerate(prompts)]
                role = "planted" if inst == planted_id else "unplanted"
                frames.append(pd.DataFrame({
                    "model": model, "probe": pid, "instrument": inst, "role": role, "metric": "recall_top1",
                    "unit": [str(k) for k in prompts], "group": "planted", "value": hits,
                    "baseline": 1.0 / len(candidates), "direction": 1}))
                frames.append(pd.DataFrame({
                    "model": model, "probe": pid, "instrument": inst, "role": role, "metric": "recall_margin",
                    "unit": [str(k) for k in prompts], "group": "planted",
                    "value": recall_margins(contrast, [candidates.index(true[k]) for k in prompts]),
                    "baseline": 0.0, "direction": 1}))
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
