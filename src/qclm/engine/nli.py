"""The NLI-head backend (imports torch): a model whose model-table row says ``head: nli`` is loaded as
``AutoModelForSequenceClassification`` (qclm.models.loading), and the backend registry (:mod:`qclm.jobs.backends`)
gives it this backend instead of the causal-LM engine; the entailment probe asks it. Each variant is one (premise,
hypothesis) pair, a ``classify`` request (:class:`qclm.engine.requests.ClassifyRequest`), the condition's stimulus
before the premise; p_raw is the head's probability of its entailment label (softmax over the head's labels), the
columns ``logp_true``, ``logp_false`` and ``logp_neither`` the log-probabilities of its entailment, contradiction
and neutral labels.

It answers ``classify`` requests only (qclm.engine.capabilities.FACTS): every other request kind is refused with one
line naming it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from qclm.engine.requests import CLASSIFY_ANSWERS, ClassifyRequest, ClassifyResult
from qclm.engine.scorers import Stats


def label_index(config, prefix: str) -> int | None:
    """The index of the head's label whose name starts with ``prefix`` (None: no such label)."""
    for index, name in (getattr(config, "id2label", None) or {}).items():
        if str(name).lower().startswith(prefix):
            return int(index)
    return None


class NliBackend:
    """Pairs through a sequence classifier, batched with padding (``engine.batch_size`` pairs a forward pass)."""

    #: a local model, batched with padding: the request loop sends it one context at a time (qclm.engine.asking)
    per_context = True

    def __init__(self, model, tokenizer, engine: dict, name: str = ""):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.batch_size = int(engine.get("batch_size", 16))
        self.stats = Stats(method="nli-head")
        self.index = {answer: label_index(model.config, prefix) for answer, prefix in CLASSIFY_ANSWERS.items()}
        if self.index["true"] is None:
            labels = dict(getattr(model.config, "id2label", None) or {})
            raise ValueError(f"model {name}: the model table says head nli, and its head has no entailment label "
                             f"(id2label {labels})")
        if tokenizer.pad_token is None:  # causal tokenizers: pad with end-of-sequence, masked out
            tokenizer.pad_token = tokenizer.eos_token
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id

    def classify(self, requests: Sequence[ClassifyRequest], describe: Callable[[int], str] | None = None,
                 progress: Callable[[int], None] | None = None) -> list[ClassifyResult]:
        """The head's label probabilities of each pair (float64), and log P of its entailment, contradiction and
        neutral labels (NaN for a label the head lacks)."""
        device = next(self.model.parameters()).device
        labels = tuple(self.index.items())
        out: list[ClassifyResult] = []
        for start in range(0, len(requests), self.batch_size):
            chunk = requests[start:start + self.batch_size]
            enc = self.tokenizer([r.premise for r in chunk], [r.hypothesis for r in chunk], padding=True,
                                 return_tensors="pt")
            enc = {k: v.to(device) for k, v in enc.items()}
            with torch.no_grad():
                logits = self.model(**enc).logits.double()
            for probs in torch.softmax(logits, -1).cpu().numpy():
                logs = [np.log(probs[i]) if i is not None else np.nan for _, i in labels]
                out.append(ClassifyResult(tuple(map(float, probs)), (float(logs[0]), float(logs[1]), float(logs[2])),
                                          labels))
            self.stats.tokens_computed += int(enc["attention_mask"].sum())
            self.stats.forward_calls += 1
            if progress:
                progress(len(chunk))
        return out

    def _refuse(self, *args, **kwargs):
        raise ValueError(f"model {self.name} has an NLI head (model table column head): only entailment probes can "
                         "score it")

    loglikelihood = choose = choose_chain = generate = score_tokens = tokenize = _refuse
