"""The vLLM backend (model table ``backend: vllm``): every request kind of the seam through a vLLM server's
OpenAI-compatible ``/v1/completions`` route, on token ids that this process tokenizes with the model's own
tokenizer, so the context/continuation split is the local engine's (qclm.engine.requests.tokenize_requests).

How each request kind is asked (docs/scaling.md, "Backends"; the facts checked against vLLM 0.32):

- ``loglikelihood``: each continuation token as a teacher-forced next-token request (the context and the
  continuation's first j tokens; ``logprob_token_ids`` names token j+1; at temperature 0 the token the server picks
  is the argmax, so the greedy flag is whether it picked that token). Next-token requests read vLLM's prefix cache,
  so the shared stimulus is computed once; the first request goes alone first, because requests scheduled together
  compute their prompts side by side. The other way (``teacher_forced=False``): ``prompt_logprobs`` on the context
  + continuation ids, each token's log-probability and rank; vLLM recomputes such a prompt whole (it skips its
  prefix cache), 8.6x slower on ``benchmarks/vllm.py``'s Likert cell.
- ``choose``: options that are one token each after the same context ids are one next-token request on the
  context naming the options' tokens (``next_token_choices``; 11.5x faster than prompt log-probabilities on the
  benchmark); other options go as ``loglikelihood``. Results are normalized log-probabilities (vLLM's
  ``raw_logprobs``: the model's own distribution, before temperature or top-k).
- ``choose_chain``: step by step, every chain's step as a ``choose``, the chosen option appended.
- ``generate``: the prompt's ids, the request's seed, temperature/top-k/top-p, max tokens and stop strings;
  greedy is temperature 0. vLLM samples with its own generator: a seeded request draws the same on every rerun,
  not the local engine's draws.

:class:`VllmServer` starts a server for a row whose ``server`` column is empty (the scoring job's GPUs,
``tensor_parallel_size`` from the row's ``gpus``), waits for ``/health`` and stops it with its process group
whatever happens. No torch.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any, cast

from qclm.engine.capabilities import why_not
from qclm.engine.remote import CompletionsClient, RemoteError, describe_part
from qclm.engine.requests import (
    ChainRequest, ChainResult, ChoiceRequest, ChoiceResult, GenerateRequest, GenerateResult, LoglikRequest,
    LoglikResult, Request, by_settings, choice_result, is_greedy, loglik_result, prompt_sha256, server_sampling,
    tokenize_requests,
)

log = logging.getLogger("qclm.engine")

#: prompts per HTTP request to a vLLM server (its scheduler batches them)
VLLM_BATCH = 64
#: token ids one request may name in ``logprob_token_ids`` (vLLM's MAX_LOGPROB_TOKEN_IDS, vllm/sampling_params.py)
MAX_TOKEN_IDS = 128
#: the environment ``make vllm-env`` builds
VLLM_VENV = ".venv-vllm"


class ServerError(RuntimeError):
    """The vLLM server did not start (its log's last lines say why)."""


def vllm_python() -> str:
    """The Python that runs vLLM: ``$QCLM_VLLM_PYTHON``, else the project's ``.venv-vllm`` (``make vllm-env``) in the
    run's directory or the checkout qclm runs from, else this interpreter (vLLM installed beside qclm)."""
    if os.environ.get("QCLM_VLLM_PYTHON"):
        return os.environ["QCLM_VLLM_PYTHON"]
    for root in (Path.cwd(), Path(__file__).resolve().parents[3]):  # the run's directory, the checkout's root
        local = root / VLLM_VENV / "bin" / "python"
        if local.exists():
            return str(local)
    return sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's process: SIGKILL when the process that started it dies, however it dies (Linux); vLLM's
    engine processes watch the server and follow it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


class VllmServer:
    """A vLLM OpenAI-compatible server for one model directory, as a context manager: started in its own process
    group, ``/health`` polled until it answers (or the process dies, or ``start_timeout`` passes), stopped by
    signalling the group (SIGTERM, then SIGKILL) and waited for."""

    def __init__(self, model_dir: str | Path, *, gpus: int = 1, dtype: str = "auto", python: str | None = None,
                 start_timeout: float = 900.0, log_path: str | Path | None = None, extra_args: Sequence[str] = (),
                 served_name: str = "model"):
        self.model_dir, self.gpus, self.dtype = str(model_dir), gpus, dtype
        self.python = python or vllm_python()
        self.start_timeout, self.extra_args, self.served_name = start_timeout, list(extra_args), served_name
        self.log_path = Path(log_path) if log_path else None
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._log: IO[bytes] | None = None
        self._previous: Callable[[int, FrameType | None], Any] | int | None = None  # the SIGTERM handler before

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_dir,
                "--served-model-name", self.served_name, "--dtype", self.dtype,
                "--tensor-parallel-size", str(self.gpus), "--enable-prefix-caching", "--enable-prompt-tokens-details",
                "--host", "127.0.0.1", "--port", str(self.port), *self.extra_args]

    def __enter__(self) -> "VllmServer":
        self._tmp = tempfile.TemporaryDirectory(prefix="qclm-vllm-")
        env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "VLLM_NO_USAGE_STATS": "1",
               "VLLM_CACHE_ROOT": os.environ.get("VLLM_CACHE_ROOT", self._tmp.name)}
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        self.port = free_port()
        log_file = self.log_path or Path(self._tmp.name) / "server.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_file, "wb")  # noqa: SIM115 - closed in __exit__
        self.log_file = log_file
        log.info("vLLM: starting %s", " ".join(self.command()))
        self.process = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True, preexec_fn=_die_with_parent)
        if threading.current_thread() is threading.main_thread():
            # a job stopped with SIGTERM (Snakemake, SLURM's scancel) unwinds, so __exit__ stops the server
            self._previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            self._wait(self.process)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait(self, process: subprocess.Popen) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.start_timeout:
            if process.poll() is not None:
                raise ServerError(f"the vLLM server exited with code {process.returncode} while starting: "
                                  f"{self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        log.info("vLLM: up in %.0f s at %s", time.monotonic() - t0, self.url)
                        return
            except OSError:
                pass
            time.sleep(1.0)
        raise ServerError(f"the vLLM server did not answer /health within {self.start_timeout:.0f} s: {self.tail()}")

    def tail(self, lines: int = 3) -> str:
        try:
            text = Path(self.log_file).read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text[-lines:]) or "(empty log)"

    def __exit__(self, *exc) -> None:
        if self._previous is not None:  # a second SIGTERM while stopping ends this process (the server follows it)
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
        p = self.process
        if p is not None and p.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if p is not None:
            try:  # the group's other processes (engine cores) go with it
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._log is not None:
            self._log.close()
        if self._tmp is not None:
            self._tmp.cleanup()
        self.process = None


