"""The generated-survey probe kind (issue 19, R.U.Psycho-style): an instruct model answers an instrument's items in
its own words, and the same prompt is scored as a forced choice over the options.

Per item, prompt variant (:data:`~qclm.probes.survey.material.VARIANTS`), persona and option order, one prompt
(one user message through the model's chat template, after the context's stimulus lead); per prompt:

- **generations**: one per seed x repetition, each with its own seed (:data:`SEED_PARTS`: the run seed, model,
  probe, item, variant, persona, order, seed, repetition and stimulus; not the condition, so the same stimulus
  gets the same draws under every condition it appears in, and every stimulus of a condition its own), all of a
  context's in one ``generate`` call (the engine shares the prefix);
- **the forced choice** on the identical prompt, after the variant's answer opening (``{"answer": "`` for
  ``json``), with the options' keyed scores as values: three forced choices over the K options
  (:data:`~qclm.probes.survey.material.FORCED_CHOICES`), each option's probability and the expected score. The
  analysis reads the first, the option's number as the first answer token ("2": what the answer format asks
  for); its label alone ("Several days") and the whole option as the prompt lists it ("2 = Several days") are
  recorded beside it.

The raw table (the scoring job's) has one row per generation (``record`` = ``response``: its text, new tokens,
finish reason, seed) and one per option of each forced choice (``record`` = ``option``, ``answer`` = which of the
three: its log-probability and probability); the CPU stages clean, validate and judge each response
(:mod:`qclm.probes.survey.judge`) into the ``responses`` table (every response with a status, none dropped, the
forced choice beside it) and the ``choices`` table (one row per option, the three forced choices side by side),
then the analysis (:mod:`qclm.probes.survey.analysis`).

Chat-format models only (:attr:`SurveyProbe.chat_only`: ``qclm validate`` names a raw row of the model table).
"""

from __future__ import annotations

import argparse
import hashlib
import re
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qclm.contexts import Context, ContextSettings
from qclm.errors import InputError, Problem
from qclm.inputs import duplicate_problems, identity, size, text_problem
from qclm.probes.base import FILE_SETTING, Answer, Asking, CollectInput, Labelled, ProbeKind, ScoringCell
from qclm.probes.survey.material import (
    FORCED_CHOICES, OPENINGS, ORDERS, VARIANTS, dimension_of, display_options, load_survey_instrument,
    user_message,
)
from qclm.probes.survey.outputs import OUTPUTS
from qclm.settings import defaults_of

if TYPE_CHECKING:
    import pandas as pd

    from qclm.instruments import Instrument
    from qclm.prompts import PromptBuilder

#: R.U.Psycho's generation defaults (max 64 new tokens, temperature 1.0, top-k 50, top-p 0.95); greedy optional
GENERATION: dict[str, Any] = {
    "type": "object",
    "description": "generation settings: sampled (temperature, top_k, top_p) or greedy; at most max_new_tokens",
    "properties": {
        "max_new_tokens": size("new_tokens", default=64),
        "temperature": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
        "top_k": {"type": "integer", "minimum": 0, "default": 50, "description": "0: no top-k filter"},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.95},
        "greedy": {"type": "boolean", "default": False, "description": "true: the most probable token each step"},
    },
    "additionalProperties": False,
}
GENERATION["default"] = defaults_of(GENERATION)

#: the raw table: one row per generation (record ``response``) and per option of each forced choice (``option``;
#: ``answer``: which of :data:`~qclm.probes.survey.material.FORCED_CHOICES`)
#: an option label that is a number (signed, with a decimal point or comma, a percent sign): the survey numbers the
#: options by position, so the judge could not tell a number in an answer from the label ("-1", "+1", "2.5", "50%")
NUMBER_LABEL = re.compile(r"[+\-\u2212\u00b1]?\s*\d+(?:[.,]\d+)?\s*%?")

RAW_COLUMNS = ["model", "probe", "instrument", "condition", "stimulus_id", "item_id", "variant", "persona", "order",
               "dimension", "record", "prompt_sha256", "item_text", "seed", "repetition", "request_seed", "raw_text",
               "new_tokens", "finish_reason", "answer", "position", "label", "option_score", "keyed_score", "logprob",
               "n_tokens", "prob", "prob_mean", "expected", "normalized"]
