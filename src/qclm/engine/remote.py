"""Requests to a server over HTTP (an OpenAI-compatible ``/v1/completions`` route: vLLM's, or an API's), for the
server backends (:mod:`qclm.engine.vllm`, :mod:`qclm.engine.openai_api`): what a user of an API needs.

- **Response cache**: every prompt's answer is kept on disk under a key of everything that determines it (the
  model's identity, the route, the request's parameters, its seed), in one SQLite file per model
  (:class:`ResponseCache`), so a rerun or a resumed run sends nothing it sent before (``engine.response_cache``);
  the provenance counts its hits (``api_usage.cached``) and its size (``response_cache``). The server's address is not
  in the key: a workflow-started vLLM
  server gets a new port every run, and the model's identity says what answers.
- **Batches**: prompts that differ only in their prompt go in one HTTP request (a list of prompts) where the
  route takes lists (vLLM); an API gets one prompt per request.
- **Concurrency, timeout, retries**: at most ``engine.api_concurrency`` HTTP requests at once, each with a timeout
  of ``engine.api_timeout`` seconds; a rate limit (429), a server error (5xx), a timeout or a dropped connection
  is retried up to ``engine.api_retries`` times with exponential backoff (1, 2, 4... s, at most 60 s, or what
  the server's Retry-After header says), jittered (:func:`backoff`) so that threads stopped together do not retry
  together.
- **Usage**: the tokens the server reports (prompt, completion), requests sent, answers from the cache, retries,
  for the provenance of every cell.
- **Credentials**: a missing or rejected key is a :class:`CredentialsError` (the scoring job ends with one line
  and exit code 2; cells already computed are kept). The key comes from the environment variable the model
  table's row names, never from a file.

No torch.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import sqlite3

log = logging.getLogger("qclm.engine")
#: each retry, a line of the job's log and not of the terminal (eight threads retrying a failing server: dozens of
#: lines; the failure that ends the retries is the one line the terminal gets)
retries_log = logging.getLogger("qclm.engine.retries")

#: backoff of retried requests: BACKOFF_BASE_S x 2^attempt, at most BACKOFF_MAX_S (or the server's Retry-After),
#: jittered (:func:`backoff`)
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0


class RowProblem(RuntimeError):
    """What the user fixes in a model row or the environment, not in the code: one line, exit 2, as bad input."""


class CredentialsError(RowProblem):
    """The API key is missing or the server rejected it."""


class UnknownModelError(RowProblem):
    """The endpoint serves no model of the row's name (or has no such route: a base URL without its ``/v1``)."""


class RemoteError(RuntimeError):
    """A request the server refused or kept failing after its retries, with the request named (one line, exit 1)."""


