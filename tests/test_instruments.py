"""The instrument library (resources/questionnaires/README.md): every shipped questionnaire file
validates, says where it comes from and what its licence lets it reproduce, follows the content
rules of the format, is listed in the README table and in config/library.yaml, and tokenizes
without a token merged across the prefix/answer boundary under both tokenizer families (method
section 1: each variant is scored as P(intensifier | prefix))."""

import re
from pathlib import Path

import pytest
import yaml

from qclm.questionnaire import CONTINUATION_LEAD, ITEM_WORDINGS, load_questionnaire
from qclm.config import validate_config_file

ROOT = Path(__file__).resolve().parents[1]
Q = ROOT / "resources" / "questionnaires"
FILES = sorted(Q.glob("*.yaml"))
IDS = [f.stem for f in FILES]

# id -> (construct, framing, items, item_wording); the construct strings are the keys the analysis
# expects correlations on
LIBRARY = {
    "stai_s": ("anxiety", "state", 20, "described"),
    "stai_t": ("anxiety", "trait", 20, "described"),
    "gad7": ("anxiety", "state", 7, "reproduced"),
    "phq9": ("depression", "state", 9, "reproduced"),
    "ipip_neuroticism": ("neuroticism", "trait", 10, "reproduced"),
    "ipip_extraversion": ("extraversion", "trait", 10, "reproduced"),
    "ipip_openness": ("openness", "trait", 10, "reproduced"),
    "ipip_agreeableness": ("agreeableness", "trait", 10, "reproduced"),
    "ipip_conscientiousness": ("conscientiousness", "trait", 10, "reproduced"),
    "pss10": ("stress", "state", 10, "described"),
    "brs": ("resilience", "trait", 6, "described"),
    "rses": ("self-esteem", "trait", 10, "described"),
    "pa_state": ("positive affect", "state", 10, "written"),
    "pa_trait": ("positive affect", "trait", 10, "written"),
    "na_state": ("negative affect", "state", 10, "written"),
    "na_trait": ("negative affect", "trait", 10, "written"),
}
#: the files written before the library (2-4 terms per list); every newer file has exactly 3 + 3
FIRST_FILES = {"stai_s", "stai_t"}


def raw(name: str) -> dict:
    return yaml.safe_load((Q / f"{name}.yaml").read_text())


def test_the_library_is_what_the_readme_and_config_list(monkeypatch):
    monkeypatch.chdir(ROOT)  # the config's paths are relative to the workflow's directory
    assert set(IDS) == set(LIBRARY), "a new file needs an entry here, in the README table and in config/library.yaml"
    readme = (Q / "README.md").read_text()
    table = set(re.findall(r"^\| `([a-z0-9_]+)\.yaml` \|", readme, flags=re.M))
    assert table == set(LIBRARY)
    config = yaml.safe_load((ROOT / "config" / "library.yaml").read_text())
    assert config["questionnaires"] == {i: f"resources/questionnaires/{i}.yaml" for i in LIBRARY}
    # the paper's three conditions and contrasts, the main config's models, its own results directory
    main = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for key in ("models", "conditions", "contrasts", "scoring"):
        assert config[key] == main[key], key
    assert config["results"] != main.get("results", "results")
    assert validate_config_file(ROOT / "config" / "library.yaml", ROOT / "src/qclm/schemas/config.schema.yaml") == []


@pytest.mark.parametrize("name", IDS)
def test_file_validates_and_matches_the_library(name):
    q = load_questionnaire(Q / f"{name}.yaml")
    assert (q.construct, q.framing, len(q.items), q.item_wording) == LIBRARY[name]


@pytest.mark.parametrize("name", IDS)
def test_source_licence_and_item_wording(name):
    data = raw(name)
    assert len(data["source"].strip()) > 40 and len(data["licence"].strip()) > 40, "a full citation and licence"
    assert data["item_wording"] in ITEM_WORDINGS
    with_text = [it["id"] for it in data["items"] if str(it.get("text", "")).strip()]
    if data["item_wording"] == "reproduced":
        assert len(with_text) == len(data["items"]), "reproduced: every item carries its original wording"
    else:
        assert with_text == [], f"{data['item_wording']}: no original wording may be stored"
        assert all("text" not in it for it in data["items"])


@pytest.mark.parametrize("name", IDS)
def test_content_rules(name):
    q = load_questionnaire(Q / f"{name}.yaml")
    sizes = {3} if name not in FIRST_FILES else {2, 3, 4}
    for item in q.items:
        assert len(item.plus) in sizes and len(item.minus) in sizes, item.id
        assert item.keying in ("direct", "reverse"), item.id
        assert item.description.strip(), item.id
        for template in item.templates.values():
            assert template.endswith(":{intensifier}"), item.id  # an answer cue (Answer:, Respondent:) last
    assert [i.ordinal for i in q.items] == list(range(1, len(q.items) + 1))
    weights = [lv.weight for lv in q.levels]
    assert weights == sorted(weights) and 0 not in weights, "levels ordered low to high, no neutral level"
    assert weights == [-w for w in reversed(weights)], "centered weights"
    assert len({len(lv.intensifiers) for lv in q.levels}) == 1, "same number of phrases per level"
    assert all(len(lv.intensifiers) >= 2 for lv in q.levels)


@pytest.mark.parametrize("kind", ["pa", "na"])
def test_state_and_trait_affect_share_items_and_terms(kind):
    """The pair differs only in its frame and scale, so a state-trait gap is not an item effect."""
    state, trait = (load_questionnaire(Q / f"{kind}_{f}.yaml") for f in ("state", "trait"))
    assert (state.framing, trait.framing) == ("state", "trait") and state.construct == trait.construct
    assert [(i.id, i.plus, i.minus) for i in state.items] == [(i.id, i.plus, i.minus) for i in trait.items]
    assert state.templates == trait.templates
    assert state.items[0].prefix("x") != trait.items[0].prefix("x")


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def tokenizer(request):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(request.getfixturevalue(f"{request.param}_tokenizer_dir"))


@pytest.fixture(scope="module")
def stimulus_lead() -> str:
    from qclm.contexts import Protocol
    from qclm.stimuli import load_stimuli

    protocol = Protocol()
    return load_stimuli(ROOT / "resources" / "stimuli" / "stress.yaml").stimuli[0].text(protocol.version) \
        + protocol.separator


@pytest.mark.parametrize("name", IDS)
def test_every_variant_tokenizes_at_the_boundary(name, tokenizer, stimulus_lead):
    """Every template x item x term x phrase, bare (vanilla) and after a stimulus: the prefix's
    tokens are a prefix of the whole text's, the continuation decodes to the phrase, and a variant's
    answer tokens are the same in both conditions (conditions compare the same token sequences)."""
    from qclm.engine import tokenize_requests

    q = load_questionnaire(Q / f"{name}.yaml")
    variants = q.variants(templates=list(q.templates))
    contexts = [v.prefix for v in variants] + [stimulus_lead + v.prefix for v in variants]
    continuations = [v.continuation for v in variants] * 2
    requests = tokenize_requests(tokenizer, contexts, continuations, boundary="error",
                                 describe=lambda i: f"{name}: {variants[i % len(variants)]}")
    assert len(requests) == 2 * len(variants)
    bare, after_stimulus = requests[: len(variants)], requests[len(variants):]
    assert [r.continuation for r in bare] == [r.continuation for r in after_stimulus]
    phrases = {tuple(r.continuation): c for r, c in zip(requests, continuations)}
    for ids, text in phrases.items():
        assert tokenizer.decode(list(ids)) == text and text.startswith(CONTINUATION_LEAD)
