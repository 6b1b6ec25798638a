"""``qclm finetune``: one intervention by hand: fine-tune one model on one corpus and print the checkpoint
directories (each loads like any local model: ``qclm probe KIND --model DIR``, or a model-table row).

    qclm finetune --model MODEL --corpus FILE --out DIR [--epochs 3] [--checkpoints 1,3] [--lr 2e-5]
                  [--batch-size 8] [--method auto|full|lora] [--seed 0] [--device auto]

MODEL is a model-table name (``--models``), ``embedded:NAME``, a .gguf file, a checkpoint directory or a hub id.
The settings are those of an entry of ``interventions:`` (config/README.md), with the same defaults and checks;
the workflow runs the same function for every model x intervention of a config (docs/interventions.md).
"""

from __future__ import annotations

import argparse
import logging

from qclm import cache
from qclm.argtypes import device, output_dir, plain, threads
from qclm.commands.args import DEFAULT_MODELS, add_models_dir_argument, usable_device


def _epochs(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be epochs, comma-separated integers, got {text!r}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    from qclm import interventions as iv

    defaults = iv.defaults()
    p = sub.add_parser("finetune", help="fine-tune one model on one corpus (an intervention by hand)",
                       description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True,
                   help="a name in --models, embedded:NAME, a .gguf file, a directory, a hub id")
    p.add_argument("--corpus", required=True, help="a YAML corpus (name, texts) or a text file, one text per line")
    p.add_argument("--out", required=True, type=output_dir,
                   help="output directory: e{EPOCH}/ per checkpoint and qclm_intervention.json")
    p.add_argument("--models", default=DEFAULT_MODELS, help=f"model table (default {DEFAULT_MODELS})")
    add_models_dir_argument(p)
    p.add_argument("--epochs", type=int, default=defaults["epochs"],
                   help="passes over the corpus (default %(default)s)")
    p.add_argument("--checkpoints", type=_epochs, default=None,
                   help="epochs to save, comma-separated (default: the last)")
    p.add_argument("--lr", type=float, default=defaults["lr"], help="learning rate (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=defaults["batch_size"],
                   help="texts per step (default %(default)s)")
    p.add_argument("--max-length", type=int, default=defaults["max_length"],
                   help="tokens per text at most (default %(default)s)")
    p.add_argument("--method", choices=iv.METHODS, default=defaults["method"], help="default %(default)s")
    p.add_argument("--loss", choices=iv.LOSSES, default=defaults["loss"],
                   help="all: every token; answers: a chat exchange's answer alone (default %(default)s)")
    p.add_argument("--lora-r", type=int, default=defaults["lora_r"], help="LoRA rank (default %(default)s)")
    p.add_argument("--seed", type=int, default=defaults["seed"], help="default %(default)s")
    p.add_argument("--device", type=device, default="auto", help="auto, cpu, cuda, cuda:N (default auto)")
    p.add_argument("--threads", type=threads, default=0, help="CPU threads (default 0: torch's default)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from qclm import interventions as iv
    from qclm.errors import InputError
    from qclm.corpus import load_corpus
    from qclm.logs import configure_logging
    from qclm.models.table import resolve_model

    configure_logging()
    entry = {"corpus": args.corpus, "epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size,
             "max_length": args.max_length, "method": args.method, "loss": args.loss, "lora_r": args.lora_r,
             "seed": args.seed,
             **({"checkpoints": args.checkpoints} if args.checkpoints else {})}
    problems = iv.entry_problems(entry, "command line")
    if problems:
        raise InputError(problems)
    corpus = load_corpus(args.corpus)
    item = iv.Intervention(corpus.name, {**iv.defaults(), **entry})
    problem = item.checkpoint_problem()
    if problem:
        raise InputError.one("command line", "--checkpoints", problem)
    try:
        spec = resolve_model(args.model, args.models, None)
    except ValueError as err:
        raise InputError.one("command line", "--model", str(err)) from None
    refused = iv.model_problems(spec, "qclm finetune", (args.method,))
    if refused:
        raise InputError([("command line", "--model", f"model {spec.name}: column {column}: {problem}")
                          for column, problem in refused])
    try:
        usable_device(args.device)  # a device this torch cannot use: said before the model loads
    except ValueError as err:
        raise InputError(f"qclm finetune: {err}") from None
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from qclm.interventions.finetune import finetune
    from qclm.models.loading import ensure_prepared

    prepared = ensure_prepared(spec, cache.models_dir(args.models_dir) / spec.name)
    for path in finetune(spec, prepared, corpus, item, args.out, args.device):
        print(path)
    logging.getLogger("qclm.finetune").info("checkpoints in %s", args.out)
    return 0

