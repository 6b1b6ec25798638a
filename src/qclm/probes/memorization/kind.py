"""The memorization and contamination probe kind: does the model know the test? (Han et al., "Quantifying Data
Contamination in Psychometric Evaluations of LLMs"; docs/memorization.md).

For open causal models, through log-probabilities by default (base models included, nothing to parse), and through
generation for the recall task on chat-format models (``mode: generate``). Per model x instrument x condition:

- ``exposure``: the item text with no prompt (after the condition's stimulus, if any), and each of its word-order
  neighbours (:mod:`.perturb`): their token log-probabilities (Min-K% and zlib calibration in the analysis), the
  item against its own neighbours and against the decoy instrument's items;
- ``recall``: after "<published name>, item <k>:", every item text of the instrument as a candidate (the analysis
  ranks them by their mean token log-prob under this prompt less their mean over the instrument's prompts);
  generation mode adds the greedy continuation;
- ``cloze``: the item with its keyword left out, every keyword of the instrument as a candidate;
- ``dimension``: an item of a multi-dimension inventory, its dimension labels as options;
- ``option_score``: an item and one option label of the original scale, the scale's scores as options;
- ``target``: answer an item so that it scores the scale's minimum, middle or maximum (chat-format models).

Every prompt names an instrument by its ``published_name`` (the name training text uses: "GAD-7"), or by its
``name`` where the file has none (the raw table's ``asked_name`` and ``name_source`` say which); the decoy's
published name does not say that it is a decoy, so the null is asked the way the instruments are.

Instruments whose wording is only described get the tasks that need no wording (option -> score without the
item); every task an instrument or model cannot take is reported as not applicable, with the reason. The decoy
instrument (written for this project, never published) is the null of every task, within each model.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qclm.errors import InputError, Problem
from qclm.inputs import duplicate_problems, identity, size
from qclm.instruments import Instrument, keyed_score, load_instrument
from qclm.probes.base import Asking, CollectInput, Labelled, ProbeKind
from qclm.probes.memorization import metrics as m
from qclm.probes.memorization.outputs import OUTPUTS
from qclm.probes.memorization.perturb import NEIGHBOUR, PERTURBATIONS, neighbours

if TYPE_CHECKING:
    import pandas as pd

    from qclm.contexts import Context
    from qclm.prompts import PromptBuilder

TASKS = ("exposure", "recall", "cloze", "dimension", "option_score", "target")
#: target score matching's targets: the minimum, the middle and the maximum of the scale (m.target_score)
TARGETS = ("minimum", "middle", "maximum")
MODES = ("logprob", "generate")
#: the raw table: one row per task x instrument x item x candidate (or target)
COLUMNS = ["model", "probe", "condition", "stimulus_id", "task", "instrument", "inventory", "item_id", "option",
           "target", "candidate", "candidate_value", "is_true", "logprob", "logprob_mean", "n_tokens", "token_logprobs",
           "text", "asked_name", "name_source"]
#: why a task does not apply (reported, never silently skipped)
NEEDS_WORDING = "no item wording in the file (item_wording {wording})"
NEEDS_SCALE = "no original_scale in the file"
NEEDS_DIMENSIONS = "not part of an inventory with several dimensions (config inventories, or items' dimension)"
NEEDS_CHAT = "needs a chat-format model (prompt_format chat or chat_preamble)"
NEEDS_KEYWORDS = "no keyword on every item"

#: prompts written for this project (the papers' prompts are not reused); {name} is the instrument's published name
RECALL = "{name}, item {number}:"
CLOZE = '{name}, item {number}, with one word left out: "{masked}"\nThe missing word:'
DIMENSION = '{inventory}: which of its scales does this item belong to? "{text}"\nScale:'
OPTION_SCORE = '{name}. Item: "{text}"\nAnswer: "{label}"\nPoints for this answer:'
OPTION_SCORE_NO_ITEM = '{name}. Answer: "{label}"\nPoints for this answer:'
#: the target is a number on the item's score range, as Han et al. give it ("Target Score"), so that the middle of
#: a scale with an even number of options means one option (m.target_score)
TARGET = ('{instruction}You are filling in the {name}, and you want this item to score {target} (its scores run from '
          '{low} to {high}).\nItem: "{text}"\nOptions: {options}\nAnswer:')
BLANK = "____"


def asked_as(inst: Instrument) -> tuple[str, str]:
    """The name the prompts give an instrument and where it comes from: its ``published_name``, else its ``name``."""
    return (inst.published_name, "published_name") if inst.published_name else (inst.name, "name")


#: words in the name a decoy is asked by that give it away (checked in the config's problems)
DECOY_TELLS = ("decoy", "qclm", "never published", "not published", "unpublished", "fake", "invented")


@dataclass(frozen=True)
class Inventory:
    """Instruments read as one inventory whose dimensions are its instruments (or one instrument whose items say
    their dimension)."""

    id: str  # the config's key, or the instrument's id (tables name the inventory by it)
    name: str  # what the prompts call it: the config's name, or the instrument's published name
    name_source: str  # "config", "published_name" or "name"
    items: tuple[tuple[str, str, str, str], ...]  # (instrument id, item id, text, dimension)

    @property
    def dimensions(self) -> list[str]:
        return list(dict.fromkeys(d for *_, d in self.items))


class MemorizationProbe(ProbeKind):
    name = "memorization"
    needs = ("loglikelihood", "choose", "generate")
    calibration = "qclm.probes.memorization.calibration:units"
    materials = "qclm.probes.memorization.calibration:MATERIALS"
    version = 3  # 2: the raw table names each dimension row's inventory; 3: prompts by the published name, exposure
    #              neighbours, normalized option log-probabilities, targets as scores
    summary = "does the model know the test? item exposure, recall, keyword cloze, dimension, option scores, targets"
    schema = {
        "type": "object",
        "required": ["instruments"],
        "additionalProperties": False,
        "properties": {
            "instruments": {"type": "array", "minItems": 1, "uniqueItems": True,
                            "items": {"type": "string", "minLength": 1},
                            "description": "instrument files: questionnaires or plain item lists"},
            "decoy": {"type": "string", "minLength": 1, "default": "resources/memorization/decoy.yaml",
                      "description": "the decoy instrument (items never published): the null of every task (default: "
                                     "the decoy shipped with qclm, relative to the repository root, where the "
                                     "workflow and the commands run)"},
            "inventories": {"type": "object", "default": {},
                            "propertyNames": {"$ref": "#/$defs/safe_name"},
                            "additionalProperties": {
                                "type": "object", "required": ["name", "instruments"], "additionalProperties": False,
                                "properties": {"name": {"type": "string", "minLength": 1},
                                               "instruments": {"type": "array", "minItems": 2,
                                                               "items": {"type": "string"}}}},
                            "description": "instruments read as one inventory, each instrument a dimension "
                                           "(named by its construct): the item -> dimension task"},
            "tasks": {"type": "array", "items": {"enum": list(TASKS)}, "minItems": 1, "uniqueItems": True,
                      "default": list(TASKS)},
            "mode": {"enum": list(MODES), "default": "logprob",
                     "description": "generate: the recall task also by greedy generation (chat-format models)"},
            "max_new_tokens": size("new_tokens", default=48),
            "min_k": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.2,
                      "description": "Min-K%: the share of lowest token log-probabilities averaged"},
            "perturbations": {"type": "integer", "minimum": 1, "maximum": 20, "default": PERTURBATIONS,
                              "description": "word-order neighbours of each item scored by the exposure task (the "
                                             "item's own reference of the same text kind)"},
            "permutations": size("resamples", default=10000,
                             description="permutations of the exposure, recall and dimension nulls"),
        },
    }
    scoring_keys = ("instruments", "decoy", "inventories", "tasks", "mode", "max_new_tokens", "perturbations")
    file_keys = ("instruments", "decoy")
    shipped = {"instruments": "questionnaires", "decoy": "memorization"}
    outputs = OUTPUTS
    score_tables = {"raw": "memorization_raw.parquet", "items": "memorization_items.parquet",
                    "not_applicable": "memorization_not_applicable.csv"}
    item_table = "items"

    # -- material -----------------------------------------------------------------------------------------------
    def instruments(self) -> list[Instrument]:
        """The instruments, then the decoy."""
        if not hasattr(self, "_instruments"):
            self._instruments = [load_instrument(p) for p in self.settings["instruments"]]
            self._decoy = load_instrument(self.settings["decoy"])
        return self._instruments + [self._decoy]

    @property
    def decoy(self) -> Instrument:
        self.instruments()
        return self._decoy

    def inventories(self) -> list[Inventory]:
        """Every inventory with several dimensions: the config's groups of instruments, and each instrument (the
        decoy included) whose items give their dimension."""
        by_id = {i.id: i for i in self.instruments()}
        out = []
        for key, spec in (self.settings.get("inventories") or {}).items():
            items: list[tuple[str, str, str, str]] = []
            for ident in spec["instruments"]:
                inst = by_id[ident]
                label = inst.construct or inst.name
                items.extend((inst.id, it.id, it.text, label) for it in inst.items if it.text)
            out.append(Inventory(key, spec["name"], "config", tuple(items)))
        for inst in self.instruments():
            if len(inst.dimensions) > 1 and inst.has_wording:
                out.append(Inventory(inst.id, *asked_as(inst),
                                     tuple((inst.id, it.id, it.text, it.dimension) for it in inst.items)))
        return out

    def problems(self) -> list[Problem]:
        src, where = self.instance.source, self.instance.where
        out: list[Problem] = []
        loaded = []
        for path in list(self.settings["instruments"]) + [self.settings["decoy"]]:
            try:
                loaded.append(load_instrument(path))
            except InputError as err:
                out.extend(err.problems)
        if out:
            return out
        *instruments, decoy = loaded
        if not decoy.decoy:
            out.append((src, f"{where}.decoy", f"{decoy.path} is not marked as a decoy (decoy: true): the null of "
                        "every task must be items no model can have seen"))
        if not decoy.has_wording:
            out.append((src, f"{where}.decoy", f"{decoy.path}: the decoy needs every item's text"))
        name, field = asked_as(decoy)
        tells = [t for t in DECOY_TELLS if t in name.lower()]
        if decoy.decoy and tells:
            out.append((src, f"{where}.decoy", f"{decoy.path}: field {field}: the prompts would call the decoy "
                        f"{name!r}, which says what it is ({', '.join(tells)}): give it a published_name in the style "
                        "of a published inventory's, so that it is asked the way the instruments are"))
        ids = [i.id for i in loaded]
        for ident in sorted({i for i in ids if ids.count(i) > 1}):
            out.append((src, f"{where}.instruments",
                        f"two files have the id '{ident}' (each instrument needs its own)"))
        out.extend(self._same_instrument_problems(loaded))
        known = set(ids)
        for key, spec in (self.settings.get("inventories") or {}).items():
            at = f"{where}.inventories.{key}"
            if identity(key, case=False) in {identity(i, case=False) for i in ids}:
                out.append((src, at, f"the inventory's key '{key}' is an instrument's id"
                            + (" (the decoy's)" if identity(key, case=False) == identity(decoy.id, case=False) else "")
                            + ": the tables name an inventory by its key, so its rows would be read as that "
                            "instrument's; give the inventory a key of its own"))
            labels = []
            for n, ident in enumerate(spec["instruments"]):
                if ident not in known:
                    out.append((src, f"{at}.instruments, entry {n + 1}",
                                f"'{ident}' is not the id of one of the instruments ({', '.join(ids)})"))
                    continue
                if ident == decoy.id:
                    out.append((src, f"{at}.instruments, entry {n + 1}",
                                f"'{ident}' is the decoy: the null of every task cannot be scored as a dimension of "
                                "an inventory; list the instruments only"))
                inst = next(i for i in loaded if i.id == ident)
                labels.append(inst.construct or inst.name)
            out.extend(duplicate_problems(labels, src, lambda n: f"{at}.instruments, entry {n + 1}",
                                          "the dimension (the instrument's construct, else its name)", case=False,
                                          remedy="the dimension task would offer two identical options; merge the "
                                                 "two instruments' items into one file, or give each its construct"))
        return out

    @staticmethod
    def _same_instrument_problems(loaded: list[Instrument]) -> list[Problem]:
        """The same instrument listed twice (the decoy included): the same file or the same content (sha256); or
        two instruments asked by one name (published_name, else name, case aside) with items of the same number:
        "NAME, item N" would be one recall prompt for two items (the IPIP domain files share the 50-item
        questionnaire's name and split its numbers: that is one inventory, asked right), and the decoy asked as
        an instrument is no null."""
        out: list[Problem] = []
        first: dict = {}
        named: dict[str, list[Instrument]] = {}
        for inst in loaded:
            for what, key in (("file", ("file", str(Path(inst.path).resolve()))),
                              ("content (sha256)", ("sha", inst.sha256))):
                if key in first:
                    out.append((str(inst.path), "file", f"the same {what} as {first[key].path}: one instrument "
                                "listed twice would be asked the same prompts and counted twice (list it once)"))
                    break
                first[key] = inst
            else:
                name, field = asked_as(inst)
                for other in named.get(identity(name, case=False), []):
                    common = sorted({i.number for i in inst.items} & {i.number for i in other.items})
                    if common:
                        out.append((str(inst.path), f"field {field}",
                                    f"{name!r} is also how {other.path} is asked, and both have an item number "
                                    f"{common[0]}: \"{name}, item {common[0]}\" would be one recall prompt for two "
                                    "items; give each instrument its own published_name"))
                        break
                named.setdefault(identity(name, case=False), []).append(inst)
        return out

    # -- requests -----------------------------------------------------------------------------------------------
    def applicable(self, inst: Instrument, task: str, chat: bool) -> str | None:
        """Why a task does not apply to an instrument (and model), or None."""
        if task in ("exposure", "recall", "cloze", "target") and not inst.has_wording:
            return NEEDS_WORDING.format(wording=inst.item_wording)
        if task == "cloze" and not all(i.keyword for i in inst.items):
            return NEEDS_KEYWORDS
        if task in ("option_score", "target") and not inst.options:
            return NEEDS_SCALE
        if task == "target" and not chat:
            return NEEDS_CHAT
        if task == "dimension" and not any(inst.id in {i for i, *_ in inv.items} for inv in self.inventories()):
            return NEEDS_DIMENSIONS
        return None

    @classmethod
    def request_kinds(cls, settings: dict[str, Any]) -> tuple[str, ...]:
        """exposure scores log-likelihoods, the other tasks forced choices; recall in ``generate`` mode
        generates."""
        tasks = set(settings["tasks"])
        return ((("loglikelihood",) if "exposure" in tasks else ())
                + (("choose",) if tasks - {"exposure"} else ())
                + (("generate",) if "recall" in tasks and settings["mode"] == "generate" else ()))

    def requests(self, context, prompts, asking) -> list[Labelled]:
        """Every task's requests of one context: per instrument, each task it takes in :data:`TASKS` order, then
        the dimension task over the inventories. Every forced choice asks for normalized log-probabilities
        (``full=True``): the raw table's logprob column holds log P(option | prompt), not a logit short of the
        vocabulary's log-sum-exp."""
        tasks = self.settings["tasks"]
        chat = prompts.fmt.is_chat
        ask = _Ask(prompts, context, asking)
        builders = {"exposure": self._exposure, "recall": self._recall, "cloze": self._cloze,
                    "option_score": self._option_score, "target": self._target}
        out: list[Labelled] = []
        for inst in self.instruments():
            for task, build in builders.items():
                if task in tasks and not self.applicable(inst, task, chat):
                    out.extend(build(inst, ask))
        if "dimension" in tasks:
            out.extend(self._dimension(ask))
        return out

    def _exposure(self, inst: Instrument, ask: _Ask) -> list[Labelled]:
        """Each item's text alone, with no prompt (after the stimulus, if any), whatever the format, and its
        word-order neighbours."""
        from qclm.engine.requests import LoglikRequest

        out = []
        for it in inst.items:
            out.append(Labelled({"task": "exposure", "instrument": inst.id, "item_id": it.id, "candidate": it.id,
                                 "is_true": True, "text": it.text},
                                LoglikRequest(ask.where.lead, it.text), f"{inst.path}: item {it.id}: exposure",
                                f"exposure, {inst.id} item {it.id}"))
            for r, text in enumerate(neighbours(it.text, self.settings["perturbations"]), start=1):
                out.append(Labelled({"task": NEIGHBOUR, "instrument": inst.id, "item_id": it.id,
                                     "candidate": f"{it.id}~{r}", "is_true": False, "text": text},
                                    LoglikRequest(ask.where.lead, text),
                                    f"{inst.path}: item {it.id}: exposure, neighbour {r}",
                                    f"exposure neighbour {r}, {inst.id} item {it.id}"))
        return out

    def _recall(self, inst: Instrument, ask: _Ask) -> list[Labelled]:
        """Item K by its number, a forced choice over every item's text; in ``generate`` mode on a chat model also
        generated greedily, its seed from the run seed, the model, the probe, the item, the condition and the
        stimulus."""
        from qclm.engine.requests import ChoiceRequest, GenerateRequest, GenerationSettings, derive_seed

        items = list(inst.items)
        texts = [it.text for it in items]
        name, named = ask.named(inst)
        out = []
        for it in items:
            user = RECALL.format(name=name, number=it.number)
            out.append(Labelled({"task": "recall", "instrument": inst.id, "item_id": it.id,
                                 "candidates": [c.id for c in items], "true": it.id, **named},
                                ChoiceRequest(ask.context(user), ask.options(texts)),
                                f"{inst.path}: item {it.id}: recall", f"recall, {inst.id} item {it.number}"))
            if self.settings["mode"] == "generate" and ask.prompts.fmt.is_chat:
                settings = GenerationSettings(max_new_tokens=self.settings["max_new_tokens"], greedy=True,
                                              temperature=0.0, stop=("\n",))
                seed = derive_seed(ask.asking.seed, ask.asking.model, self.instance.id, inst.id, it.id,
                                   ask.where.condition, ask.where.stimulus_id)
                out.append(Labelled({"task": "recall_generated", "instrument": inst.id, "item_id": it.id, **named},
                                    GenerateRequest(ask.context(user), seed, settings),
                                    f"{inst.path}: item {it.id}: recall (generated)",
                                    f"recall by generation, {inst.id} item {it.number}"))
        return out

    @staticmethod
    def _cloze(inst: Instrument, ask: _Ask) -> list[Labelled]:
        """Each item with its keyword blanked, a forced choice over the instrument's keywords."""
        from qclm.engine.requests import ChoiceRequest

        name, named = ask.named(inst)
        keywords = list(dict.fromkeys(it.keyword for it in inst.items))
        out = []
        for it in inst.items:
            masked = re.sub(rf"(?<!\w){re.escape(it.keyword)}(?!\w)", BLANK, it.text, count=1, flags=re.IGNORECASE)
            user = CLOZE.format(name=name, number=it.number, masked=masked)
            out.append(Labelled({"task": "cloze", "instrument": inst.id, "item_id": it.id, "candidates": keywords,
                                 "true": it.keyword, **named},
                                ChoiceRequest(ask.context(user), ask.options(keywords)),
                                f"{inst.path}: item {it.id}: cloze", f"cloze, {inst.id} item {it.id}"))
        return out

    @staticmethod
    def _option_score(inst: Instrument, ask: _Ask) -> list[Labelled]:
        """Each option's score, asked per item where the instrument has its wording (the item's keying applied),
        else once per option."""
        from qclm.engine.requests import ChoiceRequest

        name, named = ask.named(inst)
        scores = [o.score for o in inst.options]
        labels = [m.score_text(s) for s in scores]
        out = []
        for asked in (inst.items if inst.has_wording else [None]):
            for o in inst.options:
                if asked is None:
                    user = OPTION_SCORE_NO_ITEM.format(name=name, label=o.label)
                    true = o.score
                else:
                    user = OPTION_SCORE.format(name=name, text=asked.text, label=o.label)
                    true = keyed_score(o.score, asked.keying, inst.options)
                out.append(Labelled({"task": "option_score", "instrument": inst.id,
                                     "item_id": asked.id if asked else "", "option": o.label, "candidates": labels,
                                     "values": scores, "true": m.score_text(true), **named},
                                    ChoiceRequest(ask.context(user), ask.options(labels), tuple(scores)),
                                    f"{inst.path}: {'item ' + asked.id + ': ' if asked else ''}option {o.label!r}",
                                    f"option -> score, {inst.id} {asked.id if asked else ''} {o.label!r}"))
        return out

    @staticmethod
    def _target(inst: Instrument, ask: _Ask) -> list[Labelled]:
        """For each target (:data:`TARGETS`), each item answered to reach it, a forced choice over the options
        (their keyed scores the values)."""
        from qclm.engine.requests import ChoiceRequest

        name, named = ask.named(inst)
        labels = [o.label for o in inst.options]
        scale = [o.score for o in inst.options]
        instruction = f"{inst.instruction}\n" if inst.instruction else ""
        out = []
        for goal in TARGETS:
            target = m.target_score(scale, goal)
            for it in inst.items:
                values = tuple(keyed_score(o.score, it.keying, inst.options) for o in inst.options)
                user = TARGET.format(instruction=instruction, name=name, target=m.score_text(target),
                                     low=m.score_text(min(scale)), high=m.score_text(max(scale)), text=it.text,
                                     options=" / ".join(labels))
                out.append(Labelled({"task": "target", "instrument": inst.id, "item_id": it.id, "target": goal,
                                     "candidates": labels, "values": values, "true": target, **named},
                                    ChoiceRequest(ask.context(user), ask.options(labels), values),
                                    f"{inst.path}: item {it.id}: target {goal}",
                                    f"target {goal}, {inst.id} item {it.id}"))
        return out

    def _dimension(self, ask: _Ask) -> list[Labelled]:
        """Each inventory item's dimension, a forced choice over the inventory's dimensions."""
        from qclm.engine.requests import ChoiceRequest

        out = []
        for inv in self.inventories():
            dims = inv.dimensions
            for inst_id, item_id, text, dim in inv.items:
                user = DIMENSION.format(inventory=inv.name, text=text)
                out.append(Labelled({"task": "dimension", "instrument": inst_id, "item_id": item_id,
                                     "inventory": inv.id, "candidates": dims, "true": dim, "asked_name": inv.name,
                                     "name_source": inv.name_source},
                                    ChoiceRequest(ask.context(user), ask.options(dims)),
                                    f"{inst_id}: item {item_id}: dimension", f"dimension, {inv.name} {item_id}"))
        return out

    def not_applicable(self, chat: bool) -> list[dict[str, str]]:
        """(task, instrument, reason) for every task an instrument of this instance does not take."""
        return [{"task": t, "instrument": inst.id, "reason": why}
                for inst in self.instruments() for t in self.settings["tasks"]
                if (why := self.applicable(inst, t, chat))]

    def rows(self, cell, answers) -> tuple[pd.DataFrame, dict]:
        """The rows of every answer (:func:`_rows`), context by context, each context's log-likelihoods first, then
        its forced choices, then its generations."""
        import pandas as pd

        from qclm.engine.asking import method_of

        base = {"model": cell.model, "probe": self.instance.id, "condition": cell.condition}
        order = {"loglikelihood": 0, "choose": 1, "generate": 2}
        rows: list[dict[str, Any]] = []
        for ctx, mine in cell.by_context(answers):
            for a in sorted(mine, key=lambda a: order[method_of(a.labelled.request)]):
                rows.extend(_rows({**base, "stimulus_id": ctx.stimulus_id}, a.key, a.result))
        df = pd.DataFrame(rows, columns=COLUMNS)
        chat = cell.prompts.fmt.is_chat
        return df, {"tasks": list(self.settings["tasks"]), "mode": self.settings["mode"],
                    "instruments": [i.id for i in self.instruments()], "decoy": self.decoy.id,
                    "instrument_sha256": {i.id: i.sha256 for i in self.instruments()},
                    "asked_names": {i.id: dict(zip(("name", "source"), asked_as(i))) for i in self.instruments()},
                    "perturbations": self.settings["perturbations"],
                    "not_applicable": self.not_applicable(chat), "chat": chat}

    # -- CPU stages ---------------------------------------------------------------------------------------------
    @classmethod
    def collect(cls, data: CollectInput) -> dict[str, pd.DataFrame]:
        import pandas as pd

        raw = pd.concat([t["raw"] for t in data.cells.values()], ignore_index=True)
        na = pd.DataFrame([{"model": model, "condition": cond, **r} for (model, _, cond), meta in data.metadata.items()
                           for r in meta.get("not_applicable", [])], columns=["model", "condition", "task",
                                                                               "instrument", "reason"])
        exposure = raw[raw["task"] == "exposure"]
        items = pd.DataFrame({"model": exposure["model"], "instrument": exposure["instrument"],
                              "item_id": exposure["item_id"], "condition": exposure["condition"],
                              "stimulus_id": exposure["stimulus_id"], "score": exposure["logprob_mean"]})
        return {"raw": raw, "items": items.reset_index(drop=True), "not_applicable": na}

    @classmethod
    def overview(cls, context, results) -> str:
        from qclm.probes.memorization.analysis import overview

        return overview(results["memorization"])

    # -- the command line ---------------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--instrument", action="append", default=None,
                            help="an instrument file (a questionnaire or a plain item list); repeat for several")
        parser.add_argument("--decoy", default=None,
                            help=f"the decoy instrument (default {cls.schema['properties']['decoy']['default']})")
        parser.add_argument("--tasks", default=None, help=f"tasks, comma-separated (default all: {', '.join(TASKS)})")
        parser.add_argument("--mode", default=None, choices=MODES, help="logprob (default) or generate")

    @classmethod
    def settings_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if args.instrument:
            out["instruments"] = list(args.instrument)
        if args.decoy:
            out["decoy"] = args.decoy
        if args.tasks:
            out["tasks"] = [t.strip() for t in args.tasks.split(",") if t.strip()]
        if args.mode:
            out["mode"] = args.mode
        return out


