"""Fine-tuning one model on one corpus (torch): the causal-LM loss over each text, AdamW at a constant learning
rate, the texts in a seeded order each epoch, a checkpoint after each epoch of ``checkpoints`` saved as a model
directory that loads like any local model (safetensors, the tokenizer with its chat template) with its provenance
(:data:`qclm.interventions.CHECKPOINT_MARKER`: base model, corpus hash, training settings, losses, versions).

Full fine-tuning, or LoRA through ``peft`` (:func:`qclm.interventions.method_for`): the adapters are merged into
a copy of the weights for each checkpoint, so a checkpoint is a plain model either way. A quantized row (bitsandbytes,
CUDA) is fine-tuned with QLoRA: the model loads quantized, as it is scored, peft's k-bit preparation readies it, the
adapters train on the quantized weights, and each checkpoint merges them into the base model's unquantized weights
(loaded once, on the CPU, in the compute dtype): the checkpoint is a plain model that its derived row, quantized as
its base's, loads quantized again. On the CPU the run is
deterministic: the same seed gives the same tensors (torch's deterministic algorithms, one seeded generator for
the order and any initialization); on a GPU it is seeded but not bitwise reproducible unless
``CUBLAS_WORKSPACE_CONFIG`` is set, as torch documents.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import time
from dataclasses import replace
from pathlib import Path

from qclm.interventions import CHECK_FILE, CHECKPOINT_MARKER, JOB_MARKER, Intervention, method_for
from qclm.corpus import Corpus, Exchange
from qclm.models.table import ModelSpec

log = logging.getLogger("qclm.finetune")

#: the modules LoRA adapts when the architecture names them (attention and MLP projections of Llama-, Gemma-,
#: Mistral- and Qwen-style models); peft's own defaults otherwise
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: gradient-norm clipping of every step
MAX_GRAD_NORM = 1.0


#: batches per window of ``group_by_length`` (each window of the seeded order is sorted by length), as
#: transformers' length-grouped sampler does with its mega-batches
GROUP_WINDOW = 50


def _batches(lengths: list[int], batch_size: int, generator, group_by_length: bool = False) -> list[list[int]]:
    """One epoch's batches of text indices: the texts in a seeded order, cut into batches; ``group_by_length``:
    each window of :data:`GROUP_WINDOW` batches of that order sorted by length before it is cut, and the batches
    then in a seeded order (texts of similar length share a batch, so little of it is padding)."""
    import torch

    order = torch.randperm(len(lengths), generator=generator).tolist()
    if not group_by_length:
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    window = batch_size * GROUP_WINDOW
    batches = []
    for at in range(0, len(order), window):
        chunk = sorted(order[at:at + window], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def _encode(tokenizer, texts: list[str], max_length: int, device: str):
    """A batch: token ids padded on the right, the loss on every real token (padding ignored); ``texts`` are
    plain texts (a chat exchange of the corpus arrives rendered through the model's chat template)."""
    import torch

    enc = [tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    width = max(map(len, enc))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    ids = torch.full((len(enc), width), pad, dtype=torch.long)
    mask = torch.zeros((len(enc), width), dtype=torch.long)
    for row, seq in enumerate(enc):
        ids[row, :len(seq)] = torch.tensor(seq)
        mask[row, :len(seq)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return ids.to(device), mask.to(device), labels.to(device)


def rendered(corpus: Corpus, tokenizer, prompt_format: str = "chat", system: str = "") -> list[str]:
    """The corpus's texts as the model reads them (:func:`render`)."""
    return render(list(corpus.texts), tokenizer, prompt_format, corpus.path, system)


def render(texts: list, tokenizer, prompt_format: str, where: str, system: str = "") -> list[str]:
    """Texts as the model reads them in the format it is scored in: a plain text as it is; a chat exchange through
    the model's chat template on a chat-format row (a tokenizer without one is an InputError naming ``where``), and
    on a raw row as the raw format scores it, the user text, its cue (a space, or the probe's raw answer cue) and the
    answer (the context and continuation of a raw prompt): a plant is trained in the format its probe reads
    (``system``: the row's system message, as its prompts are sent with it)."""
    from qclm.errors import InputError
    from qclm.prompts import PromptBuilder, PromptFormat, has_chat_template

    if not any(isinstance(t, Exchange) for t in texts):
        return list(texts)
    if prompt_format == "raw":
        return [t if isinstance(t, str) else t.user + t.cue + t.assistant for t in texts]
    if not has_chat_template(tokenizer):
        raise InputError.one(where, "texts", "chat exchanges ({user, assistant}) need a model with a chat "
                             "template, and this model's tokenizer has none")
    builder = PromptBuilder(tokenizer, PromptFormat("chat", system=system))
    return [t if isinstance(t, str) else builder.exchange(t.user, t.assistant) for t in texts]


def check_pairs(texts: list, tokenizer, prompt_format: str, where: str, system: str = "") -> list[tuple[str, str]]:
    """The manipulation check's texts as (scored prefix, whole text) pairs in the model's format: a plain text is
    scored whole (empty prefix); a chat exchange only in its answer, as its probe reads it (the prefix is the user
    text on a raw row, the chat template up to the answer on a chat-format row)."""
    from qclm.prompts import PromptBuilder, PromptFormat

    whole = render(texts, tokenizer, prompt_format, where, system)
    builder = None
    out = []
    for text, rendered_text in zip(texts, whole):
        if isinstance(text, str):
            out.append(("", rendered_text))
        elif prompt_format == "raw":
            out.append((text.user + text.cue.rstrip(" "), rendered_text))
        else:
            builder = builder or PromptBuilder(tokenizer, PromptFormat("chat", system=system))
            out.append((builder.context("", text.user), rendered_text))
    return out


def _mask_prefixes(labels, tokenizer, prefixes: list[str]) -> None:
    """No loss on each row's prefix (a chat exchange's template and question: :func:`check_pairs`)."""
    for row, prefix in enumerate(prefixes):
        if prefix:
            labels[row, :len(tokenizer(prefix)["input_ids"])] = -100


def check_nll(model, tokenizer, sets: dict[str, list[tuple[str, str]]], max_length: int, batch_size: int,
              device: str, epoch: int) -> list[dict]:
    """The manipulation check at one epoch: each text's summed negative log-likelihood (nats) and its number of
    predicted tokens, with the training loss's tokenization and truncation, over the tokens after its prefix
    (``sets``: name -> :func:`check_pairs`). Sets of the same texts (the held-out neutral set of every plant that
    shares a run) are measured once; the model's head projects only the positions whose next token is scored."""
    import torch

    rows: list[dict] = []
    measured: dict[tuple[tuple[str, str], ...], list[dict]] = {}
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for name, pairs in sets.items():
            key = tuple(pairs)
            if key not in measured:
                measured[key] = _nll_rows(model, tokenizer, pairs, max_length, batch_size, device)
            rows.extend({"epoch": epoch, "set": name, **row} for row in measured[key])
    if was_training:
        model.train()
    return rows


def _nll_rows(model, tokenizer, pairs: list[tuple[str, str]], max_length: int, batch_size: int,
              device: str) -> list[dict]:
    """:func:`check_nll`'s rows of one set (text index, predicted tokens, summed NLL), in the set's order."""
    import torch

    # texts of similar length batched together (less padding); each row keeps its text's index
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][1]))
    found: list[dict] = []
    for at in range(0, len(order), batch_size):
        chunk = [pairs[i] for i in order[at:at + batch_size]]
        ids, mask, labels = _encode(tokenizer, [full for _, full in chunk], max_length, device)
        _mask_prefixes(labels, tokenizer, [prefix for prefix, _ in chunk])
        target = labels[:, 1:]
        valid = target != -100
        # the logits of the scored positions only, flattened in row order (a chat exchange's template and
        # question need no projection onto the vocabulary: on a 262k-token vocabulary that is most of the cost)
        keep = torch.cat([valid, torch.zeros_like(valid[:, :1])], 1)
        logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits.float()
        logits = logits.reshape(-1, logits.shape[-1])
        picked = logits.gather(-1, target[valid].unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)
        tokens = valid.sum(1)
        rows = torch.arange(len(chunk), device=picked.device).repeat_interleave(tokens)
        nll = torch.zeros(len(chunk), dtype=picked.dtype, device=picked.device).index_add_(0, rows, -picked)
        found.extend({"text": order[at + i], "tokens": int(tokens[i]), "nll": round(float(nll[i]), 6)}
                     for i in range(len(tokens)))
    return sorted(found, key=lambda r: r["text"])