class RemoteStats:
    """Work done through a server, in the shape of the local engine's ``Stats`` that the scoring job records.
    ``tokens_computed`` is what the server was given and produced (prompt + completion tokens of its usage): an
    upper bound of what it computed, because prefix-cache hits are not subtracted (vLLM 0.32 reports the cached
    tokens of a batch's last prompt only, ``api_usage.cached_tokens``)."""

    def __init__(self, method: str, client: CompletionsClient):
        self.method, self.client = method, client
        self.notes: list[str] = []

    @property
    def tokens_computed(self) -> int:
        u = self.client.usage
        return u.prompt_tokens + u.completion_tokens


def _position_logprobs(choice: dict, ids: Sequence[int], start: int, what: str) -> tuple[list[float], list[bool]]:
    """The log-probabilities (and greedy flags) of ``ids[start:]`` from a choice's ``prompt_logprobs``."""
    entries = choice.get("prompt_logprobs")
    if not entries or len(entries) != len(ids):
        raise RemoteError(f"{what}: the server returned {len(entries or [])} prompt log-probabilities for "
                          f"{len(ids)} prompt tokens")
    lps, greedy = [], []
    for pos in range(start, len(ids)):
        entry = entries[pos].get(str(ids[pos])) if entries[pos] else None
        if entry is None:
            raise RemoteError(f"{what}: no log-probability for prompt token {ids[pos]} at position {pos}")
        lps.append(float(entry["logprob"]))
        greedy.append(int(entry.get("rank") or 0) == 1)
    return lps, greedy