@dataclass
class Usage:
    """What a backend sent and what it cost (the provenance's ``api_usage``)."""

    requests: int = 0  # HTTP requests that got an answer
    prompts: int = 0  # prompts answered by the server (a request may carry several)
    cached: int = 0  # prompts answered from the response cache
    retries: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the server says it read from its prefix cache (OpenAI; vLLM with
    #                         --enable-prompt-tokens-details, which counts a batch's last prompt only)
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def describe_part(describe: Callable[[int], str] | None, members: Sequence[int]) -> Callable[[int], str] | None:
    """``describe`` for a part of the requests, each by its place in the part (j: request ``members[j]``)."""
    if describe is None:
        return None
    return lambda j: describe(members[j])


def api_key(env: str, model: str) -> str:
    """The key from the environment variable ``env`` (empty name: no key; vLLM servers need none)."""
    if not env:
        return "EMPTY"
    key = os.environ.get(env, "")
    if not key.strip():
        raise CredentialsError(f"model {model}: the environment variable {env} (the model table's column api_key_env) "
                               "is not set: export the API key in it before the run")
    return key.strip()


def _key(identity: dict, route: str, payload: dict) -> str:
    text = json.dumps({"identity": identity, "route": route, "payload": payload}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResponseCache:
    """Answers on disk in one SQLite file per model and endpoint (``DIR/responses.sqlite``: a paper-scale run asks
    10^5 prompts of a model, and one file per answer would spend as many inodes, which HPC quotas refuse). Safe for
    the client's threads (one connection, a lock) and for jobs of the same model side by side (SQLite's own file
    locking, write-ahead log, a busy timeout). An answer that an earlier version kept as a JSON file
    (``DIR/ab/abcd....json``) is read from there once and moved in."""

    FILE = "responses.sqlite"

    def __init__(self, directory: str | Path | None):
        self.directory = Path(directory) if directory else None
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            import sqlite3

            if self.directory is None:  # the callers keep nothing without a directory
                raise RuntimeError("a response cache without a directory has no database")
            self.directory.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.directory / self.FILE, timeout=60, check_same_thread=False, isolation_level=None)
            # two jobs opening a new file together: switching it to the write-ahead log and creating the table take
            # locks that SQLite refuses at once, without waiting out the busy timeout, where they would deadlock
            # ("database is locked"); the loser tries again
            deadline = time.monotonic() + 60
            for attempt in itertools.count(1):
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT NOT NULL)")
                    break
                except sqlite3.OperationalError as err:
                    if "locked" not in str(err) or time.monotonic() > deadline:
                        db.close()
                        raise
                    time.sleep(min(1.0, 0.02 * attempt))
            self._db = db
        return self._db

    def get(self, key: str) -> dict | None:
        if self.directory is None:
            return None
        with self._lock:
            row = self._conn().execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return json.loads(row[0])
        legacy = self.directory / key[:2] / f"{key}.json"
        try:
            answer = json.loads(legacy.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        self.put(key, answer)
        legacy.unlink(missing_ok=True)
        return answer

    def put(self, key: str, answer: dict) -> None:
        if self.directory is None:
            return
        with self._lock:
            self._conn().execute("INSERT OR REPLACE INTO answers (key, answer) VALUES (?, ?)",
                                 (key, json.dumps(answer)))

    def size(self) -> dict[str, int]:
        """What the cache holds: its answers and the file's bytes (the provenance's ``response_cache``)."""
        if self.directory is None:
            return {}
        with self._lock:
            n = self._conn().execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        files = [self.directory / f"{self.FILE}{suffix}" for suffix in ("", "-wal")]
        return {"answers": int(n), "bytes": sum(f.stat().st_size for f in files if f.exists())}

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class CompletionsClient:
    """``/v1/completions`` (and ``/v1/chat/completions``) of one server for one model, through the ``openai`` client
    (module docstring).

    ``identity``: what determines the answers besides the request (the model row's fields, the server software);
    ``batch``: prompts per HTTP request (1 for an API)."""

    def __init__(self, base_url: str, model: str, identity: dict, *, key: str = "EMPTY",
                 cache_dir: str | Path | None = None, concurrency: int = 8, timeout: float = 600.0,
                 retries: int = 6, batch: int = 1, name: str = ""):
        from openai import OpenAI

        self.base_url, self.model, self.identity, self.name = base_url, model, identity, name or model
        self.client = OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout)
        self.cache = ResponseCache(cache_dir)
        self.concurrency, self.retries, self.batch = max(1, concurrency), max(0, retries), max(1, batch)
        self.usage = Usage()
        self.cancelled = False
        self._lock = threading.Lock()

    def complete(self, prompts: Sequence[Any], params: dict, describe: Callable[[int], str] | None = None,
                 seeds: Sequence[int | None] | None = None, route: str = "completions") -> list[dict]:
        """One answer (a choice as a dict: text or message, logprobs, finish_reason and the server's extras) per
        prompt, in order. ``params``: the request's other parameters (``extra_body`` for the server's own);
        ``seeds``: a seed per prompt (prompts with different seeds go in different requests); ``route``:
        ``completions`` (a prompt: text or token ids) or ``chat`` (a prompt is a list of messages, one per
        request)."""
        seeds = list(seeds) if seeds is not None else [None] * len(prompts)
        answers: list[dict | None] = [None] * len(prompts)
        keys = []
        for i, (prompt, seed) in enumerate(zip(prompts, seeds)):
            payload = {**params, "prompt": prompt, **({"seed": seed} if seed is not None else {})}
            keys.append(_key(self.identity, route, payload))
            answers[i] = self.cache.get(keys[-1])
        todo = [i for i, a in enumerate(answers) if a is None]
        with self._lock:
            self.usage.cached += len(prompts) - len(todo)
        groups: dict[Any, list[int]] = {}
        for i in todo:
            groups.setdefault(seeds[i], []).append(i)
        size = self.batch if route == "completions" else 1
        batches = [idx[j:j + size] for idx in groups.values() for j in range(0, len(idx), size)]

        def send(batch: list[int]) -> None:
            seed = seeds[batch[0]]
            body = {**params, **({"seed": seed} if seed is not None else {})}
            prompt = prompts[batch[0]] if len(batch) == 1 else [prompts[i] for i in batch]
            what = describe(batch[0]) if describe else f"prompt {batch[0]}"
            choices = self._send(prompt, body, what, len(batch), route)
            for i, choice in zip(batch, choices):
                self.cache.put(keys[i], choice)
                answers[i] = choice

        filled = cast("list[dict]", answers)  # each answer is cached or sent (an unsent one raised)
        if len(batches) <= 1 or self.concurrency == 1:
            for b in batches:
                send(b)
            return filled
        pool = ThreadPoolExecutor(self.concurrency)
        try:
            for future in [pool.submit(send, b) for b in batches]:
                future.result()
        except BaseException:
            # a failed request, or the job stopped (SIGTERM, Ctrl-C): nothing more is sent, and nothing waits for
            # the requests in flight (the server is stopped next, which ends them)
            self.cancelled = True
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        return filled

    def _send(self, prompt: Any, body: dict, what: str, n: int, route: str) -> list[dict]:
        import openai

        extra = body.pop("extra_body", None)
        attempt = 0
        while True:
            try:
                if route == "chat":
                    response = self.client.chat.completions.create(model=self.model, messages=prompt,
                                                                   extra_body=extra, **body)
                else:
                    response = self.client.completions.create(model=self.model, prompt=prompt, extra_body=extra,
                                                              **body)
                break
            except (openai.AuthenticationError, openai.PermissionDeniedError) as err:
                raise CredentialsError(f"model {self.name}: {self.base_url} rejected the API key "
                                       f"({err.status_code}: {_message(err)})") from None
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as err:
                if attempt >= self.retries or self.cancelled:
                    raise RemoteError(f"{what}: {self.base_url} failed {attempt + 1} times, last: "
                                      f"{type(err).__name__}: {_message(err)}") from None
                wait = backoff(attempt, _retry_after(err))
                retries_log.info("model %s: %s (%s); retry %d of %d in %.1f s", self.name, type(err).__name__,
                            _message(err), attempt + 1, self.retries, wait)
                with self._lock:
                    self.usage.retries += 1
                time.sleep(wait)
                attempt += 1
            except openai.NotFoundError as err:
                raise UnknownModelError(f"model {self.name}: {self.base_url} serves no model {self.model!r} on its "
                                        f"{route} route ({err.status_code}: {_message(err)}): check the row's "
                                        "source (the model's name at the endpoint) and server (its base URL, "
                                        "with /v1)") from None
            except openai.APIStatusError as err:
                raise RemoteError(f"{what}: {self.base_url} refused the request ({err.status_code}: "
                                  f"{_message(err)})") from None
            except (openai.APIResponseValidationError, json.JSONDecodeError) as err:
                raise _not_json(what, self.base_url, f"{type(err).__name__}: {_message(err)}") from None
        if not hasattr(response, "model_dump"):  # the client hands back a body it could not read as JSON as text
            raise _not_json(what, self.base_url, " ".join(str(response).split())[:80])
        data = response.model_dump()
        choices = sorted(data.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != n:
            raise RemoteError(f"{what}: {self.base_url} answered {len(choices)} choices for {n} prompts")
        usage = data.get("usage") or {}
        with self._lock:
            self.usage.requests += 1
            self.usage.prompts += n
            self.usage.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.usage.cached_tokens += int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
            self.usage.completion_tokens += int(usage.get("completion_tokens") or 0)
        return choices


def _not_json(what: str, base_url: str, seen: str) -> RemoteError:
    """A server's answer that is not the API's JSON (a proxy's error page, a login form behind a wrong base URL)."""
    return RemoteError(f"{what}: {base_url} answered with something that is not the API's JSON ({seen}): is the "
                       "row's server the API's base URL (with /v1)?")


def _message(err: Exception) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        inner = error if isinstance(error, dict) else body
        if inner.get("message"):
            return " ".join(str(inner["message"]).split())[:300]
    return " ".join(str(err).split())[:300] or type(err).__name__


def backoff(attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
    """Seconds before retry ``attempt`` (0 first): BACKOFF_BASE_S x 2^attempt, at most BACKOFF_MAX_S, of which a
    random half (between half and the whole), or the server's Retry-After plus up to BACKOFF_BASE_S: the threads
    that a rate limit stopped together come back spread out, not in lockstep (a thundering herd)."""
    draw = (rng or random).random()
    if retry_after is not None:
        return retry_after + BACKOFF_BASE_S * draw
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** attempt) * (0.5 + 0.5 * draw)


def _retry_after(err: Exception) -> float | None:
    response = getattr(err, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, min(BACKOFF_MAX_S, float(value))) if value is not None else None
    except ValueError:
        return None
