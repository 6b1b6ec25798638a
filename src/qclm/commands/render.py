"""``qclm render``: print exactly what a model is asked, one request a block, for any probe kind.

It builds every prompt with the scoring jobs' own code (the probe kind's ``requests`` in each of the protocol's
contexts, the model's prompt format, the tokenization with the boundary check), so what it shows is what is scored:
the prompt as the model sees it (the context's token ids decoded with their special tokens, chat markup included),
the continuation, and the continuation's tokens as the model's tokenizer splits them. Only the tokenizer is loaded,
not the weights.

A probe instance of a config (the same config and model table as the workflow's):

    qclm render --config config/config.yaml --model smollm2-135m-instruct --questionnaire stai_s \\
        --condition stress [--item S01] [--stimulus stress01] [--limit 4]

or material given on the command line alone, with the options of ``qclm probe KIND`` (the kind's own, the model
and its prompt format, ``--config`` for the experiment and engine settings, ``--id``; qclm render KIND --help):

    qclm render entailment --model smollm2-135m-instruct --instrument my_items.yaml [--prompt-format chat] \\
        [--condition vanilla] [--item I01] [--limit 4]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qclm import cache, settings
from qclm.argtypes import non_negative_int, plain
from qclm.commands.args import (
    COMMAND_LINE, add_instance_arguments, add_model_arguments, command_kind, kind_config, kind_instances, kind_model,
)
from qclm.validation import DEFAULT_CONFIG, validate_config
from qclm.errors import InputError
from qclm.experiment import VANILLA
from qclm.inputs import read_yaml
from qclm.prompts import PROMPT_FORMATS


def _fail(message: str) -> int:
    print(f"qclm render: {message}", file=sys.stderr)
    return 2


class _Refused(Exception):
    """What render cannot show, said in one line (exit 2)."""


@dataclass(frozen=True)
class Target:
    """What render shows the requests of: the config (experiment, engine settings, limits) and where it came from,
    the model's row, where its prepared files are, and the probe instance."""

    config: dict
    source: str
    spec: Any
    models_dir: Path
    instance: Any


def config_target(config_file: str, model: str, probe: str, prompt_format: str | None = None) -> Target:
    """A model and a probe instance of a config (the workflow's checks first: render shows what a valid run
    scores)."""
    from qclm import probes
    from qclm.models.table import load_model_table

    config, _ = settings.migrate(read_yaml(config_file))
    problems = validate_config(config, config_file)
    if problems:
        raise InputError(problems)
    models = load_model_table(config["models"])
    if model not in models:
        raise _Refused(f"model {model!r} is not in {config['models']} (models: {', '.join(models)})")
    instances = {i.id: i for i in probes.instances(config, str(config_file))}
    if probe not in instances:
        raise _Refused(f"probe {probe!r} is not in {config_file} (probes: {', '.join(instances)})")
    spec = replace(models[model], prompt_format=prompt_format) if prompt_format else models[model]
    return Target(config, str(config_file), spec, cache.models_dir(config.get("models_dir")),
                  instances[probe])


def render(config_file: str | None, model: str | None, probe: str | None, condition: str, item: str | None = None,
           stimulus: str | None = None, limit: int | None = 8, out=None, target: Target | None = None,
           prompt_format: str | None = None) -> int:
    """Print the requests of one instance under one condition: a config's (``config_file``, ``model``, ``probe``;
    ``prompt_format`` in place of the model table's) or, given ``target``, one the command line made
    (:func:`kind_targets`)."""
    try:
        if target is None:
            if config_file is None or model is None or probe is None:
                raise _Refused("without a target, render needs a config, a model and a probe")
            target = config_target(config_file, model, probe, prompt_format)
    except _Refused as err:
        return _fail(str(err))
    return _show(target, condition, item, stimulus, limit, sys.stdout if out is None else out)  # stdout when called


