"""The protocol (method.md section 2): the contexts of vanilla, a stimulus class and a composed condition."""

import pytest

from qclm.experiment import Experiment, contrast_design, default_contrasts, order_conditions, stimulus_classes
from qclm.contexts import ContextSettings
from qclm.probes.likert.kind import item_contexts
from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli
from test_resources import Q, S


def test_contexts_put_the_stimulus_before_the_item():
    q = load_questionnaire(Q / "stai_s.yaml")
    stress = load_stimuli(S / "stress.yaml")
    vanilla = item_contexts(q, "vanilla", None, ContextSettings())
    assert len(vanilla) == 1 and vanilla[0].stimulus_id == ""
    v = vanilla[0].variants[0]
    assert vanilla[0].texts[0] == v.prefix and v.prefix.endswith("Answer:")
    assert v.continuation == " " + v.intensifier
    ctx = item_contexts(q, "stress", [stress], ContextSettings(version="brief", limit_items=2, limit_stimuli=3))
    assert [c.stimulus_id for c in ctx] == ["stress01", "stress02", "stress03"]
    assert ctx[0].texts[0] == stress.stimuli[0].text("brief") + "\n\n" + ctx[0].variants[0].prefix
    assert {v.item_id for v in ctx[0].variants} == {"S01", "S02"}
    with pytest.raises(ValueError, match="condition neutral needs the stimulus sets of neutral, got stress"):
        item_contexts(q, "neutral", [stress], ContextSettings())


def test_a_composed_condition_joins_the_classes_stimuli_by_position():
    q = load_questionnaire(Q / "stai_s.yaml")
    stress, neutral = load_stimuli(S / "stress.yaml"), load_stimuli(S / "neutral.yaml")
    protocol = ContextSettings(version="long", separator="\n---\n", limit_items=1, limit_stimuli=4)
    ctx = item_contexts(q, "stress+neutral", [stress, neutral], protocol)
    assert [c.stimulus_id for c in ctx] == [f"stress0{i}+neutral0{i}" for i in range(1, 5)]  # per class limit
    third = ctx[2]
    lead = stress.stimuli[2].text("long") + "\n---\n" + neutral.stimuli[2].text("long") + "\n---\n"
    assert third.stimulus == lead and third.texts[0] == lead + third.variants[0].prefix
    with pytest.raises(ValueError, match=r"needs the stimulus sets of stress, neutral, got neutral, stress"):
        item_contexts(q, "stress+neutral", [neutral, stress], protocol)


def test_experiment_from_config_and_the_contrast_designs():
    config = {"stimuli": {"version": "long", "classes": {"relax": "r.yaml"}, "stress": "s.yaml"},
              "conditions": ["vanilla", "stress", "relax", "stress+relax"]}
    exp = Experiment.from_config(config)
    assert exp.classes == {"relax": "r.yaml", "stress": "s.yaml"}  # classes plus the shorthand
    assert exp.contrasts == (("vanilla", "stress"),)  # the paper's contrasts that apply
    assert exp.files_of("stress+relax") == ["s.yaml", "r.yaml"] and exp.files_of("vanilla") == []
    assert stimulus_classes({"version": "long"}) == {}
    assert default_contrasts(["vanilla", "neutral", "stress"]) == [("vanilla", "stress"), ("vanilla", "neutral"),
                                                                 ("neutral", "stress")]
    assert [contrast_design(*c) for c in (("vanilla", "stress"), ("stress", "stress+relax"), ("neutral", "stress"),
                                          ("stress+relax", "neutral+relax"))] == [
        "vanilla", "paired", "independent", "paired"]
    assert order_conditions(["stress", "vanilla", "neutral", "stress+relax"]) == [
        "vanilla", "neutral", "stress", "stress+relax"]
