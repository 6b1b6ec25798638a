"""The instrument library (resources/questionnaires/README.md): every shipped questionnaire file
validates, says where it comes from and what its licence lets it reproduce, follows the content
rules of the format, is listed in the README table and in config/library.yaml, and tokenizes
without a token merged across the prefix/answer boundary under both tokenizer families (method
section 1: each variant is scored as P(intensifier | prefix))."""

import re
from pathlib import Path

import pytest
import yaml
from conftest import shared_tokenizer

from qclm.questionnaire import CONTINUATION_LEAD, ITEM_WORDINGS, load_questionnaire
from qclm.validation import validate_config_file

ROOT = Path(__file__).resolve().parents[1]
Q = ROOT / "resources" / "questionnaires"
#: the control forms (a `control` block: a copy of an instrument with its construct terms replaced, docs/constructs.md)
#: are not instruments of the library; tests/test_control_forms.py checks them
CONTROLS = {f.stem for f in Q.glob("*.yaml") if "control" in yaml.safe_load(f.read_text())}
FILES = sorted(f for f in Q.glob("*.yaml") if f.stem not in CONTROLS)
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
    assert table == set(LIBRARY) | CONTROLS and CONTROLS == {"stai_s_control", "stai_t_control"}
    config = yaml.safe_load((ROOT / "config" / "library.yaml").read_text())
    assert config["questionnaires"] == {i: f"resources/questionnaires/{i}.yaml" for i in LIBRARY}
    # the paper's three conditions and contrasts, the main config's models, its own results directory
    main = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for key in ("models", "conditions", "contrasts", "equations"):
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


#: the name each published instrument goes by in the literature (training text knows it by this, not by the file's
#: title); the files written for qclm were never published and have none
PUBLISHED_NAMES = {
    "stai_s": "STAI Form Y-1", "stai_t": "STAI Form Y-2", "gad7": "GAD-7", "phq9": "PHQ-9", "pss10": "PSS-10",
    "brs": "Brief Resilience Scale", "rses": "Rosenberg Self-Esteem Scale",
    **{f"ipip_{d}": "IPIP Big-Five Factor Markers (50 items)"
       for d in ("neuroticism", "extraversion", "openness", "agreeableness", "conscientiousness")},
}


@pytest.mark.parametrize("name", IDS)
def test_published_instruments_give_their_published_name(name):
    """The memorization probe names an instrument as Han et al. do, by its published name: every shipped file of
    a published instrument gives it (`published_name`), apart from the file's own title (`name`)."""
    from qclm.instruments import load_instrument

    inst = load_instrument(Q / f"{name}.yaml")
    if LIBRARY[name][3] == "written":
        assert inst.published_name == "" and "published_name" not in raw(name)
    else:
        assert inst.published_name == PUBLISHED_NAMES[name] and inst.published_name != inst.name


def test_published_name_is_validated_like_the_other_fields(tmp_path):
    from qclm.errors import InputError
    from qclm.instruments import load_instrument

    data = raw("gad7")
    for bad, problem in (("", "must not be empty"), ("   ", "must not be empty"), (7, "must be a string"),
                         ("GAD\x077", "control character")):
        path = tmp_path / "gad7.yaml"
        path.write_text(yaml.safe_dump({**data, "published_name": bad}, sort_keys=False))
        with pytest.raises(InputError) as err:
            load_instrument(path)
        assert any(line.startswith(f"{path}: field published_name") and problem in line for line in err.value.lines), (
            bad, err.value.lines)
    plain = tmp_path / "mine.yaml"
    plain.write_text(yaml.safe_dump({"name": "Mine", "published_name": ["x"], "items": [{"id": 1, "text": "I nap"}]}))
    with pytest.raises(InputError) as err:
        load_instrument(plain)
    assert any(line.startswith(f"{plain}: field published_name") for line in err.value.lines), err.value.lines


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
    return shared_tokenizer(request.getfixturevalue(f"{request.param}_tokenizer_dir"))


@pytest.fixture(scope="module")
def stimulus_lead() -> str:
    from qclm.contexts import ContextSettings
    from qclm.stimuli import load_stimuli

    protocol = ContextSettings()
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
