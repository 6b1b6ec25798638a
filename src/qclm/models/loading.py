"""Preparing and loading a model's weights (torch): GGUF sources are *prepared* once, de-quantized by
transformers to float32 and saved as a safetensors directory, so scoring jobs load in seconds instead of
de-quantizing every time; loading is safe by default (no remote code, no pickle checkpoints)."""

from __future__ import annotations

import functools
import json
import logging
import math
import shutil
import tempfile
from pathlib import Path

from qclm.inputs import sha256_file
from qclm.models.checkpoints import checkpoint_provenance
from qclm.models.table import FOUR_BIT_TYPES, PREPARED_MARKER, ModelSpec, gguf_cache, gguf_path

log = logging.getLogger("qclm.models")


def prepare_model(spec: ModelSpec, out_dir: str | Path) -> Path:
    """De-quantize a GGUF model once into a float32 safetensors directory with its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    gguf = gguf_path(spec, gguf_cache(out_dir))
    log.info("model %s: de-quantizing %s (%s)", spec.name, gguf, spec.source)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # the weights are now plain float32; drop the GGUF quantizer so save_pretrained writes them
    model.hf_quantizer = None  # type: ignore[assignment]  # torch types Module.__setattr__ Tensor | Module: any works
    model.is_quantized = False  # type: ignore[assignment]  # torch types Module.__setattr__ Tensor | Module: any works
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # the models directory is the user's cache, shared by every run: each preparation writes a directory of its
    # own and the first to finish is kept
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / PREPARED_MARKER).write_text(json.dumps({
        "name": spec.name, "source": spec.source, "gguf_file": gguf.name, "gguf_sha256": sha256_file(gguf),
    }, indent=2))
    if (out_dir / PREPARED_MARKER).exists():  # another run prepared it meanwhile
        shutil.rmtree(tmp)
        return out_dir
    if out_dir.exists():  # an unfinished one, or what a workflow job made for its output
        shutil.rmtree(out_dir)
    try:
        tmp.rename(out_dir)
    except OSError:  # another run's came first
        if not (out_dir / PREPARED_MARKER).exists():
            raise
        shutil.rmtree(tmp)
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


#: seconds the hub may take to say whether it has a model that is not in the local hub cache
HUB_TIMEOUT_S = 10


@functools.cache
def hub_snapshot(spec: ModelSpec) -> str | None:
    """The directory of the local hub cache (``HF_HOME``) a hub row loads from, where ``HF_HUB_OFFLINE`` is set or
    the hub cannot be reached and the model is there (said in the log): loaded from its files, nothing asks the
    network again. None where the hub answered (transformers loads the row by its id) and for every other row.
    Asked of the hub once a process, with no retries, before transformers would retry every file for a minute (a
    command that loads the tokenizer, then the model, asks once): a model the hub does not have (or gates, or lacks
    the row's revision of), or that is neither in the local cache nor reachable, is a
    :class:`~qclm.engine.remote.RowProblem` (one line, exit 2) within seconds."""
    if spec.kind != "hub":
        return None
    from huggingface_hub import constants, model_info, snapshot_download, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    from qclm.engine.remote import RowProblem

    revision = spec.revision or None
    cached = isinstance(try_to_load_from_cache(spec.source, "config.json", revision=revision), str)
    fix = (f"download it where the hub is reachable (hf download {spec.source}) into the local hub cache "
           f"({constants.HF_HUB_CACHE}; HF_HOME moves it), or give a local checkpoint directory as the row's source")
    where = f"model {spec.name}: hub id {spec.source}" + (f" (revision {revision})" if revision else "")

    def local_copy() -> str:
        return str(snapshot_download(spec.source, revision=revision, local_files_only=True))

    if constants.HF_HUB_OFFLINE:
        if cached:
            return local_copy()
        raise RowProblem(f"{where}: not in the local hub cache, and HF_HUB_OFFLINE is set: {fix}")
    try:
        model_info(spec.source, revision=revision, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        raise RowProblem(f"{where}: gated on the hub: accept its terms there and set HF_TOKEN") from None
    except RevisionNotFoundError:
        raise RowProblem(f"{where}: the hub has no such revision (the row's revision column)") from None
    except RepositoryNotFoundError:
        raise RowProblem(f"{where}: the hub has no such model (a private one needs HF_TOKEN)") from None
    except Exception as err:  # noqa: BLE001 - any failure to reach the hub (DNS, refused, timeout, a 5xx)
        cause = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        if cached:
            log.warning("model %s: the hub cannot be reached (%s): loading the copy in the local hub cache",
                        spec.name, cause)
            return local_copy()
        raise RowProblem(f"{where}: not in the local hub cache, and the hub cannot be reached ({cause}): "
                         f"{fix}") from None
    return None


def load_tokenizer(spec: ModelSpec, prepared_dir: str | Path | None = None, local_only: bool = False):
    """The model's tokenizer alone (``qclm render``, validation): from the prepared directory, else from the
    GGUF file, a local checkpoint or the hub (``local_only``: the local hub cache only, never a download)."""
    if spec.backend == "openai":  # the provider tokenizes; chat prompts go as messages (qclm.engine.openai_api)
        from qclm.engine.openai_api import ApiChat

        return ApiChat()
    from transformers import AutoTokenizer

    if spec.needs_preparation:
        if prepared_dir is not None and (Path(prepared_dir) / PREPARED_MARKER).exists():
            return AutoTokenizer.from_pretrained(str(prepared_dir))
        gguf = gguf_path(spec, gguf_cache(prepared_dir))
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    where = str(Path(spec.source).expanduser()) if spec.kind == "local" else spec.source
    revision = None if spec.kind == "local" else (spec.revision or None)
    snapshot = None if local_only else hub_snapshot(spec)
    if snapshot:
        where, revision = snapshot, None
    return AutoTokenizer.from_pretrained(where, revision=revision, trust_remote_code=spec.trust_remote_code,
                                         local_files_only=local_only)


def bnb_settings(spec: ModelSpec, dtype: str) -> dict:
    """The bitsandbytes settings of a quantized row (transformers' ``BitsAndBytesConfig`` keywords, dtypes by name):
    8-bit; or 4-bit of the row's type (:data:`qclm.models.table.FOUR_BIT_TYPES`), its double quantization and its
    compute dtype (the column, else ``dtype``: the row's dtype as resolved for the GPU)."""
    if spec.quantization == "8bit":
        return {"load_in_8bit": True}
    return {"load_in_4bit": True, "bnb_4bit_quant_type": FOUR_BIT_TYPES[spec.quantization],
            "bnb_4bit_use_double_quant": spec.double_quant, "bnb_4bit_compute_dtype": spec.compute_dtype or dtype}


def bnb_config(settings: dict):
    """transformers' ``BitsAndBytesConfig`` of :func:`bnb_settings` (the compute dtype as torch's)."""
    import torch
    from transformers import BitsAndBytesConfig

    compute = settings.get("bnb_4bit_compute_dtype")
    return BitsAndBytesConfig(**settings | ({"bnb_4bit_compute_dtype": getattr(torch, compute)} if compute else {}))


def load_model(spec: ModelSpec, prepared_dir: str | Path | None = None, device: str = "auto"):
    """Load tokenizer and model for scoring, safely: remote code only when the row turns it on,
    safetensors only unless the row allows pickle checkpoints, bitsandbytes only on CUDA.
    Returns (model, tokenizer, provenance dict)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

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
        elif snapshot := hub_snapshot(spec):  # the local hub cache's copy, by its path: nothing asks the hub again
            where, revision, prepared = snapshot, None, {"commit": Path(snapshot).name}
    if spec.allow_pickle:
        log.warning("model %s: allow_pickle is ON (set in the model table): a pickle checkpoint may be loaded, "
                    "and loading a pickle can run code", spec.name)
    kwargs = {"dtype": dtype, "trust_remote_code": spec.trust_remote_code, "revision": revision,
              "use_safetensors": None if spec.allow_pickle else True}
    if spec.trust_remote_code:
        log.warning("model %s: trust_remote_code is ON (set in the model table): its own code will run", spec.name)
    quantized = bnb_settings(spec, str(dtype).removeprefix("torch.")) if spec.quantization else {}
    if spec.quantization:
        if not device.startswith("cuda"):
            raise RuntimeError(f"model {spec.name}: quantization {spec.quantization} needs a CUDA GPU "
                               f"(bitsandbytes); this run's device is {device}")
        kwargs["quantization_config"] = bnb_config(quantized)
    if device.startswith("cuda"):
        kwargs["device_map"] = {"": device}
    tokenizer = AutoTokenizer.from_pretrained(where, revision=revision, trust_remote_code=spec.trust_remote_code)
    auto = AutoModelForSequenceClassification if spec.head == "nli" else AutoModelForCausalLM
    model = auto.from_pretrained(where, **kwargs)
    if not device.startswith("cuda"):
        model.to(device)  # type: ignore[arg-type]  # transformers wraps .to (functools.wraps): mypy binds no self
    model.eval()
    provenance = {
        "model": spec.name, "source": spec.source, "revision": spec.revision, "loaded_from": where,
        "gguf_sha256": prepared.get("gguf_sha256", ""),
        "commit": getattr(model.config, "_commit_hash", None) or prepared.get("commit", ""),
        "dtype": str(dtype).replace("torch.", ""), "device": device, "quantization": spec.quantization or "none",
        "tokenizer": type(tokenizer).__name__, "tokenizer_bos": str(tokenizer.bos_token),
        "torch": torch.__version__, "transformers": transformers.__version__,
        **({"head": spec.head} if spec.head else {}),
        **({"bitsandbytes": quantized} if quantized else {}),
    }
    checkpoint = checkpoint_provenance(where) if spec.kind == "local" else None
    if checkpoint:  # a checkpoint of a fine-tuning intervention: what it was fine-tuned from, on what, how
        provenance["finetuned"] = checkpoint
    return model, tokenizer, provenance