def _named_logprobs(answer: dict) -> dict[int, float]:
    """token id -> log-probability of the first generated position (``return_tokens_as_token_ids`` keys)."""
    top = ((answer.get("logprobs") or {}).get("top_logprobs") or [None])[0] or {}
    return {int(k.split(":", 1)[1]): float(v) for k, v in top.items() if k.startswith("token_id:")}


def _picked(answer: dict) -> int | None:
    """The token id the server generated first (at temperature 0: the argmax)."""
    tokens = (answer.get("logprobs") or {}).get("tokens") or []
    return int(tokens[0].split(":", 1)[1]) if tokens and str(tokens[0]).startswith("token_id:") else None


class VllmBackend:
    """The seam's requests through a vLLM server (module docstring). ``tokenizer``: the model's tokenizer;
    ``client``: the server's completions client; ``engine``: the run's engine settings (``boundary``)."""

    method = "vllm"

    def __init__(self, tokenizer, client: CompletionsClient, engine: dict, next_token_choices: bool = True,
                 teacher_forced: bool = True):
        self.tokenizer, self.client = tokenizer, client
        self.boundary = engine.get("boundary", "error")
        self.next_token_choices = next_token_choices
        self.teacher_forced = teacher_forced
        self.stats = RemoteStats(self.method, client)

    # -- token level ----------------------------------------------------------------------------------------------
    def _continuation_logprobs(self, requests: Sequence[Request], describe: Callable[[int], str] | None
                               ) -> list[tuple[list[float], list[bool]]]:
        """Each continuation token's log-probability (and greedy flag): teacher-forced next-token requests
        (``teacher_forced``; they read the prefix cache), else prompt log-probabilities (they recompute every
        prompt)."""
        return (self._teacher_forced if self.teacher_forced else self._prompt_logprobs)(requests, describe)

    def _teacher_forced(self, requests: Sequence[Request], describe: Callable[[int], str] | None
                        ) -> list[tuple[list[float], list[bool]]]:
        """A continuation of m tokens as m next-token requests (the context and the continuation's first j tokens,
        asking for token j+1 by ``logprob_token_ids``), greedy at temperature 0: the token the server picks is the
        argmax, so a continuation token is greedy where it is that token. All positions of a call go in one
        request set naming every target token; the first prompt goes alone first (it fills the prefix cache)."""
        prompts, owner, targets = [], [], []
        for i, r in enumerate(requests):
            for j, token in enumerate(r.continuation):
                prompts.append(r.context + r.continuation[:j])
                owner.append(i)
                targets.append(token)
        answers = self._next_tokens(prompts, [[t] for t in targets], (lambda k: describe(owner[k])) if describe
                                    else None)
        out: list[tuple[list[float], list[bool]]] = [([], []) for _ in requests]
        for k, ((lps, picked), target) in enumerate(zip(answers, targets)):
            out[owner[k]][0].append(lps[0])
            out[owner[k]][1].append(picked == target)
        return out

    def _prompt_logprobs(self, requests: Sequence[Request], describe: Callable[[int], str] | None
                         ) -> list[tuple[list[float], list[bool]]]:
        """Each continuation token's log-probability and greedy flag (rank 1) from ``prompt_logprobs`` on the
        context + continuation ids (vLLM recomputes such a prompt whole: it skips its prefix cache)."""
        prompts = [list(r.context + r.continuation) for r in requests]
        answers = self.client.complete(prompts, {"max_tokens": 1, "temperature": 0.0,
                                                 "extra_body": {"prompt_logprobs": 0}}, describe)
        return [_position_logprobs(a, p, len(r.context), describe(i) if describe else f"request {i}")
                for i, (a, p, r) in enumerate(zip(answers, prompts, requests))]

    def _next_tokens(self, prompts: Sequence[Sequence[int]], wanted: Sequence[Sequence[int]],
                     describe: Callable[[int], str] | None) -> list[tuple[list[float], int | None]]:
        """Next-token requests on token-id prompts: per prompt the log-probabilities of its ``wanted`` tokens (all
        prompts' tokens named in ``logprob_token_ids``) and the token the server picks at temperature 0 (the
        argmax). They read vLLM's prefix cache; the first prompt goes alone first, because requests scheduled
        together compute their prompts side by side and the shared prefix is cached only once one has finished;
        then runs of prompts whose tokens together stay within what one request may name (``MAX_TOKEN_IDS``)."""
        answers: list[dict | None] = [None] * len(prompts)
        parts = [[0]] if prompts else []  # the first alone
        names: set[int] = set()
        for k in range(1, len(prompts)):  # then runs of prompts that name at most MAX_TOKEN_IDS tokens together
            if len(parts) == 1 or len(names | set(wanted[k])) > MAX_TOKEN_IDS:
                parts.append([])
                names = set()
            parts[-1].append(k)
            names |= set(wanted[k])
        for part in parts:
            ids = sorted({t for k in part for t in wanted[k]})
            if len(ids) > MAX_TOKEN_IDS:
                what = describe(part[0]) if describe else f"request {part[0]}"
                raise RemoteError(f"{what}: {len(ids)} options' tokens; vLLM names at most {MAX_TOKEN_IDS} in one "
                                  "request")
            params = {"max_tokens": 1, "temperature": 0.0, "logprobs": 1,
                      "extra_body": {"logprob_token_ids": ids, "return_tokens_as_token_ids": True}}
            got = self.client.complete([list(prompts[k]) for k in part], params, describe_part(describe, part))
            for k, a in zip(part, got):
                answers[k] = a
        out = []
        for k, (a, want) in enumerate(zip(cast("list[dict]", answers), wanted)):  # every prompt is in a part
            named = _named_logprobs(a)
            if any(t not in named for t in want):
                raise RemoteError(f"{describe(k) if describe else f'request {k}'}: the server returned no "
                                  f"log-probability for token(s) {[t for t in want if t not in named]}")
            out.append(([named[t] for t in want], _picked(a)))
        return out

    def _choose_tokens(self, contexts: Sequence[tuple[int, ...]], options: Sequence[Sequence[tuple[int, ...]]],
                       describe: Callable[[int], str] | None) -> list[list[list[float]]]:
        """Each option's token log-probabilities after its context: single-token options as one next-token
        request per context (``next_token_choices``), the others token by token (:meth:`_continuation_logprobs`)."""
        out: list[list[list[float]] | None] = [None] * len(contexts)
        single = [i for i, opts in enumerate(options) if self.next_token_choices and all(len(o) == 1 for o in opts)]
        if single:
            got = self._next_tokens([contexts[i] for i in single], [[o[0] for o in options[i]] for i in single],
                                    (lambda j: describe(single[j])) if describe else None)
            for i, (row, _) in zip(single, got):
                out[i] = [[lp] for lp in row]
        rest = [i for i in range(len(contexts)) if out[i] is None]
        flat = [(i, Request(tuple(contexts[i]), tuple(o))) for i in rest for o in options[i]]
        if flat:
            scored = self._continuation_logprobs([r for _, r in flat],
                                                 (lambda j: describe(flat[j][0])) if describe else None)
            for (i, _), (lps, _) in zip(flat, scored):
                out[i] = (out[i] or []) + [lps]
        return cast("list[list[list[float]]]", out)  # each context has options (its callers make none without)

    # -- string level ---------------------------------------------------------------------------------------------
    def loglikelihood(self, requests: Sequence[LoglikRequest], describe: Callable[[int], str] | None = None,
                      progress: Callable[[int], None] | None = None) -> list[LoglikResult]:
        tokens = tokenize_requests(self.tokenizer, [r.context for r in requests],
                                   [r.continuation for r in requests], self.boundary, describe)
        scored = self._continuation_logprobs(tokens, describe)
        if progress:
            progress(len(requests))
        return [loglik_result(lps, t.continuation, g, self.tokenizer) for t, (lps, g) in zip(tokens, scored)]

    def choose(self, requests: Sequence[ChoiceRequest], describe: Callable[[int], str] | None = None,
               progress: Callable[[int], None] | None = None) -> list[ChoiceResult]:
        owner = [i for i, r in enumerate(requests) for _ in r.options]
        flat = tokenize_requests(self.tokenizer, [requests[i].context for i in owner],
                                 [o for r in requests for o in r.options], self.boundary,
                                 (lambda j: describe(owner[j])) if describe else None)
        contexts, options, at = [], [], 0
        groups = []  # per request: [(context ids, [option ids])] - options after different context ids apart
        for r in requests:
            mine = flat[at:at + len(r.options)]
            at += len(r.options)
            by_context: dict[tuple, list[int]] = {}
            for k, t in enumerate(mine):
                by_context.setdefault(t.context, []).append(k)
            groups.append([(ctx, ks) for ctx, ks in by_context.items()])
            for ctx, ks in by_context.items():
                contexts.append(ctx)
                options.append([mine[k].continuation for k in ks])
        owners = [i for i, g in enumerate(groups) for _ in g]
        lps = self._choose_tokens(contexts, options, (lambda j: describe(owners[j])) if describe else None)
        out, at = [], 0
        for r, g in zip(requests, groups):
            per_option: list[list[float]] = [[] for _ in r.options]
            for _, ks in g:
                for k, lp in zip(ks, lps[at]):
                    per_option[k] = lp
                at += 1
            out.append(choice_result(per_option, r.values))
        if progress:
            progress(len(requests))
        return out

    def choose_chain(self, requests: Sequence[ChainRequest], describe: Callable[[int], str] | None = None
                     ) -> list[ChainResult]:
        from qclm.engine.chains import tokenize_chains

        chains = tokenize_chains(self.tokenizer, requests, describe)
        ids = [list(c.context) for c in chains]
        steps: list[list[ChoiceResult]] = [[] for _ in chains]
        for s in range(max((len(c.steps) for c in chains), default=0)):
            live = [i for i, c in enumerate(chains) if s < len(c.steps)]
            contexts = [tuple(ids[i] + list(chains[i].steps[s][0])) for i in live]
            lps = self._choose_tokens(contexts, [list(chains[i].steps[s][1]) for i in live],
                                      (lambda j: f"{describe(live[j]) if describe else f'chain {live[j]}'}, step "
                                                 f"{s + 1}"))
            for i, ctx, lp in zip(live, contexts, lps):
                result = choice_result(lp)
                steps[i].append(result)
                ids[i] = list(ctx) + list(chains[i].steps[s][1][result.argmax])
        return [ChainResult(tuple(r)) for r in steps]

    def classify(self, requests, describe=None, progress=None):
        raise NotImplementedError(why_not("vllm", "classify"))

    def generate(self, requests: Sequence[GenerateRequest], describe: Callable[[int], str] | None = None
                 ) -> list[GenerateResult]:
        prompts = [list(ids) for ids in self.tokenizer([r.context for r in requests],
                                                       add_special_tokens=True)["input_ids"]] if requests else []
        for i, p in enumerate(prompts):
            if not p:
                raise ValueError(f"{describe(i) if describe else f'request {i}'}: the prompt has no tokens")
        out: list[GenerateResult | None] = [None] * len(requests)
        for settings, members in by_settings(requests).items():
            greedy = is_greedy(settings)
            params = {**server_sampling(settings), "logprobs": 0,
                      "extra_body": {"top_k": 0 if greedy else settings.top_k, "return_token_ids": True,
                                     "skip_special_tokens": False, "spaces_between_special_tokens": False,
                                     "include_stop_str_in_output": False},
                      **({"stop": list(settings.stop)} if settings.stop else {})}
            answers = self.client.complete([prompts[i] for i in members], params, describe_part(describe, members),
                                           seeds=[None if greedy else requests[i].seed for i in members])
            for i, a in zip(members, answers):
                token_ids = tuple(int(t) for t in a.get("token_ids") or ())
                lps = tuple(float(x) for x in ((a.get("logprobs") or {}).get("token_logprobs") or ()))
                if a.get("finish_reason") == "length":
                    reason = "length"
                else:
                    reason = "stop" if isinstance(a.get("stop_reason"), str) else "eos"
                out[i] = GenerateResult(a.get("text") or "", token_ids, reason, prompt_sha256(prompts[i]), lps)
        return cast("list[GenerateResult]", out)  # each request is in a group
