"""The backends by name, and how a model-table row is loaded for its backend (docs/scaling.md, "Backends").

A row's backend is named by its columns (:func:`backend_name`): ``head: nli`` -> ``nli`` (a sequence classifier
through :class:`qclm.engine.nli.NliBackend`), else its ``backend`` column: ``local`` (the engine on the weights
loaded in this process, :class:`qclm.engine.backend.LocalBackend`), ``vllm`` (a vLLM server, started by the job
unless the row names one) or ``openai`` (an OpenAI-compatible API). :data:`qclm.engine.capabilities.FACTS` names each
one's class and loader ("module:NAME", imported on use by :func:`qclm.registry.resolve`: this module is light);
the scoring job and ``qclm probe`` load every row through :func:`load`. Every backend answers the
:class:`qclm.engine.backend.Backend` protocol (tests/test_backend.py checks each registered class against it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qclm.engine.capabilities import FACTS, backend_of
from qclm.models.checkpoints import checkpoint_provenance
from qclm.models.table import ModelSpec
from qclm.registry import resolve
from qclm.settings import ENGINE, defaults


def backend_name(spec: ModelSpec) -> str:
    """The backend that serves a model-table row (:func:`qclm.engine.capabilities.backend_of`)."""
    return backend_of(spec.backend, spec.head)


def backend_class(name: str) -> type:
    return resolve(FACTS[name].backend, f"backend {name}:")


class Loaded:
    """A model ready for a whole job: its backend (the weights loaded once, or a server started once), the
    tokenizer, their provenance and the prompt builder (the engine's self-check runs once per job). ``close()``
    stops what the job started (a vLLM server). Without ``backend``: the in-process backend of the row
    (:func:`in_process`) on ``model``."""

    def __init__(self, spec: ModelSpec, model, tokenizer, provenance: dict, engine: dict, backend=None,
                 resources=()):
        from qclm.prompts import PromptBuilder, PromptFormat

        self.spec = spec
        self.model = model
        self.tokenizer = tokenizer
        self.provenance = provenance
        self.engine = engine = {**defaults(ENGINE), **engine}
        self.resources = list(resources)
        self.backend = backend if backend is not None else in_process(spec, model, tokenizer, engine)
        self.format = PromptFormat.from_settings(spec.prompt_format, engine, spec.system_prompt)
        self.prompts = PromptBuilder(tokenizer, self.format)

    def close(self) -> None:
        while self.resources:
            self.resources.pop().__exit__(None, None, None)
        client = getattr(self.backend, "client", None)
        if client is not None:
            client.cache.close()  # the response cache's SQLite file, its write-ahead log folded in


def load(spec: ModelSpec, prepared_dir: str | Path | None, engine: dict,
         responses_dir: str | Path | None = None) -> Loaded:
    """The model of one row as its backend (:func:`backend_name`) serves it. ``responses_dir``: the server
    backends' response cache (``engine.response_cache``)."""
    name = backend_name(spec)
    loader = resolve(FACTS[name].loader, f"backend {name}:")
    return loader(spec, prepared_dir, {**defaults(ENGINE), **engine}, responses_dir)


def in_process(spec: ModelSpec, model, tokenizer, engine: dict):
    """The backend of weights loaded in this process: the NLI head's for a ``head: nli`` row (only the entailment
    probe asks it), else the engine."""
    cls = backend_class(backend_name(spec))
    return cls(model, tokenizer, engine, spec.name) if backend_name(spec) == "nli" else cls(model, tokenizer, engine)


def load_in_process(spec: ModelSpec, prepared_dir, engine: dict, responses_dir=None) -> Loaded:
    """A ``local`` row (or an NLI head): the weights loaded here."""
    from qclm.models.loading import load_model

    model, tokenizer, provenance = load_model(spec, prepared_dir, engine["device"])
    return Loaded(spec, model, tokenizer, provenance, engine)


def _remote(spec: ModelSpec, prepared_dir, engine: dict, responses_dir) -> tuple[Any, dict, dict, dict]:
    """What a server row's loaders share: the tokenizer here (an API row's renders chat prompts as messages), the
    client's identity (the response cache's key) and settings, and the provenance."""
    from qclm.models.loading import load_tokenizer

    identity: dict[str, Any] = {k: v for k, v in spec.as_row().items() if k != "server" or spec.backend == "openai"}
    if spec.kind == "local":
        checkpoint = checkpoint_provenance(spec.source)
        if checkpoint:
            identity["checkpoint"] = checkpoint
    common = {"cache_dir": responses_dir if engine["response_cache"] else None,
              "concurrency": engine["api_concurrency"], "timeout": engine["api_timeout"],
              "retries": engine["api_retries"], "name": spec.name}
    provenance = {"model": spec.name, "source": spec.source, "revision": spec.revision, "backend": spec.backend,
                  "dtype": spec.dtype, "quantization": spec.quantization or "none"}
    return load_tokenizer(spec, prepared_dir), identity, common, provenance


def load_openai(spec: ModelSpec, prepared_dir, engine: dict, responses_dir=None) -> Loaded:
    """An ``openai`` row: the API's client with the response cache."""
    from qclm.engine.capabilities import OPENINGS
    from qclm.engine.openai_api import OpenAIBackend
    from qclm.engine.remote import CompletionsClient, api_key

    tokenizer, identity, common, provenance = _remote(spec, prepared_dir, engine, responses_dir)
    client = CompletionsClient(spec.server, spec.source, identity, key=api_key(spec.api_key_env, spec.name), **common)
    return Loaded(spec, None, tokenizer, {**provenance, "server": spec.server}, engine,
                  OpenAIBackend(client, spec.logprobs, spec.opening or OPENINGS[0]))


def load_vllm(spec: ModelSpec, prepared_dir, engine: dict, responses_dir=None) -> Loaded:
    """A ``vllm`` row: the client with the response cache, and without ``server`` the server, started now and
    stopped by :meth:`Loaded.close` (or here, if anything after its start fails)."""
    from qclm.engine.remote import CompletionsClient, api_key
    from qclm.engine.vllm import VLLM_BATCH, VllmBackend, VllmServer

    tokenizer, identity, common, provenance = _remote(spec, prepared_dir, engine, responses_dir)
    resources = []
    if spec.server:
        url, served = spec.server, spec.source
    else:
        where = str(prepared_dir) if spec.needs_preparation else (
            str(Path(spec.source).expanduser()) if spec.kind == "local" else spec.source)
        log_path = Path(responses_dir).parent / f"{spec.name}.vllm.log" if responses_dir else None
        server = VllmServer(where, gpus=spec.gpus, dtype=spec.dtype, start_timeout=engine["server_start_timeout"],
                            served_name=spec.name, log_path=log_path, extra_args=vllm_args())
        resources.append(server.__enter__())
        url, served = server.url, spec.name
    try:
        client = CompletionsClient(url, served, identity, key=api_key(spec.api_key_env, spec.name),
                                   batch=VLLM_BATCH, **common)
        provenance.update({"server": spec.server or "started by the scoring job", "gpus": spec.job_gpus,
                           "tokenizer": type(tokenizer).__name__, "tokenizer_bos": str(tokenizer.bos_token),
                           "vllm": server_version(url)})
        return Loaded(spec, None, tokenizer, provenance, engine, VllmBackend(tokenizer, client, engine), resources)
    except BaseException:
        for r in resources:
            r.__exit__(None, None, None)
        raise


def vllm_args() -> list[str]:
    """Extra arguments of a server the job starts: on a machine without a GPU, vLLM's CPU build needs eager mode and
    a block size its CPU attention takes."""
    import shutil

    return [] if shutil.which("nvidia-smi") else ["--enforce-eager", "--block-size", "32"]


def server_version(url: str) -> str:
    """The server's software version (vLLM's /version), or empty."""
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/").removesuffix("/v1") + "/version", timeout=10) as r:
            return str(json.loads(r.read()).get("version", ""))
    except (OSError, ValueError):
        return ""


