"""The entailment probe kind (docs/entailment.md): P(True) equals a softmax over the three answers' log-probabilities
computed directly with a tiny model, and the item score equals the two-way normalization and eq. 2 done by hand;
the shipped instruments load; bad instrument files are named by file, item and field. (Every condition of the
workflow: tests/test_workflow.py on the shared run.)"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from conftest import ROOT, load_dir, loaded_model

from qclm.contexts import ContextSettings
from qclm.errors import InputError
from qclm.jobs.score_model import CellSpec, score_cell
from qclm.models.table import parse_model_row
from qclm.probes.entailment.kind import FORMS, OPTIONS, EntailmentProbe
from qclm.probes.entailment.material import PLACEMENT, load_entailment

SMALL = {
    "id": "small", "name": "A small test instrument", "construct": "anxiety", "source": "tests",
    "licence": "MIT (written for the tests)", "item_wording": "written",
    "premise": "Lately I have felt {cterm}.", "hypothesis": "It happened {intensifier}.",
    "scale": {"levels": [{"label": "rarely", "weight": -1, "intensifiers": ["rarely", "seldom"]},
                         {"label": "often", "weight": 1, "intensifiers": ["often"]},
                         {"label": "always", "weight": 2, "intensifiers": ["every day"]}]},
    "items": [{"id": "A1", "cterms": {"plus": ["tense", "worried"], "minus": ["calm"]}},
              {"id": "A2", "premise": "Lately I have {cterm}.", "cterms": {"plus": ["slept badly"],
                                                                          "minus": ["slept well", "rested"]}}],
}


def _write(tmp_path, data, name="small"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _spec(path):
    return parse_model_row({"name": "tiny", "source": str(path), "revision": "", "params_b": "0.001",
                            "type": "base", "family": "t", "dtype": "float32"}, "test", 0)


@pytest.mark.parametrize("form", list(FORMS))
def test_p_true_and_the_item_score_equal_a_hand_computation(tmp_path, tiny_llama_dir, form):
    path = _write(tmp_path, SMALL)
    model, tok = load_dir(tiny_llama_dir)
    cell = CellSpec("small", "entailment", "vanilla", {"instrument": str(path), "form": form}, (str(path),))
    raw, meta = score_cell(loaded_model(_spec(tiny_llama_dir), model, tok), cell, ContextSettings())
    assert len(raw) == (3 + 3) * 4 and meta["form"] == form and meta["options"] == list(OPTIONS)
    _check_by_hand(raw, SMALL, form, model, tok)


#: SMALL with an item whose intensifier sits in the premise and construct term in the hypothesis (written for the
#: tests, in the manner of some of Reuben et al.'s QMNLI items)
MIXED = {**SMALL, "items": SMALL["items"] + [
    {"id": "A3", "premise": "I lie awake at night {intensifier}.", "hypothesis": "I am {cterm}.",
     "cterms": {"plus": ["restless"], "minus": ["rested", "at peace"]}}]}


def test_an_item_with_the_intensifier_in_the_premise_scores_by_the_same_math(tmp_path, tiny_llama_dir):
    """Both placements of the slots: the intensifier in the premise and the term in the hypothesis are put where
    they sit, P(True) and the item score equal the hand computation, and the other items score as before."""
    path = _write(tmp_path, MIXED, "mixed")
    inst = load_entailment(path)
    a3 = [v for v in inst.variants() if v.item_id == "A3"]
    assert len(a3) == 3 * 4 and all(v.premise == f"I lie awake at night {v.intensifier}." for v in a3)
    assert all(v.hypothesis == f"I am {v.cterm}." for v in a3)
    model, tok = load_dir(tiny_llama_dir)
    spec = _spec(tiny_llama_dir)
    cell = CellSpec("mixed", "entailment", "vanilla", {"instrument": str(path), "form": "qclm"}, (str(path),))
    raw, _ = score_cell(loaded_model(spec, model, tok), cell, ContextSettings())
    _check_by_hand(raw, MIXED, "qclm", model, tok, rows=raw[raw["item_id"] == "A3"].sample(4, random_state=0))
    small = _write(tmp_path, SMALL)
    cell = CellSpec("mixed", "entailment", "vanilla", {"instrument": str(small), "form": "qclm"}, (str(small),))
    before, _ = score_cell(loaded_model(spec, model, tok), cell, ContextSettings())
    keep = raw[raw["item_id"] != "A3"].reset_index(drop=True)
    cols = ["item_id", "cterm", "intensifier", "logp_true", "logp_false", "logp_neither", "p_raw"]
    import pandas as pd

    pd.testing.assert_frame_equal(keep[cols], before[cols])


def _check_by_hand(raw, data, form, model, tok, rows=None):
    """P(True) of some rows and every item score of ``raw`` against a hand computation from the instrument's own
    templates (each slot wherever the item's premise or hypothesis has it)."""
    import torch

    own = {it["id"]: it for it in data["items"]}
    # P(True) by hand: the prompt's tokens (with the tokenizer's special tokens), each answer's tokens after them,
    # the answer's summed log-probability from one forward pass per answer, then a softmax over the three
    for row in (raw.sample(4, random_state=0) if rows is None else rows).itertuples():
        templates = [own[row.item_id].get(key) or data[key] for key in ("premise", "hypothesis")]
        premise, hypothesis = (t.replace("{cterm}", row.cterm).replace("{intensifier}", row.intensifier)
                               for t in templates)
        text = FORMS[form].format(premise=premise, hypothesis=hypothesis)
        ctx = tok(text).input_ids
        sums = []
        for option in OPTIONS:
            ans = tok(" " + option, add_special_tokens=False).input_ids
            with torch.no_grad():
                logits = model(torch.tensor([ctx + ans])).logits[0].double()
            lp = torch.log_softmax(logits, -1)
            sums.append(sum(lp[len(ctx) - 1 + k, t].item() for k, t in enumerate(ans)))
        p = np.exp(sums) / np.exp(sums).sum()
        np.testing.assert_allclose([row.logp_true, row.logp_false, row.logp_neither], sums, rtol=1e-4, atol=1e-5)
        assert row.p_raw == pytest.approx(p[0], rel=1e-4)
    # the item score by hand: the matrix cterms x intensifiers of P(True), columns then rows normalized, eq. 2
    tables = EntailmentProbe.cell_scores.__get__(EntailmentProbe.__new__(EntailmentProbe))(
        raw, EntailmentProbe.stage_config({"equations": {"normalization_epsilon": 0.0, "item_score": "eq2"}}))
    for item, sub in raw.groupby("item_id"):
        m = sub.pivot_table(index=["polarity", "cterm"], columns="intensifier", values="p_raw", sort=False)
        m = m / m.sum(axis=0)
        m = m.div(m.sum(axis=1), axis=0)
        weights = sub.drop_duplicates("intensifier").set_index("intensifier")["weight"][m.columns]
        plus = m.loc["+"]
        expected = float((plus * weights).to_numpy().sum() / (plus.shape[0] * plus.shape[1]))
        got = tables["items"].set_index("item_id").loc[item, "score"]
        assert got == pytest.approx(expected, rel=1e-9)
    assert set(tables["variants"].groupby(["item_id", "cterm"])["p_norm"].sum().round(9)) == {1.0}


def test_the_shipped_instruments_load():
    for name, n_items in (("gad7", 7), ("phq9", 9), ("soc", 9), ("stai_s", 20), ("ipip_openness", 10)):
        inst = load_entailment(ROOT / "resources" / "entailment" / f"{name}.yaml")
        assert len(inst.items) == n_items and inst.id == name
        items = {item.id: item for item in inst.items}
        for v in inst.variants():  # every shipped item: the term in the premise, the intensifier in the hypothesis
            assert "{" not in v.premise + v.hypothesis
            assert v.premise == items[v.item_id].premise.replace("{cterm}", v.cterm)
            assert v.hypothesis == items[v.item_id].hypothesis.replace("{intensifier}", v.intensifier)
    text = (ROOT / "resources/entailment/soc.yaml").read_text()
    assert "MIT" in text and "NOT the SOC-13" in text


def test_bad_instrument_files_are_named_by_file_item_and_field(tmp_path):
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    del data["premise"]
    data["items"][0]["cterms"]["minus"] = ["calm", "tense"]  # in both S+ and S-
    data["items"][1]["premise"] = "Lately I have {cterm} and {cterm}."
    data["items"].append({"id": "A1", "premise": "I am {cterm}.", "hypothesis": "Always.",
                          "cterms": {"plus": ["x"], "minus": ["y"]}})
    data["scale"]["levels"][1]["weight"] = -1
    data["scale"]["levels"][2]["colour"] = "red"
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as err:
        load_entailment(path)
    lines = str(err.value).splitlines()
    f = str(path)
    expected = [
        f"{f}: item A1 (#1): field premise: missing: the item has no premise and the file no default premise",
        f"{f}: item A1 (#1): field cterms: term 'tense' is in both plus (S+) and minus (S-)",
        f"{f}: item A2: field premise: premise has 2 {{cterm}} slots; it needs exactly one: {PLACEMENT}",
        f"{f}: item A1 (#3): field id: duplicate item id (item #1 has it too)",
        f"{f}: item A1 (#3): field hypothesis: hypothesis has no slot: {PLACEMENT}",
        f"{f}: level often: field weight: weight -1 repeats level rarely",
    ]
    for line in expected:
        assert line in lines, (line, lines)
    assert any(line.startswith(f"{f}: level always: field colour: unknown field") for line in lines), lines


def test_a_bad_placement_of_the_slots_says_which_slot_goes_where(tmp_path):
    """The premise and the hypothesis hold one slot each, either way round; an item (or the file's defaults) that
    breaks it is named with the rule, and which template is the file's default."""
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    data["items"] += [
        {"id": "B1", "premise": "I feel {cterm}.", "hypothesis": "I am {cterm}.",
         "cterms": {"plus": ["x"], "minus": ["y"]}},
        {"id": "B2", "premise": "{intensifier} I worry.", "cterms": {"plus": ["x"], "minus": ["y"]}},
        {"id": "B3", "premise": "I feel {cterm} {intensifier}.", "cterms": {"plus": ["x"], "minus": ["y"]}},
        {"id": "B4", "premise": "I lie awake {intensifier}.", "hypothesis": "I am {cterm}.",
         "cterms": {"plus": ["x"], "minus": ["y"]}},
    ]
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as err:
        load_entailment(path)
    f = str(path)
    assert str(err.value).splitlines() == [
        f"{f}: item B1: field premise: premise and hypothesis both hold {{cterm}} and neither {{intensifier}}: "
        f"{PLACEMENT}",
        f"{f}: item B2: field premise: premise and hypothesis both hold {{intensifier}} and neither {{cterm}} "
        f"(hypothesis: the file's default): {PLACEMENT}",
        f"{f}: item B3: field premise: premise has both {{cterm}} and {{intensifier}}: {PLACEMENT}",
    ]
    assert "premise {cterm} and hypothesis {intensifier}, or premise {intensifier} and hypothesis {cterm}" in PLACEMENT
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    data["premise"] = "It happens {intensifier}."
    path = _write(tmp_path, data, "defaults")
    with pytest.raises(InputError) as err:
        load_entailment(path)
    assert str(err.value).splitlines() == [  # the file's defaults, said once (A2 has its own premise)
        f"{path}: field premise: premise and hypothesis both hold {{intensifier}} and neither {{cterm}}: {PLACEMENT}"]


def test_a_bad_instrument_is_reported_through_the_config_check(tmp_path):
    from qclm import probes

    data = yaml.safe_load(yaml.safe_dump(SMALL))
    data["items"][0]["cterms"]["plus"] = []
    path = _write(tmp_path, data)
    found = probes.problems({"probes": {"ent": {"kind": "entailment", "instrument": str(path), "form": "nli"}}},
                            "config.yaml", ["vanilla"])
    assert found == [("config.yaml", "field probes.ent.form", "must be one of qclm, mnli; got 'nli'")]
    found = probes.problems({"probes": {"ent": {"kind": "entailment", "instrument": str(path)}}}, "config.yaml",
                            ["vanilla"])
    assert [(p[0], p[1]) for p in found] == [(str(path), "item A1: field cterms.plus")], found


def _tiny_nli(tok_dir, out):
    """A tiny random Llama sequence classifier with MNLI-style labels (entailment, neutral, contradiction)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    tok = AutoTokenizer.from_pretrained(tok_dir)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512, num_labels=3,
                      id2label={0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"},
                      label2id={"ENTAILMENT": 0, "NEUTRAL": 1, "CONTRADICTION": 2},
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    model = LlamaForSequenceClassification(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_a_model_with_an_nli_head_scores_by_its_entailment_label(tmp_path, smollm2_tokenizer_dir):
    """``head: nli`` in the model table: the scoring job loads a sequence classifier, and the entailment probe's
    p_raw is its entailment probability for (stimulus + premise, hypothesis), batched pairs equal to one pair at a
    time by hand; any other probe is refused with one line."""
    import torch

    from qclm.jobs.backends import load
    from qclm.stimuli import load_stimuli

    model_dir = _tiny_nli(smollm2_tokenizer_dir, tmp_path / "nli")
    spec = parse_model_row({"name": "tiny-nli", "source": str(model_dir), "revision": "", "params_b": "0.001",
                            "type": "base", "family": "t", "dtype": "float32", "head": "nli"}, "test", 0)
    assert spec.head == "nli" and spec.as_row()["head"] == "nli"
    loaded = load(spec, None, {"device": "cpu", "batch_size": 5})
    path = _write(tmp_path, SMALL)
    stress = ROOT / "resources/stimuli/stress.yaml"
    cell = CellSpec("small", "entailment", "stress", {"instrument": str(path)}, (str(path),), (str(stress),))
    raw, meta = score_cell(loaded, cell, ContextSettings(limit_stimuli=1))
    assert len(raw) == 24 and meta["head"] == "nli" and meta["scoring_method"] == "nli-head"
    lead = ContextSettings(limit_stimuli=1)  # the context's lead: the stimulus text and the separator
    from qclm.contexts import condition_contexts

    ctx = condition_contexts("stress", [load_stimuli(stress, expected_class="stress")], lead)[0]
    model = loaded.model
    for row in raw.sample(3, random_state=1).itertuples():
        premise = ("Lately I have {cterm}." if row.item_id == "A2" else SMALL["premise"]).replace("{cterm}", row.cterm)
        enc = loaded.tokenizer(ctx.lead + premise, SMALL["hypothesis"].replace("{intensifier}", row.intensifier),
                               return_tensors="pt")
        with torch.no_grad():
            p = torch.softmax(model(**enc).logits[0].double(), -1).numpy()
        assert row.p_raw == pytest.approx(p[0], rel=1e-5)
        np.testing.assert_allclose([row.logp_true, row.logp_false, row.logp_neither], np.log(p[[0, 2, 1]]),
                                   rtol=1e-5)
    assert raw["p_raw"].std() > 0.01  # a random head still answers differently per pair
    with pytest.raises(ValueError, match="tiny-nli has an NLI head"):
        loaded.backend.loglikelihood([])
    # what render shows of such a row is what it is asked: the pairs, classified (Asking.head), not a prompt
    import io

    from qclm.commands.render import Target, render
    from qclm.probes.base import Instance

    shown = io.StringIO()
    config = {"stimuli": {"version": "long", "classes": {"stress": str(stress)}}, "conditions": ["stress"],
              "limit_stimuli": 1}
    instance = Instance("small", "entailment", {"instrument": str(path), "form": "qclm"})
    assert render(None, None, None, "stress", limit=2, out=shown,
                  target=Target(config, "test", spec, tmp_path, instance)) == 0
    text = shown.getvalue()
    assert text.count("--- premise and hypothesis: ") == 2 and "Does the premise imply" not in text, text


def test_the_model_table_names_a_bad_head():
    with pytest.raises(InputError, match="line 3 \\(model m\\): column head: must be empty"):
        parse_model_row({"name": "m", "source": "embedded:smollm2-135m-instruct", "revision": "", "params_b": "1",
                         "type": "base", "family": "t", "dtype": "float32", "head": "mlm"}, "models.tsv", 3)


def test_the_chance_score_is_eq2_on_answers_that_ignore_the_intensifier():
    """Eq. 2 divides by |S+| x |L|: answers that ignore the intensifier and the term (P_norm uniform, 1/|L|) score
    mean weight / |L|, not the mean weight; with weights 0..3 (allowed by the schema) that is 1.5 / 4 = 0.375. The
    chance score is the score such answers actually get through the same equations."""
    import pandas as pd

    from qclm.equations import (
        condition_means,
        item_scores,
        normalize,
        questionnaire_scores,
    )
    from qclm.probes.entailment.analysis import entailment_table

    levels = [("never", 0.0), ("sometimes", 1.0), ("often", 2.0), ("always", 3.0)]
    rows = [{"model": "m", "questionnaire": "q", "condition": "vanilla", "stimulus_id": "", "template": "t",
             "item_id": item, "cterm": cterm, "polarity": pol, "intensifier": phrase, "level": phrase,
             "weight": w, "p_raw": 0.3}
            for item in ("A1", "A2") for cterm, pol in (("tense", "+"), ("worried", "+"), ("calm", "-"))
            for phrase, w in levels]
    variants = normalize(pd.DataFrame(rows))
    items = item_scores(variants)
    conditions = condition_means(questionnaire_scores(items))
    table = entailment_table(conditions, items, variants, pd.DataFrame(columns=["model", "questionnaire",
                                                                                "silhouette"]), 10)
    assert table["chance_score"].iloc[0] == pytest.approx(1.5 / 4)
    assert table["score"].iloc[0] == pytest.approx(table["chance_score"].iloc[0])


def test_the_score_moves_with_the_stance_by_level_interaction_and_not_with_the_answers_level():
    """What the calibration's pairs plant asks of a model, through the same equations: P(True) tables whose answers
    follow the stance x level interaction (True where an S+ term meets a frequent intensifier or an S- term a rare
    one) score above chance, the reverse below it, by as much under both normalizations; answers that only say True
    more often (every cell scaled, or one stance's row or one level's column), as the calibration's SmolLM2 and
    Gemma-3 checkpoints do, score chance exactly (docs/calibration.md)."""
    import numpy as np
    import pandas as pd

    from qclm.equations import item_scores, normalize

    levels = [("on no day", -2.0), ("now and then", -1.0), ("most days", 1.0), ("every day", 2.0)]
    terms = (("nervous", "+"), ("on edge", "+"), ("calm", "-"), ("relaxed", "-"))

    def score(p_true, form="one_pass"):
        rows = [{"model": "m", "questionnaire": "q", "condition": "vanilla", "stimulus_id": "", "template": "t",
                 "item_id": "G1", "cterm": cterm, "polarity": pol, "intensifier": phrase, "level": phrase,
                 "weight": w, "p_raw": p_true(pol, w)} for cterm, pol in terms for phrase, w in levels]
        return float(item_scores(normalize(pd.DataFrame(rows), form=form))["score"].iloc[0])

    chance = score(lambda pol, w: 0.3)
    agree = (lambda pol, w: 0.3 + 0.2 * np.sign(w) * (1 if pol == "+" else -1))
    for form in ("one_pass", "iterated"):
        assert score(agree, form) > chance + 0.01 and score(lambda pol, w: 0.6 - agree(pol, w), form) < chance - 0.01
    for level_only in (lambda pol, w: 0.9, lambda pol, w: 0.5 if pol == "+" else 0.2,
                       lambda pol, w: 0.2 + 0.1 * (w + 2)):
        assert score(level_only, "iterated") == pytest.approx(chance, abs=1e-12)