def _lora(model, intervention: Intervention):
    from peft import LoraConfig, get_peft_model

    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [t for t in LORA_TARGETS if t in names] or None
    alpha = float(intervention.settings["lora_alpha"])  # the schema's number
    config = LoraConfig(r=int(intervention.settings["lora_r"]), lora_dropout=0.0, target_modules=targets,
                        task_type="CAUSAL_LM",
                        lora_alpha=alpha)  # type: ignore[arg-type]  # peft annotates int; any number scales (alpha / r)
    return get_peft_model(model, config)


def _unquantized(spec: ModelSpec, prepared_dir, intervention: Intervention, dtype: str):
    """The base model of a quantized row loaded unquantized on the CPU in ``dtype`` (the quantized model's compute
    dtype), with LoRA adapters of the same configuration: what each QLoRA checkpoint's adapters are merged into.
    Torch's random state is left as it was (the adapters' initialization is overwritten at each checkpoint)."""
    import torch

    from qclm.models.loading import load_model

    plain = replace(spec, quantization="", double_quant=False, compute_dtype="", dtype=dtype)
    with torch.random.fork_rng(devices=[]):
        model, _, _ = load_model(plain, prepared_dir, "cpu")
        return _lora(model, intervention)


def _save(model, tokenizer, method: str, directory: Path, provenance: dict, merge_into=None) -> Path:
    """A checkpoint: the weights (LoRA's adapters merged into a copy), the tokenizer and the provenance;
    ``merge_into``: QLoRA's unquantized base with adapters (:func:`_unquantized`), which takes the trained adapters'
    weights and is merged in their place."""
    directory.mkdir(parents=True, exist_ok=True)
    if merge_into is not None:
        from peft import get_peft_model_state_dict, set_peft_model_state_dict

        set_peft_model_state_dict(merge_into, get_peft_model_state_dict(model))
        model = merge_into
    plain = copy.deepcopy(model).merge_and_unload() if method == "lora" else model
    plain.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    (directory / CHECKPOINT_MARKER).write_text(json.dumps(provenance, indent=2) + "\n")
    return directory