#: what each generation's seed is derived from (``derive_seed`` over these, in this order); the condition is not
#: one of them: the same stimulus gets the same draws under every condition (vanilla's stimulus is "")
SEED_PARTS = ("run_seed", "model", "probe", "item", "variant", "persona", "order", "seed", "repetition", "stimulus")


#: how ``qclm render`` names each forced choice's options
FORCED_LABELS = {"number": "numbers", "label": "labels", "full": "whole texts (number = label)"}


def generation_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The instance's generation settings with the schema's defaults filled in."""
    return {**GENERATION["default"], **(settings.get("generation") or {})}


class SurveyProbe(ProbeKind):
    name = "survey"
    needs = ("generate", "choose")
    calibration = "qclm.probes.survey.calibration:units"
    materials = "qclm.probes.survey.calibration:MATERIALS"
    summary = ("an instrument administered as a survey: generated answers judged to options, beside the forced "
               "choice on the identical prompt (chat-format models)")
    chat_only = True
    #: 2: the stimulus in the generations' seeds, the forced choice over the numbers (label and whole option beside
    #: it), the item text and dimension in the raw table
    version = 2
    schema = {
        "type": "object",
        "required": ["instrument"],
        "properties": {
            "instrument": {**FILE_SETTING, "description": "an instrument with item wording and original_scale (a "
                                                          "questionnaire file or a plain item list: qclm.instruments)"},
            "variants": {"type": "array", "items": {"enum": list(VARIANTS)}, "minItems": 1, "uniqueItems": True,
                         "default": list(VARIANTS), "description": "prompt variants"},
            "orders": {"type": "array", "items": {"enum": list(ORDERS)}, "minItems": 1, "uniqueItems": True,
                       "default": list(ORDERS), "description": "option orders (reversed: mapped back to the scores)"},
            "personas": {"type": "array", "items": {"type": "string", "minLength": 1, "pattern": r"\S"},
                         "uniqueItems": True, "default": [],
                         "description": "short descriptions the model answers as (none: no persona line)"},
            "seeds": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "maxItems": 100,
                      "uniqueItems": True, "default": [0], "description": "seeds, each a set of draws"},
            "repetitions": size("repetitions", default=1,
                            description="generations per prompt and seed (each its own draws)"),
            "generation": GENERATION,
        },
        "additionalProperties": False,
    }
    scoring_keys = ("instrument", "variants", "orders", "personas", "seeds", "repetitions", "generation")
    file_keys = ("instrument",)
    shipped = {"instrument": "questionnaires"}
    cell_tables = ("responses", "choices")
    outputs = OUTPUTS
    score_tables = {"responses": "survey_responses.parquet", "choices": "survey_choices.parquet",
                    "items": "survey_items.parquet"}
    item_table = "items"
    honours_limit_items = True
    #: the Likert item scores of the same instrument, where the run has the Likert kind
    optional_tables = {"likert_items": ("likert", "items")}

    @cached_property
    def instrument(self) -> Instrument:
        """The instance's survey instrument, read on first use."""
        return load_survey_instrument(self.settings["instrument"], self.instance.source,
                                      f"{self.instance.where}.instrument" if self.instance.where else "")

    @classmethod
    def scoring_settings(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """The scoring settings with the generation defaults filled in and the hash of the survey's own prompt texts
        (a change of wording is a change of what the job computes: its cell-cache key and params)."""
        out = super().scoring_settings(settings)
        out["generation"] = generation_settings(settings)
        out["prompt_texts_sha256"] = texts_sha256()
        return out

    def problems(self) -> list[Problem]:
        try:
            instrument = self.instrument
        except InputError as err:
            return err.problems
        out: list[Problem] = []
        numeric = [o.label for o in instrument.options if NUMBER_LABEL.fullmatch(identity(o.label))]
        if numeric:
            out.append((str(instrument.path), "field original_scale.options",
                        f"labels {', '.join(numeric)} are numbers: the survey numbers the options by the position it "
                        "shows them at, so a number in an answer could not be told from a label"))
        out.extend(self.persona_problems())
        gen = generation_settings(self.settings)
        draws = len(self.settings.get("seeds") or [0]) * int(self.settings.get("repetitions") or 1)
        if gen["greedy"] and draws > 1:
            where = self.instance.where or "probe"
            out.append((self.instance.source, f"{where}.generation.greedy",
                        f"greedy generation gives the same text for every seed and repetition ({draws} per prompt "
                        "here): give one seed and repetitions 1, or sample (greedy: false)"))
        return out

    def persona_problems(self) -> list[Problem]:
        """The personas are texts a user gives (in a config or with --persona): the text checks of every user text,
        and each once (:func:`qclm.inputs.identity`: two personas that differ by an invisible character or their
        Unicode form are one persona asked twice)."""
        personas = [p for p in self.settings.get("personas") or [] if isinstance(p, str)]
        src, where = self.instance.source, f"{self.instance.where or 'probe'}.personas"
        out: list[Problem] = []
        for n, persona in enumerate(personas):
            problem = text_problem(persona)
            if problem:
                out.append((src, f"{where}, entry {n + 1}", problem))
        return out + duplicate_problems(personas, src, lambda n: f"{where}, entry {n + 1}", "persona",
                                        remedy="each persona is its own prompt: give it once")

    # -- scoring ----------------------------------------------------------------------------------------------
    def prompts_of(self, context: Context, prompts: PromptBuilder, run: ContextSettings):
        """Every prompt of a context: (key, the prompt, the options shown, the forced choice's context, and per
        forced choice (:data:`~qclm.probes.survey.material.FORCED_CHOICES`) its option continuations)."""
        instrument = self.instrument
        items = instrument.items[: run.limit_items] if run.limit_items else instrument.items
        for item in items:
            for variant in self.settings["variants"]:
                for persona in self.settings["personas"] or [""]:
                    for order in self.settings["orders"]:
                        prompt = prompts.context(context.lead, user_message(instrument, item, variant, order,
                                                                             persona))
                        shown = display_options(instrument, item, order)
                        opening = OPENINGS[variant]
                        fc_context = prompt + prompts.continuation(opening) if opening else prompt
                        options = {kind: tuple(s.answer(kind) if opening else prompts.continuation(s.answer(kind))
                                               for s in shown) for kind in FORCED_CHOICES}
                        key = {"item_id": item.id, "variant": variant, "persona": persona, "order": order,
                               "dimension": dimension_of(instrument, item), "item_text": item.text}
                        yield key, prompt, shown, fc_context, options

    def requests(self, context: Context, prompts: PromptBuilder, asking: Asking) -> list[Labelled]:
        """The forced choices and the generations of every prompt of a context. The model and the run seed
        (``asking``) enter the generations' seeds with the context's stimulus (:data:`SEED_PARTS`)."""
        from qclm.engine.requests import ChoiceRequest, GenerateRequest, GenerationSettings, derive_seed

        gen = GenerationSettings(**generation_settings(self.settings))
        path = self.instrument.path
        out = []
        for key, prompt, shown, fc_context, options in self.prompts_of(context, prompts, asking.run):
            what = (f"{path}: item {key['item_id']}: variant {key['variant']}, order {key['order']}"
                    + (f", persona {key['persona']!r}" if key["persona"] else "")
                    + (f", stimulus {context.stimulus_id}" if context.stimulus_id else ""))
            label = (f"item {key['item_id']}, variant {key['variant']}, order {key['order']}"
                     + (f", persona {key['persona']!r}" if key["persona"] else ""))
            for kind in FORCED_CHOICES:
                out.append(Labelled({**key, "request": "choice", "answer": kind, "shown": shown},
                                    ChoiceRequest(fc_context, options[kind], values=tuple(s.keyed for s in shown)),
                                    f"{what}: forced choice ({kind})",
                                    f"{label}: forced choice over the options' {FORCED_LABELS[kind]}"))
            for seed in self.settings["seeds"]:
                for rep in range(int(self.settings["repetitions"])):
                    s = derive_seed(asking.seed, asking.model, self.instance.id, key["item_id"], key["variant"],
                                    key["persona"], key["order"], seed, rep, context.stimulus_id)
                    out.append(Labelled({**key, "request": "generate", "seed": seed, "repetition": rep,
                                         "request_seed": s},
                                        GenerateRequest(prompt, s, gen), f"{what}: seed {seed}, repetition {rep}",
                                        f"{label}: generation, seed {seed}, repetition {rep}"))
        return out

    def score(self, cell: ScoringCell) -> tuple[pd.DataFrame, dict]:
        if not cell.prompts.fmt.is_chat:
            raise InputError(f"model {cell.model}: probe {self.instance.id} (kind survey) asks chat-format models "
                             f"only, and this model's prompt format is {cell.prompts.fmt.kind}: set its model-table "
                             "column prompt_format to chat")
        return super().score(cell)

    def rows(self, cell: ScoringCell, answers: list[Answer]) -> tuple[pd.DataFrame, dict]:
        """Per context, a response row per generation, then an option row per option of each forced choice (with
        the hash of the prompt its generations saw)."""
        import pandas as pd

        instrument = self.instrument
        rows: list[dict] = []
        hashes: dict[str, str] = {}
        for ctx, mine in cell.by_context(answers):
            base = {"model": cell.model, "probe": self.instance.id, "instrument": instrument.id,
                    "condition": cell.condition, "stimulus_id": ctx.stimulus_id}
            prompt_hash: dict[tuple, str] = {}
            for a in mine:
                if a.key["request"] != "generate":
                    continue
                k, g = a.key, a.result
                ident = (k["item_id"], k["variant"], k["persona"], k["order"])
                prompt_hash[ident] = g.prompt_sha256
                hashes["/".join(filter(None, (ctx.stimulus_id, *ident)))] = g.prompt_sha256
                rows.append({**base, **{c: k[c] for c in ("item_id", "variant", "persona", "order", "dimension")},
                             "record": "response", "prompt_sha256": g.prompt_sha256, "item_text": k["item_text"],
                             "seed": k["seed"],
                             "repetition": k["repetition"], "request_seed": k["request_seed"], "raw_text": g.text,
                             "new_tokens": len(g.token_ids), "finish_reason": g.finish_reason})
            for a in mine:
                if a.key["request"] != "choice":
                    continue
                k, res = a.key, a.result
                ident = (k["item_id"], k["variant"], k["persona"], k["order"])
                for s, lp, tokens, p, pm in zip(k["shown"], res.option_logprobs, res.token_logprobs, res.probs,
                                                res.probs_mean):
                    rows.append({**base, **{c: k[c] for c in ("item_id", "variant", "persona", "order", "dimension")},
                                 "record": "option", "prompt_sha256": prompt_hash.get(ident, ""),
                                 "answer": k["answer"], "position": s.position, "label": s.label,
                                 "option_score": s.score, "keyed_score": s.keyed, "logprob": lp,
                                 "n_tokens": len(tokens), "prob": p, "prob_mean": pm, "expected": res.expected,
                                 "normalized": res.normalized})
        df = pd.DataFrame(rows, columns=RAW_COLUMNS)
        # the request seeds exactly (up to 2**63: through a float column with the option rows' gaps they would round)
        df["request_seed"] = pd.array([r.get("request_seed") for r in rows], dtype="Int64")
        df = df.astype({"seed": "Int64", "repetition": "Int64", "new_tokens": "Int64",
                        "position": "Int64", "n_tokens": "Int64", "option_score": "float64",
                        "keyed_score": "float64", "logprob": "float64", "prob": "float64", "prob_mean": "float64",
                        "expected": "float64", "normalized": "boolean"})
        for column in ("raw_text", "finish_reason", "label", "prompt_sha256", "item_text", "answer"):
            df[column] = df[column].fillna("").astype(str)
        return df, {"instrument": instrument.id, "instrument_sha256": instrument.sha256,
                    "variants": list(self.settings["variants"]), "orders": list(self.settings["orders"]),
                    "personas": list(self.settings["personas"]), "seeds": list(self.settings["seeds"]),
                    "repetitions": int(self.settings["repetitions"]), "run_seed": cell.asking.seed,
                    "seed_parts": f"derive_seed({', '.join(SEED_PARTS)})",
                    "forced_choices": list(FORCED_CHOICES),
                    "generation": generation_settings(self.settings), "prompt_texts_sha256": texts_sha256(),
                    "prompt_sha256": hashes}

    # -- CPU stages -------------------------------------------------------------------------------------------
    def cell_scores(self, raw: pd.DataFrame, config: dict) -> dict[str, pd.DataFrame]:
        from qclm.probes.survey.tables import cell_tables

        return cell_tables(raw)

    @classmethod
    def collect(cls, data: CollectInput) -> dict[str, pd.DataFrame]:
        import pandas as pd

        from qclm.probes.survey.tables import item_scores

        keys = sorted(data.cells)
        responses = pd.concat([data.cells[k]["responses"] for k in keys], ignore_index=True)
        choices = pd.concat([data.cells[k]["choices"] for k in keys], ignore_index=True)
        return {"responses": responses, "choices": choices, "items": item_scores(responses)}

    @classmethod
    def overview(cls, context, results) -> str:
        from qclm.probes.survey.overview import overview

        return overview(context.table("responses"), results["survey_summary"], results["survey_agreement"])

    # -- the command line -------------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--instrument", action="append", default=None,
                            help="an instrument with item wording and original_scale; repeat for several (each its "
                                 "own instance, named by its file)")
        parser.add_argument("--variants", help=f"prompt variants, comma-separated ({', '.join(VARIANTS)})")
        parser.add_argument("--orders", help=f"option orders, comma-separated ({', '.join(ORDERS)})")
        parser.add_argument("--seeds", help="seeds, comma-separated integers (default 0)")
        parser.add_argument("--repetitions", type=int, help="generations per prompt and seed (default 1)")
        parser.add_argument("--persona", action="append", help="a persona description (repeat for several)")
        parser.add_argument("--max-new-tokens", type=int, help="at most this many new tokens (default 64)")
        parser.add_argument("--greedy", action="store_true", help="greedy generation instead of sampling")

    @classmethod
    def instances_from_args(cls, args: argparse.Namespace) -> list[dict[str, Any]]:
        """One instance per ``--instrument`` (as a config declares one survey instance per instrument), the other
        options shared."""
        shared = cls.settings_from_args(args)
        return [{**shared, "instrument": path} for path in args.instrument] if args.instrument else [shared]

    @classmethod
    def settings_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        """The options every instance of the run shares (the instruments: :meth:`instances_from_args`)."""
        out: dict[str, Any] = {}
        for name in ("variants", "orders"):
            value = getattr(args, name)
            if value:
                out[name] = [v.strip() for v in value.split(",") if v.strip()]
        if args.seeds:
            out["seeds"] = [_int(v) for v in args.seeds.split(",") if v.strip()]
        if args.repetitions is not None:
            out["repetitions"] = args.repetitions
        if args.persona:
            out["personas"] = list(args.persona)
        generation = {}
        if args.max_new_tokens is not None:
            generation["max_new_tokens"] = args.max_new_tokens
        if args.greedy:
            generation["greedy"] = True
        if generation:
            out["generation"] = generation
        return out


def _int(value: str) -> int | str:
    """An integer, or the text as given (the schema then names it)."""
    try:
        return int(value.strip())
    except ValueError:
        return value.strip()


def texts_sha256() -> str:
    """Hash of the survey's own prompt wording: every variant's user message, with and without a persona, in both
    orders, for a placeholder instrument (a change of wording shows in the provenance and the cell-cache key; a
    change elsewhere in the code does not)."""
    import json

    from qclm.instruments import Instrument, InstrumentItem, Option
    from qclm.probes.survey import material

    item = InstrumentItem("ITEM", "{item}")
    options = (Option("{option 1}", 0.0), Option("{option 2}", 1.0))
    texts = {}
    for instruction in ("{instruction}", ""):
        placeholder = Instrument("ID", "NAME", Path(), "", (item,), "written", options, instruction)  # no file
        for variant in material.VARIANTS:
            for order in material.ORDERS:
                for persona in ("", "{persona}"):
                    texts[f"{variant}/{order}/{persona}/{instruction}"] = material.user_message(
                        placeholder, item, variant, order, persona)
    texts["openings"] = json.dumps(material.OPENINGS, sort_keys=True)
    return hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()
