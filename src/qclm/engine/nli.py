"""The NLI-head backend (imports torch): a model whose model-table row says ``head: nli`` is loaded as
``AutoModelForSequenceClassification`` (qclm.models.loading), and the backend registry (:mod:`qclm.jobs.backends`)
gives it this backend instead of the causal-LM engine; the entailment probe asks it. Each variant is one (premise,
hypothesis) pair, the condition's stimulus before the premise; p_raw is the head's probability of its entailment
label (softmax over the head's labels), the columns ``logp_true``, ``logp_false`` and ``logp_neither`` the
log-probabilities of its entailment, contradiction and neutral labels.

Only the entailment probe scores such a model: every other request kind is refused with one line naming it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from qclm.engine.scorers import Stats

#: the label names each answer maps to (a prefix, case-insensitive: "ENTAILMENT", "entailment", "entails")
LABELS = {"true": "entail", "false": "contradict", "neither": "neutral"}


def label_index(config, prefix: str) -> int | None:
    """The index of the head's label whose name starts with ``prefix`` (None: no such label)."""
    for index, name in (getattr(config, "id2label", None) or {}).items():
        if str(name).lower().startswith(prefix):
            return int(index)
    return None


class NliBackend:
    """Pairs through a sequence classifier, batched with padding (``engine.batch_size`` pairs a forward pass)."""

    nli = True

    def __init__(self, model, tokenizer, engine: dict, name: str = ""):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.batch_size = int(engine.get("batch_size", 16))
        self.stats = Stats(method="nli-head")
        self.index = {answer: label_index(model.config, prefix) for answer, prefix in LABELS.items()}
        if self.index["true"] is None:
            labels = dict(getattr(model.config, "id2label", None) or {})
            raise ValueError(f"model {name}: the model table says head nli, and its head has no entailment label "
                             f"(id2label {labels})")
        if tokenizer.pad_token is None:  # causal tokenizers: pad with end-of-sequence, masked out
            tokenizer.pad_token = tokenizer.eos_token
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id

    def classify(self, pairs: Sequence[tuple[str, str]], progress: Callable[[int], None] | None = None
                 ) -> np.ndarray:
        """The head's label probabilities (float64, one row per pair)."""
        device = next(self.model.parameters()).device
        out = []
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start:start + self.batch_size]
            enc = self.tokenizer([p for p, _ in chunk], [h for _, h in chunk], padding=True, return_tensors="pt")
            enc = {k: v.to(device) for k, v in enc.items()}
            with torch.no_grad():
                logits = self.model(**enc).logits.double()
            out.append(torch.softmax(logits, -1).cpu().numpy())
            self.stats.tokens_computed += int(enc["attention_mask"].sum())
            self.stats.forward_calls += 1
            if progress:
                progress(len(chunk))
        return np.concatenate(out) if out else np.zeros((0, len(self.model.config.id2label)))

    def log_answers(self, probs: np.ndarray) -> np.ndarray:
        """log P of the entailment, contradiction and neutral labels (NaN for a label the head lacks)."""
        cols = [np.log(probs[:, i]) if i is not None else np.full(len(probs), np.nan) for i in self.index.values()]
        return np.stack(cols, axis=1)

    def _refuse(self, *args, **kwargs):
        raise ValueError(f"model {self.name} has an NLI head (model table column head): only entailment probes can "
                         "score it")

    loglikelihood = choose = choose_chain = generate = score_tokens = tokenize = _refuse
