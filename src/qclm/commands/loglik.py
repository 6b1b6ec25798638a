"""``qclm loglik``: score any file of (context, continuation) requests with the engine
(method.md section 3), lm-evaluation-harness's ``loglikelihood`` contract.

Input: JSON Lines, one object per line with string fields ``context`` and ``continuation``
(other fields are ignored; blank lines are skipped). Output: one JSON object per request, in
input order::

    {"line": 3, "logprob": -4.21, "is_greedy": false,
     "token_logprobs": [-3.9, -0.31], "token_ids": [539, 438], "tokens": ["Ġnot", "Ġat"]}

``logprob`` is the sum of the continuation's token log-probabilities (float32 log-softmax over the
full vocabulary), ``is_greedy`` whether every continuation token is the argmax of its distribution
(greedy decoding would produce the continuation), ``line`` the request's line in the input file.

Tokenization follows lm-evaluation-harness (HFLM ``_encode_pair``): whitespace at the end of the
context moves to the start of the continuation; context and context + continuation are tokenized
whole (with the special tokens the tokenizer adds, e.g. Gemma's BOS) and the continuation is the
slice after the context's tokens (``qclm.engine.requests.tokenize_requests``). A token merged across that
boundary is an error naming the line (``--boundary split`` scores the continuation tokenized on its
own instead, with a warning). An empty context becomes the BOS token (else EOS), as in lm-eval.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from qclm.errors import InputError
from qclm.inputs import read_text
from qclm.logs import configure_logging
from qclm.models.table import DTYPES, resolve_model
from qclm.settings import BOUNDARY_MODES

log = logging.getLogger("qclm.commands.loglik")

DEFAULT_MODELS = "config/models.tsv"
DEFAULT_MODELS_DIR = "resources/models"
METHODS = ("auto", "prefix-tree", "full")


def read_requests(path: str | Path) -> tuple[list[int], list[str], list[str]]:
    """(line numbers, contexts, continuations) of a JSONL request file; every bad line is
    reported as ``FILE: line N: PROBLEM`` in one InputError."""
    path = Path(path)
    text = read_text(path, "JSON Lines request file")
    lines, contexts, continuations, problems = [], [], [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"line {number}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            problems.append((str(path), where, f"not valid JSON ({err.msg} at column {err.colno})"))
            continue
        if not isinstance(obj, dict):
            problems.append((str(path), where, "expected an object with context and continuation, got "
                             + type(obj).__name__))
            continue
        bad = False
        for key in ("context", "continuation"):
            if key not in obj:
                problems.append((str(path), where, f"missing field {key!r}"))
                bad = True
            elif not isinstance(obj[key], str):
                problems.append((str(path), where, f"field {key!r} must be a string, got {type(obj[key]).__name__}"))
                bad = True
        if not bad and not obj["continuation"]:
            problems.append((str(path), where, "field 'continuation' is empty: there is nothing to score"))
            bad = True
        if not bad:
            lines.append(number)
            contexts.append(obj["context"])
            continuations.append(obj["continuation"])
    if problems:
        raise InputError(problems)
    if not lines:
        raise InputError.one(path, "file", "no requests (one JSON object per line with context and continuation)")
    return lines, contexts, continuations


def move_trailing_space(context: str, continuation: str) -> tuple[str, str]:
    """lm-evaluation-harness's rule: whitespace ending the context starts the continuation."""
    n = len(context) - len(context.rstrip())
    if n:
        return context[:-n], context[-n:] + continuation
    return context, continuation


def tokenize(tokenizer, path: str | Path, lines: list[int], contexts: list[str], continuations: list[str],
             boundary: str = "error"):
    """Requests for the engine, lm-eval's way (see the module docstring; an empty context is the BOS token,
    qclm.engine.requests.tokenize_requests)."""
    from qclm.engine.requests import BoundaryError, tokenize_requests

    pairs = [move_trailing_space(c, k) for c, k in zip(contexts, continuations)]
    try:
        out = tokenize_requests(tokenizer, [c for c, _ in pairs], [k for _, k in pairs], boundary,
                                describe=lambda j: f"{path}: line {lines[j]}")
    except BoundaryError as err:
        raise InputError(str(err)) from None
    for i, r in enumerate(out):
        if len(r.context) == 0:
            raise InputError.one(path, f"line {lines[i]}", "the context has no tokens")
    return out