def instance_requests(target: Target, condition: str, tokenizer) -> tuple[Any, list[tuple[Any, list]]]:
    """The target's probe kind and, per context of ``condition`` (an experiment's condition), the requests it asks
    there, built as the scoring job builds them (the model row's prompt format over ``tokenizer``, the job's
    seeds)."""
    from qclm import probes
    from qclm.contexts import condition_contexts
    from qclm.experiment import Experiment, classes_of
    from qclm.probes.base import Asking
    from qclm.prompts import PromptBuilder, PromptFormat
    from qclm.stimuli import load_stimuli

    config, spec = target.config, target.spec
    experiment = Experiment.from_config(config)
    engine = settings.section(config, settings.ENGINE)
    builder = PromptBuilder(tokenizer, PromptFormat.from_settings(spec.prompt_format, engine, spec.system_prompt))
    kind = probes.probe(target.instance)
    sets = [load_stimuli(f, expected_class=c) for f, c in zip(experiment.files_of(condition), classes_of(condition))]
    asking = Asking.from_config(config, spec.name, spec.type, type(kind), spec.head)  # as the job asks: its seed
    return kind, [(ctx, list(kind.requests(ctx, builder, asking)))
                  for ctx in condition_contexts(condition, sets, asking.run)]


def _show(target: Target, condition: str, item: str | None, stimulus: str | None, limit: int | None, out) -> int:
    from qclm.engine.requests import ClassifyRequest, tokenize_requests
    from qclm.experiment import Experiment
    from qclm.models.loading import load_tokenizer

    config, spec, probe = target.config, target.spec, target.instance.id
    model = spec.name
    experiment = Experiment.from_config(config)
    if condition not in experiment.conditions:
        where = (target.source if target.source != COMMAND_LINE
                 else "the experiment without a config (give --config for its stimulus classes)")
        return _fail(f"condition {condition!r} is not in {where} (conditions: {', '.join(experiment.conditions)})")
    tokenizer = load_tokenizer(spec, target.models_dir / spec.name)
    engine = settings.section(config, settings.ENGINE)
    kind, asked = instance_requests(target, condition, tokenizer)
    if stimulus is not None:
        asked = [(ctx, requests) for ctx, requests in asked if ctx.stimulus_id == stimulus]
        if not asked:
            return _fail(f"no stimulus {stimulus!r} under condition {condition}")

    def tokens(ids) -> str:
        return " | ".join(f"{tokenizer.decode([t])!r} ({t} {tok})"
                          for t, tok in zip(ids, tokenizer.convert_ids_to_tokens(list(ids))))

    shown = 0
    for ctx, requests in asked:
        for labelled in requests:
            if item is not None and labelled.key.get("item_id") != item:
                continue
            if limit is not None and shown >= limit:
                return 0
            shown += 1
            req = labelled.request
            print(f"### request {shown}: model {model} (prompt format {spec.prompt_format}), probe {probe} "
                  f"({kind.name}), condition {condition}" + (f", stimulus {ctx.stimulus_id}" if ctx.stimulus_id else "")
                  + f", {labelled.label}", file=out)
            if isinstance(req, ClassifyRequest):  # a sequence classifier's pair (head nli): no prompt format
                ids = tokenizer(req.premise, req.hypothesis)["input_ids"]
                print(f"--- premise and hypothesis: {len(ids)} tokens, as the classifier sees them ---", file=out)
                print(tokenizer.decode(list(ids), skip_special_tokens=False), file=out)
                print(file=out)
                continue
            options = getattr(req, "options", None)
            continuation = getattr(req, "continuation", None)
            shown_options = [continuation] if continuation is not None else list(options or [""])
            whole = tokenize_requests(tokenizer, [req.context] * len(shown_options), shown_options,
                                      engine["boundary"]) if continuation is not None or options else None
            context_ids = whole[0].context if whole else tuple(tokenizer(req.context)["input_ids"])
            print(f"--- prompt: {len(context_ids)} tokens, as the model sees them ---", file=out)
            print(tokenizer.decode(list(context_ids), skip_special_tokens=False), file=out)
            if continuation is not None and whole is not None:  # whole: tokenized whenever there is one
                print("--- continuation ---", file=out)
                print(repr(continuation), file=out)
                print(f"--- continuation tokens ({len(whole[0].continuation)}) ---", file=out)
                print(tokens(whole[0].continuation), file=out)
            elif options and whole is not None:
                print(f"--- options ({len(options)}) and their tokens ---", file=out)
                for option, r in zip(options, whole):
                    print(f"{option!r}: {tokens(r.continuation)}", file=out)
            for n, step in enumerate(getattr(req, "steps", ()) or (), start=1):
                print(f"--- step {n}: text {step.text!r}, options {list(step.options)!r} ---", file=out)
            if getattr(req, "settings", None) is not None and hasattr(req, "seed"):
                print(f"--- generation: seed {req.seed}, {req.settings} ---", file=out)
            print(file=out)
    if shown == 0:
        return _fail(f"no request matches (item {item!r})" if item else "no request to show")
    return 0


