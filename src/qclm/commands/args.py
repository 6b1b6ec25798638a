"""The commands' helpers that read models, kinds and configs for ``qclm probe`` and its siblings (the argument types
every command shares, the kinds' own commands included, are :mod:`qclm.argtypes`)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from qclm import argtypes, settings
from qclm.argtypes import safe_name
from qclm.errors import InputError
from qclm.experiment import VANILLA
from qclm.inputs import SAFE_NAME_MAX, SAFE_NAME_PATTERN


def usable_device(requested: str) -> str:
    """The device a command loads a model on: ``auto`` resolved; a device this torch cannot use (no CUDA, a GPU
    index beyond the ones it sees, no MPS) is a ValueError saying so, before anything is loaded."""
    import torch

    from qclm.models.loading import resolve_device

    device = resolve_device(requested)
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"--device {requested}: this torch ({torch.__version__}) sees no CUDA device")
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"--device {requested}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                             f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    elif device == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {requested}: this torch ({torch.__version__}) has no MPS device")
    return device


# -- a probe kind on the command line (``qclm probe KIND``, ``qclm render KIND``): one home for both -------------

#: the model table a command reads without a config
DEFAULT_MODELS = "config/models.tsv"
#: where a problem of the command line's instance is said to be
COMMAND_LINE = "command line"


def command_kind(kind_name: str):
    """The probe kind a command names (``qclm probe KIND``, ``qclm render KIND``); an unknown one is an InputError
    naming the command line's kind."""
    from qclm import probes

    try:
        return probes.kind_class(kind_name)
    except probes.UnknownKind as err:
        raise InputError.one(COMMAND_LINE, "kind", str(err)) from None


def add_models_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--models-dir``: where GGUF models are prepared (default: the user cache's, :func:`qclm.cache.models_dir`,
    which resolves it)."""
    parser.add_argument("--models-dir", default=None,
                        help="where embedded/GGUF models are prepared (default: the cache's, see qclm cache)")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model options ``qclm probe KIND`` and ``qclm render KIND`` share: a model-table name or any model
    ``qclm loglik`` takes, the table, where prepared models are, and the prompt format."""
    from qclm.prompts import PROMPT_FORMATS

    parser.add_argument("--model", required=True,
                        help="a name in --models, embedded:NAME, a .gguf file, a checkpoint directory or a hub id")
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"model table (default {DEFAULT_MODELS})")
    add_models_dir_argument(parser)
    parser.add_argument("--prompt-format", default=None, choices=PROMPT_FORMATS,
                        help="the model's prompt format (default: the model table's, else raw)")
    parser.add_argument("--system-prompt", default=None, metavar="TEXT",
                        help="a system message for a chat-format model (the table's system_prompt column)")
    parser.add_argument("--model-args", default=None, type=argtypes.columns, metavar="COLUMN=VALUE,...",
                        help="the model's row without writing a table: any column of config/README.md's model "
                        "table but name and source (revision=...,dtype=bfloat16,quantization=nf4,head=nli)")


def add_instance_arguments(parser: argparse.ArgumentParser, cls) -> None:
    """The instance options ``qclm probe KIND`` and ``qclm render KIND`` share: the config the experiment comes
    from, the instance id, then the kind's own options (its ``add_arguments``)."""
    parser.add_argument("--config", default=None,
                        help="a workflow config: experiment, engine settings, and the instance of this id if it has "
                             "one (default: vanilla and the defaults)")
    parser.add_argument("--id", default=None, type=safe_name,
                        help="the instance id, a safe name (default: the name of the material file given, else the "
                             f"kind's name, {cls.name})")
    cls.add_arguments(parser)


def kind_config(path: str | None) -> dict:
    """The config a command runs under (a command-line instance, ``qclm status``): the file's, checked as the
    workflow checks it (its notes logged), or without one, vanilla and the defaults."""
    if path is None:
        return {"conditions": [VANILLA], "stimuli": {"version": "long"}}
    import logging

    from qclm.validation import validate_config
    from qclm.inputs import read_yaml

    config, notes = settings.migrate(read_yaml(path))
    for note in notes:
        logging.getLogger("qclm").warning("%s: %s", path, note)
    problems = validate_config(config, path)
    if problems:
        raise InputError(problems)
    return config


