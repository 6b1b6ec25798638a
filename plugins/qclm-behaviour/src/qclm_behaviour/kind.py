"""The behaviour probe kind (docs/validity.md): what a model does in three tasks, read from the log-probabilities of
their options (:mod:`qclm_behaviour.tasks`), under every condition of an experiment, beside qclm's questionnaires.
Built on qclm's public plug-in API (:mod:`qclm.plugin`) alone, as a lab would build its own kind.

Config::

    probes:
      behaviour:
        kind: behaviour
        tasks: [bandit, interpretation, risk]    # default: all three
        items: 40                                # items of each procedurally generated task (bandit, risk)
        scenarios: FILE                          # the interpretation task's scenarios (default: the shipped ones)
        seed: 0                                  # the procedural tasks' seed (the same items on every model)
"""

from __future__ import annotations

import argparse
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qclm.plugin import (
    FIGURE, TABLE, ChoiceRequest, CollectInput, InputError, Labelled, Output, ProbeKind, Problem, state_trait,
)
from qclm_behaviour import tasks as T

if TYPE_CHECKING:
    import pandas as pd

#: the raw table: one row per item, order and context
ANSWER_COLUMNS = ["model", "probe", "condition", "stimulus_id", "task", "item_id", "domain", "order", "target",
                  "logp_first", "logp_second", "p_first", "p_target", *T.FEATURES]
#: the item table (qclm's item-score shape, one instrument per task: ``PROBE_TASK``): P(target) over the orders
ITEM_COLUMNS = ["model", "instrument", "item_id", "condition", "stimulus_id", "score", "probe", "task", "domain",
                "p_first", *T.FEATURES]


def instrument_name(probe: str, task: str) -> str:
    """How the item table names a task of a probe instance (an instrument of qclm's item-score shape)."""
    return f"{probe}_{task}"