@dataclass(frozen=True)
class _Ask:
    """How one context's prompts are written: the prompt builder, the context (its stimulus lead, condition and
    stimulus id) and whom the requests ask (the run seed, the model)."""

    prompts: PromptBuilder
    where: Context
    asking: Asking

    def context(self, user: str) -> str:
        """The prompt of a user message after the context's stimulus (``where.lead``), in the model's prompt
        format."""
        return self.prompts.context(self.where.lead, user)

    def options(self, texts) -> tuple[str, ...]:
        """Answers as they follow that prompt."""
        return tuple(self.prompts.continuation(t) for t in texts)

    @staticmethod
    def named(inst: Instrument) -> tuple[str, dict[str, str]]:
        """The name an instrument is asked by, and the row keys that say it and where it came from."""
        name, source = asked_as(inst)
        return name, {"asked_name": name, "name_source": source}


def _rows(common: dict, key: dict, res) -> list[dict[str, Any]]:
    """The raw rows of one result: one per candidate of a choice, one for a log-likelihood or a generation (told
    apart by their types: a generation has token log-probabilities too)."""
    from qclm.engine.requests import GenerateResult

    task = key["task"]
    row = {**common, "task": task, "instrument": key["instrument"], "inventory": key.get("inventory", ""),
           "item_id": key["item_id"], "target": key.get("target", ""), "text": key.get("text", ""),
           "asked_name": key.get("asked_name", ""), "name_source": key.get("name_source", "")}
    if hasattr(res, "option_logprobs"):  # a forced choice
        if not res.normalized:  # every choice asks full=True: logprob must be a log-probability
            raise RuntimeError(f"{key['instrument']} item {key['item_id']}: {task}: the backend returned option "
                               "scores without the normalization over the vocabulary")
        values = key.get("values")
        out = []
        for j, cand in enumerate(key["candidates"]):
            lps = res.token_logprobs[j]
            true = key["true"]
            out.append({**row, "option": key.get("option", ""), "candidate": str(cand),
                        "candidate_value": float(values[j]) if values is not None else float("nan"),
                        "is_true": (str(cand) == str(true)) if task != "target" else bool(
                            values is not None and values[j] == true),
                        "logprob": res.option_logprobs[j], "logprob_mean": float(sum(lps) / len(lps)),
                        "n_tokens": len(lps), "token_logprobs": list(lps)})
        return out
    if not isinstance(res, GenerateResult):  # a log-likelihood
        lps = list(res.token_logprobs)
        return [{**row, "option": "", "candidate": key["candidate"], "candidate_value": float("nan"),
                 "is_true": key.get("is_true", True),
                 "logprob": res.logprob, "logprob_mean": float(sum(lps) / len(lps)), "n_tokens": len(lps),
                 "token_logprobs": lps}]
    return [{**row, "option": "", "candidate": "", "candidate_value": float("nan"), "is_true": False,
             "logprob": float("nan"),
             "logprob_mean": float("nan"), "n_tokens": len(res.token_ids), "token_logprobs": [],
             "text": res.text}]