def file_id(path: str) -> str | None:
    """A file's own name (its stem) made a safe name (qclm.inputs.SAFE_NAME_PATTERN): every other character
    an underscore, none leading, at most SAFE_NAME_MAX characters; None where nothing of it is left."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(path).stem).lstrip("_.-")[:SAFE_NAME_MAX]
    return name if re.search(SAFE_NAME_PATTERN, name) else None


def default_id(cls, given: dict) -> str:
    """The id of an instance the command line gives without ``--id``: the name of its material file (the kind's
    first file setting, where the options give one file), else the kind's name."""
    value = given.get(cls.file_keys[0]) if cls.file_keys else None
    return (file_id(value) if isinstance(value, str) else None) or cls.name


def kind_instances(cls, kind_name: str, args: argparse.Namespace, config: dict) -> list:
    """The instances the command line gives (the kind's ``instances_from_args``: one, or one per file where the
    kind takes several), each with its id (``--id``, else :func:`default_id`) and its settings: the config's
    instance of that id, if it has one, overridden by the options; checked as a config's probes are (an
    InputError with every problem)."""
    from qclm import probes
    from qclm.experiment import Experiment
    from qclm.probes.base import Instance

    source = args.config or COMMAND_LINE
    declared = {i.id: i for i in probes.instances(config, args.config)} if args.config else {}
    given = cls.instances_from_args(args)
    if args.id and len(given) > 1:
        raise InputError.one(COMMAND_LINE, "--id", f"names one instance, and the options give {len(given)}: leave "
                             "--id out (each instance is named by its file)")
    entries: dict[str, dict] = {}
    for own in given:
        ident = args.id or default_id(cls, own)
        if ident in entries:
            option = f"--{cls.file_keys[0].replace('_', '-')}" if cls.file_keys else "options"
            raise InputError.one(COMMAND_LINE, option, f"two of the files given are named {ident}, and each instance "
                                 "is named by its file: give each file once, and files of different names")
        base = declared[ident].settings if ident in declared else {}
        entries[ident] = {"kind": kind_name, **base, **own}
    check = {k: v for k, v in config.items() if k not in probes.shorthands()}
    check["probes"] = entries
    problems = probes.problems(check, source, list(Experiment.from_config(config).conditions))
    if problems:
        raise InputError(problems)
    return [Instance(ident, kind_name, probes.settings_of(cls, entry), None, source, f"probe {ident}")
            for ident, entry in entries.items()]


def model_problem(cls, spec, instances) -> str | None:
    """Why the kind cannot ask this model for these instances (its head, a request its backend cannot answer, a
    chat-only kind on a raw prompt format), or None: the checks ``qclm validate`` makes of a config's model table,
    for one command-line model."""
    from qclm import probes
    from qclm.engine import capabilities

    problem = probes.head_problem(cls, spec.head, spec.name)
    if problem:
        return problem
    served = capabilities.backend_of(spec.backend, spec.head)
    lacking = list(dict.fromkeys(k for i in instances for k in capabilities.missing(
        served, cls.asks(i.settings, spec.head), spec.logprobs)))
    if lacking:
        return (f"model {spec.name} (backend {served}) cannot answer the {', '.join(lacking)} requests of "
                f"probe kind {cls.name}: " + "; ".join(capabilities.why_not(served, k, spec.logprobs)
                                                       for k in lacking))
    if cls.chat_only and spec.prompt_format == "raw":
        return (f"model {spec.name}: probe kind {cls.name} asks chat-format models only, and its prompt format is "
                "raw: give --prompt-format chat (or a model table row with prompt_format chat)")
    return None


def kind_model(cls, args: argparse.Namespace, instances, dtype: str | None = None):
    """The model spec of ``--model`` (qclm.models.table.resolve_model: a model-table row, embedded:NAME, a .gguf
    file, a checkpoint directory, a hub id) with ``--prompt-format``, ``--model-args`` and ``--system-prompt``
    applied (the columns checked as a table's); a model the kind cannot ask for these instances
    (:func:`model_problem`) is an InputError naming ``--model``."""
    from dataclasses import replace

    from qclm.models.table import resolve_model, with_columns

    spec = resolve_model(args.model, args.models, dtype)
    spec = replace(spec, prompt_format=args.prompt_format) if args.prompt_format else spec
    if args.model_args:
        spec = with_columns(spec, args.model_args, COMMAND_LINE, "--model-args {column}")
    if args.system_prompt is not None:
        spec = with_columns(spec, {"system_prompt": args.system_prompt}, COMMAND_LINE, "--system-prompt")
    problem = model_problem(cls, spec, instances)
    if problem:
        raise InputError.one(COMMAND_LINE, "--model", problem)
    return spec