class BehaviourProbe(ProbeKind):
    name = "behaviour"
    summary = "what a model does: a two-armed bandit, interpretation bias and risk, from its options' log-probabilities"
    version = 1
    needs = ("choose",)
    schema = {
        "type": "object",
        "properties": {
            "tasks": {"type": "array", "items": {"enum": list(T.TASKS)}, "minItems": 1, "uniqueItems": True,
                      "default": list(T.TASKS), "description": "the tasks asked in every context"},
            "items": {"type": "integer", "minimum": 1, "maximum": 1000, "default": T.DEFAULT_ITEMS,
                      "description": "items of each procedurally generated task (bandit, risk); the run's "
                                     "limit_items caps them, and the interpretation task's scenarios"},
            "scenarios": {"type": "string", "default": "",
                          "description": "the interpretation task's scenario file (default, empty: the shipped "
                                         "ones, qclm_behaviour/data/interpretation.yaml)"},
            "seed": {"type": "integer", "minimum": 0, "default": 0,
                     "description": "the seed of the procedural tasks' items (the same items for every model)"},
            "unrelated": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True,
                          "default": [],
                          "description": "probe ids of the run's questionnaires that no task should follow (IPIP "
                                         "openness): the validity table's baseline beside every association"},
        },
        "additionalProperties": False,
    }
    scoring_keys = ("tasks", "items", "scenarios", "seed")
    #: no file key: the scenario file's default is the package's own (:meth:`files` names it, :meth:`problems`
    #: reads it), not a path under qclm's shipped folders
    score_tables = {"answers": "behaviour_answers.parquet", "items": "behaviour_items.parquet"}
    cell_tables = ("items",)
    item_table = "items"
    honours_limit_items = True
    materials = "qclm_behaviour.calibration:MATERIALS"
    calibration = "qclm_behaviour.calibration:units"
    #: the questionnaires' item tables the validity analysis reads where the run has their kinds
    optional_tables = {"likert_items": ("likert", "items"), "entailment_items": ("entailment", "items")}
    outputs = (Output("behaviour_readouts", TABLE, T.CATEGORY, "qclm_behaviour.analysis:readouts_table"),
               Output("behaviour_readouts", FIGURE, T.CATEGORY, "qclm_behaviour.analysis:readouts_figure",
                      table="behaviour_readouts"),
               Output("behaviour_fits", TABLE, T.CATEGORY, "qclm_behaviour.analysis:fits_table"),
               Output("validity", TABLE, T.CATEGORY, "qclm_behaviour.validity:table"),
               Output("validity", FIGURE, T.CATEGORY, "qclm_behaviour.validity:figure", table="validity"),
               state_trait("behaviour", T.CATEGORY))

    @property
    def scenarios(self) -> str:
        """The interpretation task's scenario file (the shipped one unless the instance names one)."""
        return self.settings.get("scenarios") or str(T.SCENARIOS)

    def files(self) -> list[str]:
        return [self.scenarios] if "interpretation" in self.settings["tasks"] else []

    def problems(self) -> list[Problem]:
        if "interpretation" not in self.settings["tasks"]:
            return []
        if self.settings.get("scenarios") and not Path(self.scenarios).is_file():
            return [(self.instance.source, f"{self.instance.where}.scenarios",
                     f"file {self.scenarios} does not exist" if not Path(self.scenarios).exists()
                     else f"{self.scenarios} is a directory, not a file")]
        try:
            T.load_scenarios(self.scenarios)
        except InputError as err:
            return err.problems or [(self.scenarios, "file", line) for line in err.lines]
        return []

    @classmethod
    def check_config(cls, config: dict, config_file: str, instances: list, found: list[Problem]) -> list[Problem]:
        """Each instance's ``unrelated`` names questionnaires of the run: probe ids of the kinds whose item scores
        the validity table reads (the Likert and entailment kinds)."""
        from qclm.plugin import probe_kinds

        kinds = probe_kinds(config)
        readable = {kind for kind, _ in cls.optional_tables.values()}
        out = []
        for ident, entry, where in instances:
            for n, name in enumerate(entry.get("unrelated") or [] if isinstance(entry, dict) else []):
                if kinds.get(name) not in readable:
                    known = sorted(i for i, k in kinds.items() if k in readable)
                    what = f"a {kinds[name]} probe" if name in kinds else "not a probe of the run"
                    out.append((config_file, f"{where}.unrelated, entry {n + 1}",
                                f"{name!r} is {what}; the validity table reads the questionnaires of the "
                                f"{' and '.join(sorted(readable))} kinds ({', '.join(known) or 'none in this run'})"))
        return out

    def items(self, limit: int | None = None) -> list[T.TaskItem]:
        """The instance's items, task by task (each task's first ``limit`` where given)."""
        n = min(self.settings["items"], limit) if limit else self.settings["items"]
        return [item for task in self.settings["tasks"] for item in self._task_items(task, n)]

    def _task_items(self, task: str, n: int) -> list[T.TaskItem]:
        if task == "interpretation":
            return T.interpretation_items(self.scenarios, n)
        return list(self._generated[task][:n])

    @cached_property
    def _generated(self) -> dict[str, list[T.TaskItem]]:
        seed, n = self.settings["seed"], self.settings["items"]
        return {task: T.generated(task, n, seed) for task in ("bandit", "risk") if task in self.settings["tasks"]}

    # -- scoring ----------------------------------------------------------------------------------------------
    def requests(self, context, prompts, asking) -> list[Labelled]:
        """Each item in each order of its options: a forced choice between them after the context's stimulus."""
        out = []
        for item in self.items(asking.run.limit_items):
            for order in range(item.orders):
                options = tuple(prompts.continuation(o) for o in item.options[order])
                request = ChoiceRequest(prompts.context(context.lead, item.prompts[order]), options, full=False)
                where = f"stimulus {context.stimulus_id}, " if context.stimulus_id else ""
                out.append(Labelled({"item": item, "order": order, "item_id": item.item_id}, request,
                                    f"{self.instance.id}: task {item.task}: item {item.item_id}: {where}order {order}",
                                    f"item {item.item_id}, order {order} (target: option {item.targets[order] + 1})"))
        return out

    def rows(self, cell, answers) -> tuple[pd.DataFrame, dict]:
        """One row per item, order and context: the options' log-probabilities, P(first option) and P(target)."""
        import pandas as pd

        rows = []
        for a in answers:
            item: T.TaskItem = a.key["item"]
            order, probs = a.key["order"], a.result.probs
            target = item.targets[order]
            rows.append([cell.model, self.instance.id, cell.condition, a.context.stimulus_id, item.task,
                         item.item_id, item.domain, order, target, *map(float, a.result.option_logprobs),
                         float(probs[0]), float(probs[target]),
                         *(float(item.features.get(f, float("nan"))) for f in T.FEATURES)])
        return pd.DataFrame(rows, columns=ANSWER_COLUMNS), {
            "tasks": list(self.settings["tasks"]), "targets": {t: T.TARGETS[t] for t in self.settings["tasks"]},
            "seed": self.settings["seed"], "scenarios": self.scenarios}

    # -- CPU stages -------------------------------------------------------------------------------------------
    def cell_scores(self, raw: pd.DataFrame, config: dict) -> dict[str, pd.DataFrame]:
        return {"items": item_table(raw)}

    @classmethod
    def collect(cls, data: CollectInput) -> dict[str, pd.DataFrame]:
        import pandas as pd

        cells = list(data.cells.values())
        return {"answers": pd.concat([c["raw"] for c in cells], ignore_index=True),
                "items": pd.concat([c["items"] for c in cells], ignore_index=True)}

    @classmethod
    def overview(cls, context, results) -> str:
        from qclm_behaviour.validity import overview

        return overview(context, results)

    # -- the command line -------------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--tasks", nargs="+", choices=list(T.TASKS), help="the tasks (default: all three)")
        parser.add_argument("--items", type=int, help=f"items of each generated task (default {T.DEFAULT_ITEMS})")

    @classmethod
    def settings_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        return {k: getattr(args, k) for k in ("tasks", "items") if getattr(args, k, None)}


def item_table(raw: pd.DataFrame) -> pd.DataFrame:
    """The item table of answers (qclm's item-score shape): each item's P(target) in each context, the mean over
    the orders its options were asked in (a label's or a position's pull cancels), and its mean P(first option)
    (that pull, which the readouts' shuffled baseline reads)."""
    import pandas as pd

    if raw.empty:
        return pd.DataFrame(columns=ITEM_COLUMNS)
    keys = ["model", "probe", "condition", "stimulus_id", "task", "item_id", "domain"]
    out = raw.groupby(keys, as_index=False, sort=False, dropna=False).agg(
        score=("p_target", "mean"), p_first=("p_first", "mean"), **{f: (f, "first") for f in T.FEATURES})
    out["instrument"] = [instrument_name(p, t) for p, t in zip(out["probe"], out["task"])]
    return out[ITEM_COLUMNS]
