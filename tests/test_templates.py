"""The STAI wordings (method section 1; resources/questionnaires/README.md, "templates"): every
template of both files, with every construct term and every intensifier phrase, tokenizes without
a token merged across the context/continuation boundary, for both tokenizer families (byte-level
BPE without BOS: SmolLM2; SentencePiece with BOS: Gemma 3), bare and after a stimulus."""

from pathlib import Path

import pytest
from conftest import shared_tokenizer

from qclm.engine import tokenize_requests
from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli

ROOT = Path(__file__).resolve().parents[1]
Q = ROOT / "resources" / "questionnaires"
S = ROOT / "resources" / "stimuli"
STAI = ("stai_s", "stai_t")
SEPARATOR = "\n\n"  # the config's default stimulus separator (config/config.yaml)
#: the paper protocol's wording of each file, which must stay the first (default) template
PAPER_TEMPLATE = {
    "stai_s": "Question: Right now, at this moment, do you feel {cterm}?\nAnswer:{intensifier}",
    "stai_t": "Question: In general, how often do you feel {cterm}?\nAnswer:{intensifier}",
}


@pytest.fixture(params=["smollm2", "gemma3"])
def tokenizer(request, smollm2_tokenizer_dir, gemma3_tokenizer_dir):
    return shared_tokenizer(smollm2_tokenizer_dir if request.param == "smollm2" else gemma3_tokenizer_dir)


@pytest.mark.parametrize("name", STAI)
def test_each_stai_file_has_three_wordings_with_the_paper_question_first(name):
    q = load_questionnaire(Q / f"{name}.yaml")
    assert len(q.templates) >= 3 and q.templates[0] == "question", q.templates
    # the default wording of the items without their own is the paper protocol's
    s01 = q.items[0]
    assert s01.templates["question"] == PAPER_TEMPLATE[name]
    assert len({s01.templates[t] for t in q.templates}) == len(q.templates), "the wordings differ"
    # an item with its own wording has one under every template, and they differ too
    for item in q.items:
        assert list(item.templates) == list(q.templates), item.id
        assert len(set(item.templates.values())) == len(q.templates), item.id


def _stimuli() -> list[str]:
    """A stimulus of each shipped class, long version: what stands before the item under a
    stimulus condition."""
    return [load_stimuli(S / f"{cls}.yaml").stimuli[0].text("long") for cls in ("stress", "neutral", "relaxation")]


@pytest.mark.parametrize("name", STAI)
def test_every_wording_term_and_phrase_tokenizes_at_the_boundary(name, tokenizer):
    q = load_questionnaire(Q / f"{name}.yaml")
    variants = q.variants(templates=list(q.templates))
    n_terms = sum(len(i.plus) + len(i.minus) for i in q.items)
    assert len(variants) == len(q.templates) * n_terms * len(q.intensifiers)
    continuations = [v.continuation for v in variants]
    for lead in ["", *(text + SEPARATOR for text in _stimuli())]:
        contexts = [lead + v.prefix for v in variants]
        reqs = tokenize_requests(tokenizer, contexts, continuations, boundary="error",
                                 describe=lambda i: f"{name} template {variants[i].template} item "
                                 f"{variants[i].item_id} cterm {variants[i].cterm!r} {variants[i].intensifier!r}")
        assert len(reqs) == len(variants)
        # the scored tokens are exactly the phrase with its leading space
        for v, r in zip(variants, reqs):
            assert tokenizer.decode(list(r.continuation)) == v.continuation, (v.template, v.item_id, v.cterm)
