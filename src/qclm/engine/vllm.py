"""The vLLM backend (model table ``backend: vllm``): every request kind of the seam through a vLLM server's
OpenAI-compatible ``/v1/completions`` route, on token ids that this process tokenizes with the model's own
tokenizer, so the context/continuation split is the local engine's (qclm.engine.requests.tokenize_requests).

How each request kind is asked (docs/scaling.md, "Backends"; the facts checked against vLLM 0.32):

- ``loglikelihood``: the context + continuation ids as the prompt, ``prompt_logprobs`` (each prompt token's
  log-probability and rank: rank 1 is the greedy token). vLLM recomputes a prompt whose log-probabilities are
  asked (it skips its prefix cache for them), so the shared stimulus is computed once per request here.
- ``choose``: options that are one token each after the same context ids are one next-token request on the
  context, ``logprob_token_ids`` naming the options' tokens: that request reads the prefix cache, so the shared
  stimulus is computed once for all of them (``benchmarks/vllm.py`` measures both ways); other options go as
  ``loglikelihood``. Results are normalized log-probabilities (vLLM's ``raw_logprobs``: the model's own
  distribution, before temperature or top-k).
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
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from qclm.engine.remote import CompletionsClient, RemoteError
from qclm.engine.requests import (
    ChainRequest, ChainResult, ChoiceRequest, ChoiceResult, GenerateRequest, GenerateResult, LoglikRequest,
    LoglikResult, Request, choice_result, is_greedy, prompt_sha256, tokenize_requests,
)

log = logging.getLogger("qclm.engine")

#: prompts per HTTP request to a vLLM server (its scheduler batches them)
VLLM_BATCH = 64


class ServerError(RuntimeError):
    """The vLLM server did not start (its log's last lines say why)."""


def vllm_python() -> str:
    """The Python that runs vLLM: ``$QCLM_VLLM_PYTHON``, else the project's ``.venv-vllm`` (``make vllm-env``),
    else this interpreter (vLLM installed beside qclm)."""
    if os.environ.get("QCLM_VLLM_PYTHON"):
        return os.environ["QCLM_VLLM_PYTHON"]
    local = Path(".venv-vllm") / "bin" / "python"
    return str(local.resolve()) if local.exists() else sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_dir,
                "--served-model-name", self.served_name, "--dtype", self.dtype,
                "--tensor-parallel-size", str(self.gpus), "--enable-prefix-caching",
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
                                        start_new_session=True)
        try:
            self._wait()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait(self) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.start_timeout:
            if self.process.poll() is not None:
                raise ServerError(f"the vLLM server exited with code {self.process.returncode} while starting: "
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
        p = self.process
        if p is not None and p.poll() is None:
            for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
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
    """Work done through a server, in the shape of the local engine's ``Stats`` that the scoring job records
    (``tokens_computed``: tokens the server reported for the prompts it answered) plus the usage."""

    def __init__(self, method: str, client: CompletionsClient):
        self.method, self.client, self.notes = method, client, []

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


class VllmBackend:
    """The seam's requests through a vLLM server (module docstring). ``tokenizer``: the model's tokenizer;
    ``client``: the server's completions client; ``engine``: the run's engine settings (``boundary``)."""

    method = "vllm"

    def __init__(self, tokenizer, client: CompletionsClient, engine: dict, next_token_choices: bool = True):
        self.tokenizer, self.client = tokenizer, client
        self.boundary = engine.get("boundary", "error")
        self.next_token_choices = next_token_choices
        self.stats = RemoteStats(self.method, client)

    # -- token level ----------------------------------------------------------------------------------------------
    def _prompt_logprobs(self, requests: Sequence[Request], describe: Callable[[int], str] | None
                         ) -> list[tuple[list[float], list[bool]]]:
        prompts = [list(r.context + r.continuation) for r in requests]
        answers = self.client.complete(prompts, {"max_tokens": 1, "temperature": 0.0,
                                                 "extra_body": {"prompt_logprobs": 0}}, describe)
        return [_position_logprobs(a, p, len(r.context), describe(i) if describe else f"request {i}")
                for i, (a, p, r) in enumerate(zip(answers, prompts, requests))]

    def _next_token_logprobs(self, contexts: Sequence[tuple[int, ...]], targets: Sequence[Sequence[int]],
                             describe: Callable[[int], str] | None) -> list[list[float]]:
        """log P(token | context) of each target token of each context, from one next-token request each."""
        answers = self._next_token_answers(contexts, targets, describe)
        out = []
        for i, (a, want) in enumerate(zip(answers, targets)):
            top = ((a.get("logprobs") or {}).get("top_logprobs") or [None])[0] or {}
            got = {int(k.split(":", 1)[1]): float(v) for k, v in top.items() if k.startswith("token_id:")}
            if any(t not in got for t in want):
                what = describe(i) if describe else f"request {i}"
                raise RemoteError(f"{what}: the server returned no log-probability for option token(s) "
                                  f"{[t for t in want if t not in got]}")
            out.append([got[t] for t in want])
        return out

    def _next_token_answers(self, contexts, targets, describe) -> list[dict]:
        """The answers of next-token requests, grouped by their target tokens (``logprob_token_ids`` is a parameter
        of the whole HTTP request)."""
        groups: dict[tuple, list[int]] = {}
        for i, t in enumerate(targets):
            groups.setdefault(tuple(sorted(set(t))), []).append(i)
        answers = [None] * len(contexts)
        for ids, members in groups.items():
            got = self.client.complete([list(contexts[i]) for i in members], {
                "max_tokens": 1, "temperature": 0.0, "logprobs": 1,
                "extra_body": {"logprob_token_ids": list(ids), "return_tokens_as_token_ids": True}},
                (lambda j, m=members: describe(m[j])) if describe else None)
            for i, a in zip(members, got):
                answers[i] = a
        return answers

    def _choose_tokens(self, contexts: Sequence[tuple[int, ...]], options: Sequence[Sequence[tuple[int, ...]]],
                       describe: Callable[[int], str] | None) -> list[list[list[float]]]:
        """Each option's token log-probabilities after its context: single-token options as one next-token
        request per context (``next_token_choices``), the others through prompt log-probabilities."""
        out: list[list[list[float]] | None] = [None] * len(contexts)
        single = [i for i, opts in enumerate(options) if self.next_token_choices and all(len(o) == 1 for o in opts)]
        if single:
            lps = self._next_token_logprobs([contexts[i] for i in single], [[o[0] for o in options[i]] for i in single],
                                            (lambda j: describe(single[j])) if describe else None)
            for i, row in zip(single, lps):
                out[i] = [[lp] for lp in row]
        rest = [i for i in range(len(contexts)) if out[i] is None]
        flat = [(i, Request(tuple(contexts[i]), tuple(o))) for i in rest for o in options[i]]
        if flat:
            scored = self._prompt_logprobs([r for _, r in flat], (lambda j: describe(flat[j][0])) if describe else None)
            for (i, _), (lps, _) in zip(flat, scored):
                out[i] = (out[i] or []) + [lps]
        return out  # type: ignore[return-value]

    # -- string level ---------------------------------------------------------------------------------------------
    def loglikelihood(self, requests: Sequence[LoglikRequest], describe: Callable[[int], str] | None = None,
                      progress: Callable[[int], None] | None = None) -> list[LoglikResult]:
        tokens = tokenize_requests(self.tokenizer, [r.context for r in requests],
                                   [r.continuation for r in requests], self.boundary, describe)
        scored = self._prompt_logprobs(tokens, describe)
        if progress:
            progress(len(requests))
        return [LoglikResult(float(np.sum(np.asarray(lps, dtype=np.float64))), tuple(lps), t.continuation, all(g))
                for t, (lps, g) in zip(tokens, scored)]

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

    def generate(self, requests: Sequence[GenerateRequest], describe: Callable[[int], str] | None = None
                 ) -> list[GenerateResult]:
        prompts = [list(ids) for ids in self.tokenizer([r.context for r in requests],
                                                       add_special_tokens=True)["input_ids"]] if requests else []
        for i, p in enumerate(prompts):
            if not p:
                raise ValueError(f"{describe(i) if describe else f'request {i}'}: the prompt has no tokens")
        out: list[GenerateResult | None] = [None] * len(requests)
        groups: dict = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.settings, []).append(i)
        for settings, members in groups.items():
            greedy = is_greedy(settings)
            params = {"max_tokens": settings.max_new_tokens, "logprobs": 0,
                      "temperature": 0.0 if greedy else settings.temperature,
                      "top_p": 1.0 if greedy else settings.top_p,
                      "extra_body": {"top_k": 0 if greedy else settings.top_k, "return_token_ids": True,
                                     "skip_special_tokens": False, "spaces_between_special_tokens": False,
                                     "include_stop_str_in_output": False},
                      **({"stop": list(settings.stop)} if settings.stop else {})}
            answers = self.client.complete([prompts[i] for i in members], params,
                                           (lambda j, m=members: describe(m[j])) if describe else None,
                                           seeds=[None if greedy else requests[i].seed for i in members])
            for i, a in zip(members, answers):
                token_ids = tuple(int(t) for t in a.get("token_ids") or ())
                lps = tuple(float(x) for x in ((a.get("logprobs") or {}).get("token_logprobs") or ()))
                reason = {"length": "length"}.get(a.get("finish_reason"), None)
                if reason is None:
                    reason = "stop" if isinstance(a.get("stop_reason"), str) else "eos"
                out[i] = GenerateResult(a.get("text") or "", token_ids, reason, prompt_sha256(prompts[i]), lps)
        return out  # type: ignore[return-value]