def loglik(args: argparse.Namespace) -> int:
    import numpy as np
    import torch
    from tqdm import tqdm

    from qclm.engine import make_scorer
    from qclm.models.loading import ensure_prepared, load_model

    lines, contexts, continuations = read_requests(args.requests)
    spec = resolve_model(args.model, args.models, args.dtype)
    if args.threads:
        torch.set_num_threads(args.threads)
    prepared = ensure_prepared(spec, Path(args.models_dir) / spec.name)
    t0 = time.perf_counter()
    model, tokenizer, provenance = load_model(spec, prepared, args.device)
    log.info("model %s loaded in %.1f s (%s, %s)", spec.name, time.perf_counter() - t0, provenance["dtype"],
             provenance["device"])
    t0 = time.perf_counter()
    requests = tokenize(tokenizer, args.requests, lines, contexts, continuations, args.boundary)
    scorer = make_scorer(model, args.method, args.batch_size, args.pack_tokens)
    with tqdm(total=len(requests), desc=f"{spec.name} loglik", unit="request", mininterval=5) as bar:
        logprobs, greedy = scorer.score_with_greedy(requests, progress=bar.update)
    seconds = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for line, r, lp, g in zip(lines, requests, logprobs, greedy):
                if not np.all(np.isfinite(lp)):
                    raise RuntimeError(f"{args.requests}: line {line}: non-finite log-probability {lp.tolist()}")
                f.write(json.dumps({
                    "line": line, "logprob": float(np.sum(lp.astype(np.float64))), "is_greedy": bool(np.all(g)),
                    "token_logprobs": [float(x) for x in lp], "token_ids": list(r.continuation),
                    "tokens": tokenizer.convert_ids_to_tokens(list(r.continuation)),
                }, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    stats = scorer.stats
    log.info("%d requests in %.2f s (tokenization and scoring; %s, %d tokens computed): %s", len(requests), seconds,
             stats.method, stats.tokens_computed, out)
    return 0


def _pack_tokens(value: str) -> int | str:
    if value == "auto":
        return value
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be auto or a positive integer, got {value!r}")
    return int(value)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("loglik", help="score a JSONL file of context/continuation requests (lm-eval loglikelihood)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True,
                   help="a name in --models, embedded:NAME, a .gguf file, a checkpoint directory or a hub id")
    p.add_argument("--requests", required=True, help="JSON Lines: {\"context\": ..., \"continuation\": ...} per line")
    p.add_argument("--out", required=True, help="JSON Lines output, one line per request")
    p.add_argument("--method", default="auto", choices=METHODS,
                   help="auto (prefix tree, self-checked against full sequences; default), prefix-tree, full")
    p.add_argument("--dtype", default=None, choices=DTYPES,
                   help="default: the model table's, else auto (float32 on CPU, bfloat16/float16 on GPU)")
    p.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda, cuda:N")
    p.add_argument("--models", default=DEFAULT_MODELS, help=f"model table (default {DEFAULT_MODELS})")
    p.add_argument("--models-dir", default=DEFAULT_MODELS_DIR,
                   help=f"prepared embedded/GGUF models (default {DEFAULT_MODELS_DIR})")
    p.add_argument("--boundary", default="error", choices=BOUNDARY_MODES,
                   help="a token merged across context and continuation: error (default), split (the continuation "
                   "tokenized alone) or first_divergence (scored from the first differing token)")
    p.add_argument("--batch-size", type=int, default=16, help="full-sequence batch size (method full, self-check)")
    p.add_argument("--pack-tokens", default="auto", type=_pack_tokens,
                   help="tokens per packed forward pass: auto (default) or a positive integer")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's default)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not logging.getLogger().handlers:  # a command line of its own (not inside another program)
        configure_logging()
    try:
        return loglik(args)
    except InputError as err:
        print("\n".join(err.lines), file=sys.stderr)
        return 2
    except ValueError as err:  # a model that cannot be resolved, a boundary error, ...
        print(f"qclm loglik: {err}", file=sys.stderr)
        return 2
