"""A probe kind written in the tests, as a user would write one: one module and a config section.

After each item of any Likert instrument (its first template, first S+ term, up to the answer cue) the model
chooses between " Yes" and " No" (a forced choice); the item's score is P(Yes). It runs under every condition of
the workflow and through ``qclm probe`` with no code of its own for either, and its per-item numbers get the
per-model state-trait decomposition."""

from __future__ import annotations

import argparse

import pandas as pd

from qclm.engine.requests import ChoiceRequest
from qclm.probes.base import CollectInput, Labelled, ProbeKind
from qclm.probes.items import register_state_trait
from qclm.questionnaire import load_questionnaire

COLUMNS = ["model", "probe", "condition", "stimulus_id", "item_id", "logp_yes", "logp_no", "p_yes"]


class YesNoProbe(ProbeKind):
    name = "yesno"
    summary = "P(Yes) after each item of an instrument (a test kind)"
    schema = {"type": "object", "required": ["instrument"],
              "properties": {"instrument": {"type": "string", "minLength": 1},
                             "options": {"type": "array", "items": {"type": "string", "minLength": 1},
                                         "minItems": 2, "maxItems": 2, "default": ["Yes", "No"]}},
              "additionalProperties": False}
    scoring_keys = ("instrument", "options")
    file_keys = ("instrument",)
    score_tables = {"items": "yesno_items.parquet"}
    item_table = "items"

    def requests(self, context, prompts, asking):
        q = load_questionnaire(self.settings["instrument"])
        limit = asking.run.limit_items
        items = q.items[:limit] if limit else q.items
        out = []
        for item in items:
            prefix = item.prefix(item.plus[0])
            options = tuple(prompts.continuation(o) for o in self.settings["options"])
            out.append(Labelled({"item_id": item.id}, ChoiceRequest(prompts.context(context.lead, prefix), options,
                                                                    values=(1.0, 0.0)),
                                f"{q.path}: item {item.id}", f"item {item.id}"))
        return out

    def score(self, cell):
        rows = []
        for ctx in cell.contexts:
            labelled = self.requests(ctx, cell.prompts, cell.asking)
            results = cell.backend.choose([r.request for r in labelled], describe=lambda i: labelled[i].describe)
            for item, res in zip(labelled, results):
                rows.append({"model": cell.model, "probe": self.instance.id, "condition": cell.condition,
                             "stimulus_id": ctx.stimulus_id, "item_id": item.key["item_id"],
                             "logp_yes": res.option_logprobs[0], "logp_no": res.option_logprobs[1],
                             "p_yes": res.probs[0]})
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
# its per-item numbers get the per-model state-trait decomposition, a table of its own in the report
register_state_trait(YesNoProbe.name, "7. A probe written in the tests")