def kind_targets(kind_name: str, argv: list[str]) -> tuple[list[Target], argparse.Namespace]:
    """The instances ``qclm render KIND OPTIONS`` gives (the options of ``qclm probe KIND``), with the model."""
    cls = command_kind(kind_name)
    p = argparse.ArgumentParser(prog=f"qclm render {cls.name}", description=f"{cls.summary}. " + plain(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    _add_selection(p, condition_default=VANILLA)
    add_instance_arguments(p, cls)
    args = p.parse_args(argv)
    config = kind_config(args.config)
    instances = kind_instances(cls, kind_name, args, config)
    spec = kind_model(cls, args, instances)
    models_dir = cache.models_dir(args.models_dir)
    return [Target(config, args.config or COMMAND_LINE, spec, models_dir, i) for i in instances], args


def _add_selection(p: argparse.ArgumentParser, condition_default: str | None) -> None:
    """The options that choose what render shows, in both forms."""
    p.add_argument("--condition", default=condition_default,
                   help="a condition of the config (vanilla, a class, a+b)"
                        + (f"; default {condition_default}" if condition_default else ""))
    p.add_argument("--item", default=None, help="only this item id")
    p.add_argument("--stimulus", default=None, help="only this stimulus id (e.g. stress01, stress01+relaxation01)")
    p.add_argument("--limit", type=non_negative_int, default=8,
                   help="at most this many variants (default 8; 0 = all)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="print exactly what a model scores (prompt, continuation, its tokens)",
                       description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", nargs="?", help="a probe kind, then the options of qclm probe KIND (qclm render KIND "
                   "--help); without it, --config, --model, --probe and --condition name what to show")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"workflow config (default {DEFAULT_CONFIG})")
    p.add_argument("--model", help="a model name of the config's model table")
    p.add_argument("--probe", "--questionnaire", dest="probe",
                   help="a probe instance id of the config (a questionnaire id for Likert questionnaires)")
    p.add_argument("--prompt-format", default=None, choices=PROMPT_FORMATS,
                   help="the model's prompt format (default: the model table's)")
    _add_selection(p, condition_default=None)
    p.set_defaults(func=run, parser=p)


def run(args: argparse.Namespace) -> int:
    try:
        if args.kind is not None:
            targets, given = kind_targets(args.kind, list(args.rest))
            status = 0
            for target in targets:  # several instances (qclm render survey --instrument A --instrument B): each
                status = max(status, render(None, None, None, given.condition, given.item, given.stimulus,
                                            given.limit or None, target=target))
            return status
        missing = [o for o, v in (("--model", args.model), ("--probe", args.probe), ("--condition", args.condition))
                   if v is None]
        if missing:
            args.parser.error(f"the following arguments are required: {', '.join(missing)} (or give a probe kind: "
                              "qclm render KIND --help)")
        return render(args.config, args.model, args.probe, args.condition, args.item, args.stimulus,
                      args.limit or None, prompt_format=args.prompt_format)
    except InputError as err:
        print("\n".join(err.lines), file=sys.stderr)
        return 2
    except ValueError as err:  # a chat format without a chat template, a boundary error, a model not resolved
        return _fail(str(err))
