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

A request longer than the model's window (its maximum positions, ``max_position_embeddings`` of its config)
has its context truncated from the left, as lm-evaluation-harness does (the last window + 1 tokens of
context + continuation are kept, the model reads the first window of them): a warning names the lines, and
each such request's output line has ``"context_tokens_dropped": N``. A continuation longer than the window
cannot be scored and is an error naming the line. Everything that can be known before the model loads is
checked then: the request file (JSON, fields, lone surrogates), ``--out`` (it can be written), the device (this
torch can use it; a quantized model needs CUDA), the requests' tokens against the window and against the
device's memory (a sequence whose attention mask alone would not fit).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from qclm import cache
from qclm.argtypes import check_output, device as device_arg, plain, sized, threads
from qclm.commands.args import DEFAULT_MODELS, add_models_dir_argument, usable_device
from qclm.errors import InputError
from qclm.inputs import file_lines, read_text, surrogate_problem
from qclm.logs import configure_logging
from qclm.models.table import DTYPES, resolve_model
from qclm.settings import BOUNDARY_MODES, ENGINE, METHODS, defaults

#: this command's defaults are the workflow's engine defaults (the config schema)
ENGINE_DEFAULTS = defaults(ENGINE)

log = logging.getLogger("qclm.commands.loglik")



def read_requests(path: str | Path) -> tuple[list[int], list[str], list[str]]:
    """(line numbers, contexts, continuations) of a JSONL request file; every bad line is
    reported as ``FILE: line N: PROBLEM`` in one InputError."""
    path = Path(path)
    text = read_text(path, "JSON Lines request file")
    lines, contexts, continuations, problems = [], [], [], []
    for number, raw in enumerate(file_lines(text), start=1):
        if not raw.strip():
            continue
        where = f"line {number}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            problems.append((str(path), where, f"not valid JSON ({err.msg} at column {err.colno})"))
            continue
        except RecursionError:
            problems.append((str(path), where, "JSON nested too deeply to read"))
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
        for key in ("context", "continuation") if not bad else ():
            problem = surrogate_problem(obj[key])  # a benchmark's text may hold anything, but characters
            if problem:
                problems.append((str(path), where, f"field {key!r} {problem}"))
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


def model_window(spec, prepared: Path, tokenizer) -> int | None:
    """The most positions the model reads (its config's ``max_position_embeddings``, or ``n_positions``,
    ``n_ctx``; else the tokenizer's ``model_max_length`` where it is a real limit), read before the weights
    load; None when unknown."""
    from transformers import AutoConfig

    where = str(prepared) if spec.needs_preparation else (
        str(Path(spec.source).expanduser()) if spec.kind == "local" else spec.source)
    try:
        config = AutoConfig.from_pretrained(where, revision=None if spec.kind in ("local", "embedded", "gguf")
                                            else (spec.revision or None), trust_remote_code=spec.trust_remote_code)
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
    except Exception:  # noqa: BLE001 - loading the model reports it
        config = None
    for name in ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < 10**8 else None


def fit_window(requests: list, window: int | None, path, lines: list[int]) -> tuple[list, list[int]]:
    """Requests that fit the model's window, lm-evaluation-harness's way: a request of more than window + 1
    tokens keeps its last window + 1 (the context truncated from the left); a continuation longer than the
    window is an InputError naming its line. Returns (requests, context tokens dropped per request)."""
    from qclm.engine import Request

    if window is None:
        return requests, [0] * len(requests)
    out, dropped, problems = [], [], []
    for line, r in zip(lines, requests):
        if len(r.continuation) > window:
            problems.append((str(path), f"line {line}", f"the continuation has {len(r.continuation)} tokens, more "
                             f"than the model's window of {window} positions: it cannot be scored"))
            continue
        extra = len(r.context) + len(r.continuation) - (window + 1)
        extra = min(max(extra, 0), len(r.context) - 1)
        out.append(Request(r.context[extra:], r.continuation) if extra else r)
        dropped.append(extra)
    if problems:
        raise InputError(problems)
    cut = [line for line, k in zip(lines, dropped) if k]
    if cut:
        shown = ", ".join(map(str, cut[:10])) + (f" and {len(cut) - 10} more" if len(cut) > 10 else "")
        log.warning("%s: %d request(s) longer than the model's window of %d positions: their contexts were "
                    "truncated from the left, as lm-evaluation-harness does (line(s) %s; the output gives "
                    "context_tokens_dropped)", path, len(cut), window, shown)
    return out, dropped


