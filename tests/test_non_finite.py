"""A non-finite log-probability fails the scoring job naming its variant and stimulus."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT, likert_cell, load_dir, loaded_model, spec_for
from qclm.contexts import ContextSettings
from qclm.engine.backend import NumericalError
from qclm.jobs.score_model import score_cell

STAI_S = ROOT / "resources" / "questionnaires" / "stai_s.yaml"
STRESS = ROOT / "resources" / "stimuli" / "stress.yaml"


def test_nan_model_fails_with_the_first_variant(tiny_llama_dir):
    import torch

    model, tok = load_dir(tiny_llama_dir)
    with torch.no_grad():
        model.model.norm.weight.fill_(float("nan"))
    spec = spec_for(tiny_llama_dir)
    with pytest.raises(NumericalError) as err:
        score_cell(loaded_model(spec, model, tok, {"method": "full"}), likert_cell(STAI_S, templates="first"),
                   ContextSettings(limit_items=1))
    n = len(tok(" not at all", add_special_tokens=False)["input_ids"])
    assert str(err.value) == (f"non-finite log-probability {[float('nan')] * n} for {STAI_S}: item S01: "
                              "cterm 'agitated', intensifier 'not at all', template question")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_logprob_names_its_variant_and_stimulus(tiny_llama_dir, monkeypatch, bad):
    """One poisoned log-prob deep inside the second stimulus's context: the job fails naming exactly it."""
    import qclm.engine.backend
    from qclm.engine import make_scorer

    model, tok = load_dir(tiny_llama_dir)
    calls = []

    class Poisoned:
        def __init__(self, *args):
            self.inner = make_scorer(*args)
            self.stats = self.inner.stats

        def score_with_greedy(self, requests, progress=None):
            out, greedy = self.inner.score_with_greedy(requests, progress)
            calls.append(len(out))
            if len(calls) == 2:  # the second stimulus
                out[13] = out[13].copy()
                out[13][-1] = bad
            return out, greedy

    monkeypatch.setattr(qclm.engine.backend, "make_scorer", Poisoned)
    with pytest.raises(NumericalError) as err:
        score_cell(loaded_model(spec_for(tiny_llama_dir), model, tok, {"method": "full"}),
                   likert_cell(STAI_S, "stress", [STRESS], "first"), ContextSettings(limit_items=1, limit_stimuli=3))
    # variant 13 of item S01: S+ term 2 (perturbed; 8 phrases per term), phrase 6 (to a moderate degree)
    assert re.fullmatch(rf"non-finite log-probability \[(-?[0-9.e-]+, )*{bad}\] for {re.escape(str(STAI_S))}: "
                        r"item S01: cterm 'perturbed', intensifier 'to a moderate degree', template question, stimulus stress02",
                        str(err.value))
    assert calls == [48, 48]  # it stopped at the second stimulus
