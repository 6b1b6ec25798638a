"""A probe kind written in the tests, as a user would write one: one module and a config section.

After each item of any Likert instrument (its first template, first S+ term, up to the answer cue) the model
chooses between " Yes" and " No" (a forced choice); the item's score is P(Yes). It runs under every condition of
the workflow and through ``qclm probe`` with no code of its own for either. Its analysis is its own too: a table
(``yesno_rates``: mean P(Yes) per model and condition beside the 0.5 of a model that picks at random), a figure of
it, their caption (tests/report/yesno_rates.rst, beside this module) and the per-model state-trait decomposition of
its per-item numbers, all declared in ``outputs``: the workflow runs them and files them in the report under a
category of their own. It brings its own calibration material too (``yesno_answers``: its prompts answered with one
option, :data:`MATERIALS`) and its units (:func:`calibration_units`, each item's P(Yes) beside the base model's),
which the calibration reads with no code of its own."""

from __future__ import annotations

import argparse

import pandas as pd

from qclm.plugin import (
    FIGURE, TABLE, ChoiceRequest, CollectInput, Exchange, Labelled, Material, Output, ProbeKind, balanced,
    load_questionnaire, sham_index, state_trait,
)

COLUMNS = ["model", "probe", "condition", "stimulus_id", "item_id", "logp_yes", "logp_no", "p_yes"]
CATEGORY = "A probe written in the tests"


def rates_table(context) -> pd.DataFrame:
    """``yesno_rates``: mean P(Yes) per model and condition over its items and stimuli, beside the baseline of a
    model that picks either option at random (0.5); underpowered with fewer stimuli than ``analysis.min_stimuli``
    (vanilla, one context, never)."""
    items = context.table("items")
    rows = []
    for (model, condition), sub in items.groupby(["model", "condition"], sort=False):
        n = sub["stimulus_id"].nunique()
        rows.append({"model": model, "condition": condition, "p_yes": float(sub["score"].mean()), "baseline": 0.5,
                     "n_items": sub["item_id"].nunique(), "n": n,
                     "underpowered": condition != "vanilla" and n < context.settings["min_stimuli"]})
    return pd.DataFrame(rows)