def memory_problem(requests: list, lines: list[int], device: str, method: str) -> tuple[str, str] | None:
    """(line, problem) for the longest request when the shared-prefix engine's attention mask for it alone (a
    sequence x sequence matrix of at least 2 bytes a cell) would exceed the device's total memory: it could
    only fail, after the model has loaded."""
    import torch

    if method == "full" or not requests:
        return None
    n, longest = max((len(r.context) + len(r.continuation), i) for i, r in enumerate(requests))
    need = 2 * n * n
    if device.startswith("cuda"):
        total = int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    else:
        try:
            import psutil

            total = int(psutil.virtual_memory().total)
        except ImportError:  # pragma: no cover - psutil comes with accelerate
            return None
    if need <= total:
        return None
    gib = 2**30
    return (f"line {lines[longest]}", f"the request has {n} tokens; scoring it needs more than {need / gib:.0f} GiB "
            f"(its {n} x {n} attention mask alone), and the {device} has {total / gib:.0f} GiB: shorten the context")


def loglik(args: argparse.Namespace) -> int:
    import numpy as np
    import torch
    from tqdm import tqdm

    from qclm.engine import make_scorer
    from qclm.models.loading import ensure_prepared, load_model, load_tokenizer

    lines, contexts, continuations = read_requests(args.requests)
    check_output(args.out, "--out")
    spec = resolve_model(args.model, args.models, args.dtype)
    device = usable_device(args.device)
    if spec.quantization and not device.startswith("cuda"):
        raise ValueError(f"model {spec.name}: quantization {spec.quantization} needs a CUDA GPU (bitsandbytes); "
                         f"--device is {device}")
    if args.threads:
        torch.set_num_threads(args.threads)
    prepared = ensure_prepared(spec, cache.models_dir(args.models_dir) / spec.name)
    tokenizer = load_tokenizer(spec, prepared)
    requests = tokenize(tokenizer, args.requests, lines, contexts, continuations, args.boundary)
    window = model_window(spec, prepared, tokenizer)
    if window is None:
        log.info("model %s: its maximum positions are unknown; contexts are not truncated", spec.name)
    requests, dropped = fit_window(requests, window, args.requests, lines)
    problem = memory_problem(requests, lines, device, args.method)
    if problem:
        raise InputError.one(args.requests, *problem)
    t0 = time.perf_counter()
    model, tokenizer, provenance = load_model(spec, prepared, device)
    log.info("model %s loaded in %.1f s (%s, %s)", spec.name, time.perf_counter() - t0, provenance["dtype"],
             provenance["device"])
    t0 = time.perf_counter()
    scorer = make_scorer(model, args.method, args.batch_size, args.pack_tokens)
    with tqdm(total=len(requests), desc=f"{spec.name} loglik", unit="request", mininterval=5) as bar:
        logprobs, greedy = scorer.score_with_greedy(requests, progress=bar.update)
    seconds = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for line, r, lp, g, cut in zip(lines, requests, logprobs, greedy, dropped):
                if not np.all(np.isfinite(lp)):
                    raise RuntimeError(f"{args.requests}: line {line}: non-finite log-probability {lp.tolist()}")
                f.write(json.dumps({
                    "line": line, "logprob": float(np.sum(lp.astype(np.float64))), "is_greedy": bool(np.all(g)),
                    "token_logprobs": [float(x) for x in lp], "token_ids": list(r.continuation),
                    "tokens": tokenizer.convert_ids_to_tokens(list(r.continuation)),
                    **({"context_tokens_dropped": cut} if cut else {}),
                }, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    stats = scorer.stats
    log.info("%d requests in %.2f s (scoring; %s, %d tokens computed): %s", len(requests), seconds,
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
                       description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True,
                   help="a name in --models, embedded:NAME, a .gguf file, a checkpoint directory or a hub id")
    p.add_argument("--requests", required=True, help="JSON Lines: {\"context\": ..., \"continuation\": ...} per line")
    p.add_argument("--out", required=True, help="JSON Lines output, one line per request")
    p.add_argument("--method", default=ENGINE_DEFAULTS["method"], choices=METHODS,
                   help="auto (prefix tree, self-checked against full sequences; default), prefix-tree, full")
    p.add_argument("--dtype", default=None, choices=DTYPES,
                   help="default: the model table's, else auto (float32 on CPU, bfloat16/float16 on GPU)")
    p.add_argument("--device", default="auto", type=device_arg,
                   help="auto (cuda if available, else cpu), cpu, mps, cuda, cuda:N")
    p.add_argument("--models", default=DEFAULT_MODELS, help=f"model table (default {DEFAULT_MODELS})")
    add_models_dir_argument(p)
    p.add_argument("--boundary", default=ENGINE_DEFAULTS["boundary"], choices=BOUNDARY_MODES,
                   help="a token merged across context and continuation: error (default), split (the continuation "
                   "tokenized alone) or first_divergence (scored from the first differing token)")
    p.add_argument("--batch-size", type=sized("batch"), default=ENGINE_DEFAULTS["batch_size"],
                   help="full-sequence batch size (method full, self-check)")
    p.add_argument("--pack-tokens", default=ENGINE_DEFAULTS["pack_tokens"], type=_pack_tokens,
                   help="tokens per packed forward pass: auto (default) or a positive integer")
    p.add_argument("--threads", type=threads, default=0, help="CPU threads (default 0: torch's default)")
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