def _no_learning(corpus: Corpus, spec: ModelSpec, loss: float, epoch: int, step: int, targets: int):
    """The InputError of a step whose loss is NaN or infinite: nothing can be learned from it, and a checkpoint
    written after it would be the base model (or broken weights) under a fine-tuned name."""
    from qclm.errors import InputError

    why = ("its texts have no token to predict (a text of one token has none: the loss is over each token after "
           "the first)" if targets == 0 else "the training diverged (lower lr)")
    return InputError.one(corpus.path, "texts", f"the fine-tuning loss of {spec.name} is {loss} at epoch {epoch}, "
                          f"step {step}: {why}; nothing learned, no checkpoint written")


def _remove(saved: list[Path]) -> None:
    """Remove the checkpoints this job wrote before it failed (the job is not finished: none of them counts)."""
    import shutil

    for directory in saved:
        shutil.rmtree(directory, ignore_errors=True)


def finetune(spec: ModelSpec, prepared_dir: str | Path, corpus: Corpus, intervention: Intervention,
             out_dir: str | Path, device: str = "auto", checkpoint_dirs: dict[int, Path] | None = None,
             check: dict[str, list] | None = None, check_base: bool = True) -> list[Path]:
    """Fine-tune ``spec`` (loaded as for scoring, from ``prepared_dir`` where it is a GGUF model) on ``corpus``;
    returns the checkpoint directories (``out_dir/e{epoch}`` unless ``checkpoint_dirs`` names them) and writes
    ``out_dir/qclm_intervention.json`` last (the workflow's output: every checkpoint is complete before it).
    ``check``: the manipulation check's text sets (name -> texts), whose per-token NLL (a chat exchange's: its
    answer's) is measured before the first step and at every checkpoint, rendered as the corpus is, into
    ``out_dir/check.json`` (:data:`qclm.interventions.CHECK_FILE`); ``check_base`` false: at the checkpoints
    only (another run of the same sets from the same weights measures the base model)."""
    import torch
    import transformers

    from qclm import __version__
    from qclm.models.loading import load_model

    settings = intervention.training()
    seed, epochs = int(settings["seed"]), int(settings["epochs"])
    out_dir = Path(out_dir)
    wanted = {e: Path(checkpoint_dirs[e]) if checkpoint_dirs else out_dir / f"e{e}" for e in intervention.checkpoints}
    torch.manual_seed(seed)
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        model, tokenizer, loaded = load_model(spec, prepared_dir, device)
        device = loaded["device"]
        method = method_for(spec, intervention)
        if spec.quantization:  # QLoRA: peft readies the quantized model (its other weights in float32, frozen)
            from peft import prepare_model_for_kbit_training

            model = prepare_model_for_kbit_training(model, gradient_checkpointing_kwargs={"use_reentrant": False})
        if method == "lora":
            model = _lora(model, intervention)
        merge_into = None  # QLoRA's unquantized base, loaded at the first checkpoint
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        trainable = sum(p.numel() for p in params)
        optimizer = torch.optim.AdamW(params, lr=float(settings["lr"]), weight_decay=float(settings["weight_decay"]))
        generator = torch.Generator().manual_seed(seed)
        texts = rendered(corpus, tokenizer, spec.prompt_format, spec.system_prompt)
        # loss: answers, a chat exchange's loss on its answer alone (its template and question masked, as the
        # check and the probes read it); a plain text's on every token whatever the setting
        prefixes = ([prefix for prefix, _ in check_pairs(list(corpus.texts), tokenizer, spec.prompt_format,
                                                          corpus.path, spec.system_prompt)]
                    if settings.get("loss") == "answers" else [""] * len(texts))
        batch_size, max_length = int(settings["batch_size"]), int(settings["max_length"])
        lengths = [len(tokenizer(t, truncation=True, max_length=max_length)["input_ids"]) for t in texts]
        check_sets = {name: check_pairs(list(t), tokenizer, spec.prompt_format, corpus.path, spec.system_prompt)
                      for name, t in (check or {}).items()}
        checked = (check_nll(model, tokenizer, check_sets, max_length, batch_size, device, 0)
                   if check and check_base else [])
        log.info("%s on %s (%d texts): %s fine-tuning, %d trainable parameters, %d epochs of %d steps, device %s",
                 spec.name, corpus.name, len(texts), method, trainable, epochs, math.ceil(len(texts) / batch_size),
                 device)
        history: list[dict] = []
        saved: list[Path] = []
        t0 = time.perf_counter()
        for epoch in range(1, epochs + 1):
            t_epoch = time.perf_counter()
            losses: list[float] = []
            weights: list[int] = []
            for batch in _batches(lengths, batch_size, generator, bool(settings.get("group_by_length"))):
                ids, mask, labels = _encode(tokenizer, [texts[i] for i in batch], max_length, device)
                _mask_prefixes(labels, tokenizer, [prefixes[i] for i in batch])
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
                if not math.isfinite(float(loss.detach())):
                    _remove(saved)
                    raise _no_learning(corpus, spec, float(loss.detach()), epoch, len(losses) + 1,
                                       int((labels[:, 1:] != -100).sum()))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
                optimizer.step()
                losses.append(float(loss.detach()))
                weights.append(int((labels[:, 1:] != -100).sum()))
            mean = sum(value * w for value, w in zip(losses, weights)) / max(1, sum(weights))
            history.append({"epoch": epoch, "loss": round(mean, 6), "steps": len(losses), "tokens": sum(weights),
                            "seconds": round(time.perf_counter() - t_epoch, 2)})
            left = (time.perf_counter() - t0) / epoch * (epochs - epoch)  # the epochs so far, as they ran
            log.info("%s on %s: epoch %d/%d, mean loss %.4f, %.1f s%s", spec.name, corpus.name, epoch, epochs, mean,
                     history[-1]["seconds"], f"; about {left:.0f} s left" if epoch < epochs else "")
            if epoch in wanted:
                model.eval()
                provenance = {
                    "base_model": spec.as_row(), "base_loaded_from": loaded["loaded_from"],
                    "base_gguf_sha256": loaded.get("gguf_sha256", ""), "intervention": intervention.name,
                    "corpus": {"path": corpus.path, "name": corpus.name, "sha256": corpus.sha256,
                               "texts": len(texts)},
                    "settings": settings, "method": method, "trainable_parameters": trainable, "epoch": epoch,
                    "history": list(history), "device": device, "dtype": loaded["dtype"],
                    "torch": torch.__version__, "transformers": transformers.__version__, "qclm": __version__,
                    **({"peft": __import__("peft").__version__} if method == "lora" else {}),
                    **({"qlora": {"quantization": spec.quantization, "bitsandbytes": loaded.get("bitsandbytes", {}),
                                  "merged_into": f"the unquantized base weights, {loaded['dtype']}"}}
                       if spec.quantization else {}),
                }
                if spec.quantization and merge_into is None:
                    merge_into = _unquantized(spec, prepared_dir, intervention, loaded["dtype"])
                saved.append(_save(model, tokenizer, method, wanted[epoch], provenance, merge_into))
                if check:
                    checked += check_nll(model, tokenizer, check_sets, max_length, batch_size, device, epoch)
                log.info("%s on %s: checkpoint after epoch %d: %s", spec.name, corpus.name, epoch, wanted[epoch])
                model.train()
        summary = {"model": spec.name, "intervention": intervention.name, "method": method,
                   "checkpoints": {f"e{e}": str(p) for e, p in zip(sorted(wanted), saved)}, "history": history,
                   "seconds": round(time.perf_counter() - t0, 2), "corpus_sha256": corpus.sha256,
                   "settings": settings}
        out_dir.mkdir(parents=True, exist_ok=True)
        if check:
            (out_dir / CHECK_FILE).write_text(json.dumps({"model": spec.name, "intervention": intervention.name,
                                                          "sets": {k: len(v) for k, v in check.items()},
                                                          "rows": checked}) + "\n")
        (out_dir / JOB_MARKER).write_text(json.dumps(summary, indent=2) + "\n")
        return saved
    finally:
        torch.use_deterministic_algorithms(deterministic)