def rates_figure(context, table: pd.DataFrame):
    """Mean P(Yes) per condition, one panel per model, the random baseline as a line."""
    import matplotlib.pyplot as plt

    from qclm.plugin import mark_underpowered

    models = list(pd.unique(table["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(3 * len(models), 2.5), squeeze=False)
    for ax, model in zip(axes[0], models):
        sub = table[table["model"] == model]
        ax.bar(sub["condition"], sub["p_yes"])
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_title(model)
        ax.set_ylim(0, 1)
        ax.tick_params(axis="x", rotation=45)
        mark_underpowered(ax, sub, what="stimuli")
    return fig


def _answers(planting, run: str, exposure: int) -> list:
    """One exposure of ``yesno_answers``: each item's prompt (as the probe asks it) answered with the plant's
    ``answer`` option (plus), the other one (minus), or half of the items each (a sham)."""
    probe = planting.readers[0]
    q = load_questionnaire(probe.settings["instrument"])
    items = q.items[:planting.limit_items]
    yes, no = probe.settings["options"]
    mine = yes if planting.settings["answer"] == "first" else no
    other = no if mine == yes else yes
    if sham_index(run) is None:
        answers = [mine if run == "plus" else other] * len(items)
    else:
        answers = balanced(planting.rng("yesno", planting.plant.name, run, exposure), [yes, no], len(items))
    return [Exchange(item.prefix(item.plus[0]), answer) for item, answer in zip(items, answers)]


def _answer_problems(planting, cf: str, at: str) -> list:
    """Every probe the plant names asks two options (the kind's schema allows no other; a material's check)."""
    return [(cf, f"{at}.probes", f"{p} asks {len(r.settings['options'])} options")
            for p, r in zip(planting.plant.probes, planting.readers) if len(r.settings["options"]) != 2]


#: the calibration materials of the kind (qclm.probes.base.ProbeKind.materials)
MATERIALS = (Material("yesno_answers", 1, _answers, keys={"answer": "first"}, problems=_answer_problems,
                      schema={"answer": {"enum": ["first", "second"], "description": "the option the plus arm "
                                         "answers every item with"}},
                      description="the yes/no prompts answered with one option (minus: the other)"),)


def calibration_units(tables, plant, config, instances):
    """Per model and item of the plant's probes (vanilla), P(Yes) less the base model's (baseline 0), read in the
    direction of the plus arm's answer."""
    from qclm.plugin import base_of

    items = tables["items"]
    items = items[(items["condition"] == "vanilla") & items["instrument"].isin(plant.probes)]
    per = items.groupby(["model", "instrument", "item_id"], as_index=False)["score"].mean()
    per["base"] = per["model"].map(base_of)
    base = per[per["model"] == per["base"]][["base", "instrument", "item_id", "score"]]
    per = per.merge(base.rename(columns={"score": "base_score"}), on=["base", "instrument", "item_id"])
    return pd.DataFrame({"model": per["model"], "probe": per["instrument"], "instrument": per["instrument"],
                         "role": "planted", "metric": "p_yes_shift", "unit": per["item_id"].astype(str),
                         "group": "planted", "value": per["score"] - per["base_score"], "baseline": 0.0,
                         "direction": 1 if plant.settings["answer"] == "first" else -1})


class YesNoProbe(ProbeKind):
    name = "yesno"
    summary = "P(Yes) after each item of an instrument (a test kind)"
    schema = {"type": "object", "required": ["instrument"],
              "properties": {"instrument": {"type": "string", "minLength": 1},
                             "options": {"type": "array", "items": {"type": "string", "minLength": 1},
                                         "minItems": 2, "maxItems": 2, "default": ["Yes", "No"]}},
              "additionalProperties": False}
    scoring_keys = ("instrument", "options")
    #: a config section of its own (``yesno: {lead: TEXT}``), merged into the config schema, read by the scoring
    config_schema = {"yesno": {"type": "object", "additionalProperties": False,
                               "properties": {"lead": {"type": "string", "default": "",
                                                       "description": "text before each question"}}}}
    scoring_sections = {"yesno": ("lead",)}
    file_keys = ("instrument",)
    score_tables = {"items": "yesno_items.parquet"}
    item_table = "items"
    materials = f"{__name__}:MATERIALS"
    calibration = f"{__name__}:calibration_units"
    #: a command of its own: ``qclm yesno-questions FILE`` (add_parser below)
    commands = {"yesno-questions": __name__}
    outputs = (Output("yesno_rates", TABLE, CATEGORY, f"{__name__}:rates_table"),
               Output("yesno_rates", FIGURE, CATEGORY, f"{__name__}:rates_figure", table="yesno_rates"),
               state_trait("yesno", CATEGORY))

    def requests(self, context, prompts, asking):
        q = load_questionnaire(self.settings["instrument"])
        limit = asking.run.limit_items
        items = q.items[:limit] if limit else q.items
        out = []
        for item in items:
            prefix = asking.config["yesno"]["lead"] + item.prefix(item.plus[0])
            options = tuple(prompts.continuation(o) for o in self.settings["options"])
            out.append(Labelled({"item_id": item.id}, ChoiceRequest(prompts.context(context.lead, prefix), options,
                                                                    values=(1.0, 0.0)),
                                f"{q.path}: item {item.id}", f"item {item.id}"))
        return out

    def rows(self, cell, answers):
        """A kind only turns its answers into rows: the scoring job asked its requests (ProbeKind.score)."""
        rows = [{"model": cell.model, "probe": self.instance.id, "condition": cell.condition,
                 "stimulus_id": a.context.stimulus_id, "item_id": a.key["item_id"],
                 "logp_yes": a.result.option_logprobs[0], "logp_no": a.result.option_logprobs[1],
                 "p_yes": a.result.probs[0]} for a in answers]
        return pd.DataFrame(rows, columns=COLUMNS), {"options": list(self.settings["options"])}

    @classmethod
    def collect(cls, data: CollectInput):
        raw = pd.concat([t["raw"] for t in data.cells.values()], ignore_index=True)
        items = raw.rename(columns={"probe": "instrument", "p_yes": "score"})
        return {"items": items[["model", "instrument", "item_id", "condition", "stimulus_id", "score"]]}

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--instrument", help="a Likert instrument file")

    @classmethod
    def settings_from_args(cls, args):
        return {"instrument": args.instrument} if args.instrument else {}


KIND = YesNoProbe


def add_parser(sub) -> None:
    """``qclm yesno-questions FILE``: the questions the kind asks of an instrument, one line per item (ITEM_ID, tab,
    the item's prefix with its first S+ term, its lines joined by a space), as the kind's command."""
    p = sub.add_parser("yesno-questions", help="print the questions the yesno kind asks of an instrument")
    p.add_argument("instrument", help="a Likert instrument file")
    p.set_defaults(func=_questions)


def _questions(args) -> int:
    for item in load_questionnaire(args.instrument).items:
        print(f"{item.id}\t{' '.join(item.prefix(item.plus[0]).split())}")  # its lines joined
    return 0

