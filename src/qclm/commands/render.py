"""``qclm render``: print exactly what a model is asked, one request a block, for any probe kind.

It reads the same config and model table as the workflow and builds every prompt with the scoring jobs' own
code (the probe kind's ``requests`` in each of the protocol's contexts, the model's prompt format, the
tokenization with the boundary check), so what it shows is what is scored: the prompt as the model sees it
(the context's token ids decoded with their special tokens, chat markup included), the continuation, and the
continuation's tokens as the model's tokenizer splits them. Only the tokenizer is loaded, not the weights.

    qclm render --config config/config.yaml --model smollm2-135m-instruct --questionnaire stai_s \\
        --condition stress [--item S01] [--stimulus stress01] [--limit 4]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qclm import settings
from qclm.commands.args import non_negative_int
from qclm.config import DEFAULT_CONFIG, validate_config
from qclm.errors import InputError
from qclm.inputs import read_yaml


def _fail(message: str) -> int:
    print(f"qclm render: {message}", file=sys.stderr)
    return 2


def render(config_file: str, model: str, probe: str, condition: str, item: str | None = None,
           stimulus: str | None = None, limit: int | None = 8, out=sys.stdout) -> int:
    from qclm import probes
    from qclm.contexts import condition_contexts
    from qclm.engine.requests import tokenize_requests
    from qclm.experiment import Experiment, classes_of
    from qclm.models.loading import load_tokenizer
    from qclm.models.table import load_model_table
    from qclm.probes.base import Asking
    from qclm.prompts import PromptBuilder, PromptFormat
    from qclm.stimuli import load_stimuli

    config, _ = settings.migrate(read_yaml(config_file))
    problems = validate_config(config, config_file)  # the workflow's checks: render shows what a valid run scores
    if problems:
        raise InputError(problems)
    models = load_model_table(config["models"])
    if model not in models:
        return _fail(f"model {model!r} is not in {config['models']} (models: {', '.join(models)})")
    instances = {i.id: i for i in probes.instances(config, str(config_file))}
    if probe not in instances:
        return _fail(f"probe {probe!r} is not in {config_file} (probes: {', '.join(instances)})")
    experiment = Experiment.from_config(config)
    if condition not in experiment.conditions:
        return _fail(f"condition {condition!r} is not in {config_file} (conditions: "
                     f"{', '.join(experiment.conditions)})")
    spec = models[model]
    tokenizer = load_tokenizer(spec, Path(config.get("models_dir", "resources/models")) / spec.name)
    engine = settings.section(config, settings.ENGINE)
    builder = PromptBuilder(tokenizer, PromptFormat.from_settings(spec.prompt_format, engine))
    kind = probes.probe(instances[probe])
    sets = [load_stimuli(f, expected_class=c) for f, c in zip(experiment.files_of(condition), classes_of(condition))]
    asking = Asking.from_config(config, spec.name, spec.type, type(kind))  # as the scoring job asks: its seed
    contexts = condition_contexts(condition, sets, asking.run)
    if stimulus is not None:
        contexts = [c for c in contexts if c.stimulus_id == stimulus]
        if not contexts:
            return _fail(f"no stimulus {stimulus!r} under condition {condition}")

    def tokens(ids) -> str:
        return " | ".join(f"{tokenizer.decode([t])!r} ({t} {tok})"
                          for t, tok in zip(ids, tokenizer.convert_ids_to_tokens(list(ids))))

    shown = 0
    for ctx in contexts:
        for labelled in kind.requests(ctx, builder, asking):
            if item is not None and labelled.key.get("item_id") != item:
                continue
            if limit is not None and shown >= limit:
                return 0
            shown += 1
            req = labelled.request
            print(f"### request {shown}: model {model} (prompt format {spec.prompt_format}), probe {probe} "
                  f"({kind.name}), condition {condition}" + (f", stimulus {ctx.stimulus_id}" if ctx.stimulus_id else "")
                  + f", {labelled.label}", file=out)
            options = getattr(req, "options", None)
            continuation = getattr(req, "continuation", None)
            shown_options = [continuation] if continuation is not None else list(options or [""])
            whole = tokenize_requests(tokenizer, [req.context] * len(shown_options), shown_options,
                                      engine["boundary"]) if continuation is not None or options else None
            context_ids = whole[0].context if whole else tuple(tokenizer(req.context)["input_ids"])
            print(f"--- prompt: {len(context_ids)} tokens, as the model sees them ---", file=out)
            print(tokenizer.decode(list(context_ids), skip_special_tokens=False), file=out)
            if continuation is not None:
                print("--- continuation ---", file=out)
                print(repr(continuation), file=out)
                print(f"--- continuation tokens ({len(whole[0].continuation)}) ---", file=out)
                print(tokens(whole[0].continuation), file=out)
            elif options:
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


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="print exactly what a model scores (prompt, continuation, its tokens)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"workflow config (default {DEFAULT_CONFIG})")
    p.add_argument("--model", required=True, help="a model name of the config's model table")
    p.add_argument("--probe", "--questionnaire", dest="probe", required=True,
                   help="a probe instance id of the config (a questionnaire id for Likert questionnaires)")
    p.add_argument("--condition", required=True, help="a condition of the config (vanilla, a class, a+b)")
    p.add_argument("--item", default=None, help="only this item id")
    p.add_argument("--stimulus", default=None, help="only this stimulus id (e.g. stress01, stress01+relaxation01)")
    p.add_argument("--limit", type=non_negative_int, default=8,
                   help="at most this many variants (default 8; 0 = all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return render(args.config, args.model, args.probe, args.condition, args.item, args.stimulus,
                      args.limit or None)
    except InputError as err:
        print("\n".join(err.lines), file=sys.stderr)
        return 2
    except ValueError as err:  # a chat format without a chat template, a boundary error
        return _fail(str(err))
