"""The peers (docs/qlatent.md): the authors' QCLM scorer (PyPI qlatent 1.0.27) and
lm-evaluation-harness, against the project, on real tokenizers and the real SmolLM2.

Marked ``peers``: they need .venv-peers (``make peers``), and the default ``make test`` deselects
them. Each documented difference between qlatent and the paper as implemented here is pinned by a
test, run through qlatent's own code, so that a new qlatent release that changes one shows up.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from test_scoring_math import item_score_matrix, two_way_normalize  # the equations as matrix oracles

from qclm.engine import make_scorer, tokenize_requests
from qclm.models.loading import load_model
from qclm.models.table import parse_model_row
from qclm.questionnaire import CONTINUATION_LEAD, load_questionnaire

pytestmark = pytest.mark.peers

ROOT = Path(__file__).resolve().parents[1]
STAI_S = ROOT / "resources/questionnaires/stai_s.yaml"
STAI_T = ROOT / "resources/questionnaires/stai_t.yaml"
SMOLLM2 = {"name": "smollm2-135m-instruct", "source": "embedded:smollm2-135m-instruct", "revision": "Q4_1",
           "params_b": "0.135", "type": "instruct", "family": "smollm2", "dtype": "float32"}


@pytest.fixture(scope="module")
def peers():
    """benchmarks/peers.py (the adapter between the project and qlatent)."""
    pytest.importorskip("qlatent.qclm.qclm", reason="qlatent is installed in .venv-peers only (make peers-env)")
    from benchmarks import peers

    return peers


@pytest.fixture(scope="module")
def smollm2(smollm2_prepared_dir):
    return load_model(parse_model_row(SMOLLM2, "test", 0), smollm2_prepared_dir, "cpu")


class ZeroLogits:
    """A stand-in causal LM for tests of qlatent's string and span handling: uniform logits."""

    def __init__(self, vocab: int):
        self.vocab = vocab

    def __call__(self, input_ids, attention_mask=None, **kwargs):
        import torch

        return SimpleNamespace(logits=torch.zeros(1, input_ids.shape[1], self.vocab))


def qlatent_debug_run(question, tokenizer, pre_text=None, mode="raw") -> list[dict]:
    """Run QCLM.run(debug=True) on a uniform-logits model and parse, per combination, the strings
    it built and the answer span it chose (qlatent/qclm/qclm.py prints them in debug mode)."""
    import torch

    pipe = SimpleNamespace(model=ZeroLogits(len(tokenizer)), tokenizer=tokenizer, device=torch.device("cpu"),
                           model_identifier="zero")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        question.run(model=pipe, pre_text=pre_text, scoring="prod", debug=True, mode=mode)
    combos, current = [], None
    for line in out.getvalue().splitlines():
        if "=== Combination" in line:
            current = {}
            combos.append(current)
        elif current is not None and (m := re.match(r"\[DEBUG\] (keyword_map|prefix_text|full_text)\s*= (.*)$", line)):
            current[m.group(1)] = ast.literal_eval(m.group(2))
        elif current is not None and (m := re.match(r"\[DEBUG\] answer_start = (\d+), answer_len = (\d+)", line)):
            current["answer_start"], current["answer_len"] = int(m.group(1)), int(m.group(2))
    return combos


def authors_form(peers, q, item):
    """The item as the authors write theirs: the answer's leading space at the end of the template
    ("Answer: {answer}"), the phrases without it (qpsychometric .../stai_s_qclm.py)."""
    question = peers.qlatent_question(q, item, answer_lead="")
    question._template = question._template.replace("{answer}", " {answer}")
    assert question._template.endswith(": {answer}")
    return question


# -- the same strings give the same numbers --------------------------------------------------------
def test_qlatent_per_variant_probabilities_equal_the_projects(peers, smollm2):
    """qlatent's QCLM.run on the project's own prompt strings (checked by the recording tokenizer)
    gives the project's per-variant probabilities, for all three of its aggregations."""
    model, tok, _ = smollm2
    q = load_questionnaire(STAI_S)
    cases = peers.build_cases(q, ROOT / "resources/stimuli/stress.yaml", 0, "brief", "\n\n", limit=1)
    pipe = peers.PipelineLike(model, peers.RecordingTokenizer(tok), model.device, "smollm2")
    scorer = make_scorer(model, "auto")
    for case in cases:
        logprobs = scorer.score(tokenize_requests(tok, case.contexts, case.continuations))
        for aggregation, scoring in peers.QLATENT_SCORING.items():
            if case.condition == "stress" and aggregation != "harmonic":
                continue  # one aggregation under the stimulus is enough (and the slow part)
            theirs, _ = peers.run_qlatent(q, case, pipe, scoring)
            ours = peers.project_probabilities(case, "m", q.id, logprobs, aggregation)
            both = ours.merge(theirs, on=["item_id", "cterm", "intensifier"], validate="1:1")
            assert len(both) == len(case.variants) == 48
            diff = np.abs(np.log(both["p_qlatent"]) - np.log(both["p_raw"]))
            assert diff.max() < 1e-4, (case.condition, aggregation, diff.max())


def test_lm_eval_loglikelihood_equals_the_engine(peers, smollm2):
    from lm_eval.models.huggingface import HFLM

    model, tok, _ = smollm2
    q = load_questionnaire(STAI_T)
    [vanilla, stress] = peers.build_cases(q, ROOT / "resources/stimuli/stress.yaml", 1, "brief", "\n\n", limit=1)
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=16)
    scorer = make_scorer(model, "auto")
    for case in (vanilla, stress):
        ll, _ = peers.run_lm_eval(lm, case)
        ours = [float(lp.sum()) for lp in scorer.score(tokenize_requests(tok, case.contexts, case.continuations))]
        assert np.max(np.abs(ll - np.array(ours))) < 1e-4


# -- the documented differences, through qlatent's own code --------------------------------------
def test_separator_is_one_newline_after_pre_text(peers, smollm2_tokenizer_dir):
    """qlatent: pre_text + "\\n" + item; the project: stimulus + "\\n\\n" + item."""
    from transformers import AutoTokenizer

    q = load_questionnaire(STAI_S)
    item = q.items[0]
    combos = qlatent_debug_run(peers.qlatent_question(q, item), AutoTokenizer.from_pretrained(smollm2_tokenizer_dir),
                               pre_text="STIMULUS")
    prefix = item.prefix(combos[0]["keyword_map"]["question"])
    assert combos[0]["prefix_text"] == "STIMULUS\n" + prefix
    assert peers.qlatent_pre_text("STIMULUS" + "\n\n") + "\n" == "STIMULUS\n\n"


@pytest.mark.parametrize("family", ["smollm2", "gemma3"])
def test_answer_span_of_the_authors_template_is_our_continuation(peers, family, smollm2_tokenizer_dir,
                                                                  gemma3_tokenizer_dir):
    """The authors' template ends "Answer: " and their phrases have no leading space; qlatent takes
    the tokens of full text after the first token where prefix and full text differ. On both
    tokenizer families and every variant of both questionnaires, that span is exactly the project's
    continuation (" " + phrase after "...Answer:"), conditioned on the same context tokens: the
    trailing space token of the prefix is dropped, not scored."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir if family == "smollm2" else gemma3_tokenizer_dir)
    checked = 0
    for path in (STAI_S, STAI_T):
        q = load_questionnaire(path)
        for item in q.items:
            for c in qlatent_debug_run(authors_form(peers, q, item), tok):
                cterm, phrase = c["keyword_map"]["question"], c["keyword_map"]["answer"]
                assert c["prefix_text"] == item.prefix(cterm) + " "
                [req] = tokenize_requests(tok, [item.prefix(cterm)], [CONTINUATION_LEAD + phrase])
                full = tok(c["full_text"])["input_ids"]
                assert tuple(full[:c["answer_start"]]) == req.context
                assert tuple(full[c["answer_start"]:]) == req.continuation
                checked += 1
    assert checked == 2 * 20 * 6 * 8


def test_first_divergence_scores_a_token_of_the_prefix_where_we_raise(peers, smollm2_tokenizer_dir):
    """Where a token merges across the boundary, qlatent's first-divergence rule silently scores
    from the merged token on (it spans prefix text); the project's boundary check raises."""
    from qlatent.qclm.qclm import QCLM
    from transformers import AutoTokenizer

    from qclm.engine import BoundaryError

    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    # "...feel" + "ings": the prefix's last token "Ġfeel" is replaced by "Ġfeelings" in the full text
    question = QCLM(template="Question: how are your feel{answer}", descriptor={},
                    dimensions={"answer": {"ings": 1.0}, "question": {"x": 1.0}}, index=["question"], scale="answer")
    [c] = qlatent_debug_run(question, tok)
    full = tok(c["full_text"])["input_ids"]
    span = tok.convert_ids_to_tokens(full[c["answer_start"]:])
    assert span == ["Ġfeelings"]  # P("Ġfeelings" | "Question: how are your"), not P("ings" | "...feel")
    with pytest.raises(BoundaryError):
        tokenize_requests(tok, ["Question: how are your feel"], ["ings"])


def test_chat_modes_put_the_stimulus_outside_the_chat(peers, smollm2_tokenizer_dir, gemma3_tokenizer_dir):
    """mode="chat": pre_text + "\\n" + chat_template(user: item prefix, right-stripped), generation
    prompt on; "chat_with_preamble" adds "My answer is " (trailing space); a tokenizer without a
    chat template (the Gemma-3 GGUF's) silently falls back to raw."""
    from transformers import AutoTokenizer

    q = load_questionnaire(STAI_S)
    item = q.items[0]
    smol = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    assert smol.chat_template
    for mode, tail in (("chat", ""), ("chat_with_preamble", "My answer is ")):
        c = qlatent_debug_run(authors_form(peers, q, item), smol, pre_text="STIMULUS", mode=mode)[0]
        prefix = item.prefix(c["keyword_map"]["question"])
        chat = smol.apply_chat_template([{"role": "user", "content": prefix}], tokenize=False,
                                        add_generation_prompt=True)
        assert c["prefix_text"] == "STIMULUS\n" + chat + tail
        assert c["prefix_text"].startswith("STIMULUS\n<|im_start|>system\n")  # the stimulus is before the system turn
        assert c["full_text"] == c["prefix_text"] + c["keyword_map"]["answer"]  # no space before the answer in "chat"
    gemma = AutoTokenizer.from_pretrained(gemma3_tokenizer_dir)
    assert not gemma.chat_template
    c = qlatent_debug_run(authors_form(peers, q, item), gemma, mode="chat")[0]
    assert c["prefix_text"] == item.prefix(c["keyword_map"]["question"]) + " "  # raw, silently


def test_a_chat_template_that_writes_bos_doubles_it(peers, gemma3_tokenizer_dir):
    """Gemma's chat templates begin with {{ bos_token }}; qlatent tokenizes the rendered chat text
    with the tokenizer's defaults, which add BOS again."""
    from transformers import AutoTokenizer

    q = load_questionnaire(STAI_S)
    item = q.items[0]
    tok = AutoTokenizer.from_pretrained(gemma3_tokenizer_dir)
    tok.chat_template = ("{{ bos_token }}{% for m in messages %}<start_of_turn>user\n{{ m['content'] }}<end_of_turn>\n"
                         "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
    c = qlatent_debug_run(authors_form(peers, q, item), tok, mode="chat")[0]
    ids = tok(c["prefix_text"])["input_ids"]
    assert ids[:2] == [tok.bos_token_id, tok.bos_token_id]
    with_stimulus = qlatent_debug_run(authors_form(peers, q, item), tok, pre_text="STIMULUS", mode="chat")[0]
    ids = tok(with_stimulus["prefix_text"])["input_ids"]
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 2  # the second one after the stimulus


def test_two_way_softmax_is_the_two_way_normalization_up_to_epsilon(peers):
    """QSOFTMAX(dim=["question", "answer"]) (the authors' validator) normalizes over cterms, then
    over intensifiers: method.md section 4 (qclm.equations.two_way_normalize), except that it adds
    1e-10 to every probability first, in float32."""
    import torch

    q = load_questionnaire(STAI_S)
    item = q.items[0]
    question = peers.qlatent_question(q, item)
    rng = np.random.default_rng(0)
    for scale in (1e-2, 1e-9):  # ordinary probabilities, and ones near qlatent's epsilon
        p = rng.uniform(0.1, 1.0, len(question._pdf)) * scale
        question._t = torch.tensor(p, dtype=torch.float32)
        question._pdf["P"] = p
        theirs = question.softmax(dim=["question", "answer"])._pdf
        grid = theirs.assign(P_in=p).pivot_table(index="question", columns="answer", values="P_in", sort=False)
        ours = pd.DataFrame(two_way_normalize(grid.to_numpy()), index=grid.index, columns=grid.columns)
        got = theirs.pivot_table(index="question", columns="answer", values="P", sort=False)
        got = got.loc[ours.index, ours.columns]
        diff = float(np.max(np.abs(got.to_numpy() - ours.to_numpy())))
        if scale == 1e-2:
            assert diff < 1e-6
        else:
            assert diff > 1e-3  # the epsilon now moves P_norm visibly


def test_mean_score_weighs_cterms_by_dict_pos_neg(peers):
    """qlatent's mean_score is mean(P_norm x W), W = w(answer) x w(question); with dict_pos_neg,
    w(question) = +1/|S+| for S+ and -1/|S-| for S-. Filtered to positive keywords (the validator's
    "positiveonly") it is eq. 2 divided by |S+|; unfiltered, S- rows enter with the opposite sign."""
    import torch

    q = load_questionnaire(STAI_S)
    item = q.items[0]
    question = peers.qlatent_question(q, item)
    rng = np.random.default_rng(1)
    p = rng.uniform(0.01, 1.0, len(question._pdf))
    question._t = torch.tensor(p, dtype=torch.float32)
    question._pdf["P"] = p
    norm = question.softmax(dim=["question", "answer"])
    positive = float(norm.mean_score(question.get_filter_for_postive_keywords(["answer"])))
    unfiltered = float(norm.mean_score())
    pdf = norm._pdf.assign(w=norm._pdf["answer"].map(question._dimensions["answer"]))
    plus = pdf["question"].isin(item.plus)
    grid = pdf.pivot_table(index="question", columns="answer", values="P", sort=False)
    weights = np.array([question._dimensions["answer"][a] for a in grid.columns])
    eq2 = item_score_matrix(grid.to_numpy(), grid.index.isin(item.plus), weights)
    n_plus, n_minus = len(item.plus), len(item.minus)
    assert positive == pytest.approx(eq2 / n_plus, rel=1e-5)
    s_plus = float((pdf.P * pdf.w)[plus].sum()) / n_plus
    s_minus = float((pdf.P * pdf.w)[~plus].sum()) / n_minus
    assert unfiltered == pytest.approx((s_plus - s_minus) / len(pdf), rel=1e-5)


def test_run_defaults_are_geometric_mean_and_raw(peers):
    import inspect

    from qlatent.qclm.qclm import QCLM

    defaults = {k: v.default for k, v in inspect.signature(QCLM.run).parameters.items()}
    assert defaults["scoring"] == "geometric_mean" and defaults["mode"] == "raw"


# -- the preset: config/qlatent.yaml reproduces qlatent's numbers ---------------------------------
def test_the_qlatent_preset_reproduces_qlatents_numbers(peers, smollm2):
    """config/qlatent.yaml + config/models_qlatent.tsv (SmolLM2-Instruct in chat, stimulus before the chat
    markup, "\\n", geometric mean, first_divergence, epsilon 1e-10, mean_score over S+) through the project's
    own scoring job give the per-variant probabilities and the item scores of qlatent's QCLM.run(mode="chat")
    + QSOFTMAX + mean_score(positive keywords) on the authors' form of the item."""
    from dataclasses import replace

    import yaml
    from conftest import likert_cell, loaded_model

    from qclm import settings
    from qclm.contexts import ContextSettings
    from qclm.equations import condition_tables
    from qclm.jobs.score_model import score_cell
    from qclm.models.table import load_model_table
    from qclm.probes.likert.kind import LikertProbe, Wordings, item_contexts
    from qclm.prompts import PromptBuilder, PromptFormat
    from qclm.stimuli import load_stimuli

    config = yaml.safe_load((ROOT / "config/qlatent.yaml").read_text())
    config.update(limit_items=1, limit_stimuli=1)
    scoring = settings.section(config, settings.EQUATIONS)
    engine = settings.section(config, settings.ENGINE)
    spec = load_model_table(ROOT / config["models"])["smollm2-135m-instruct"]
    assert spec.prompt_format == "chat"
    protocol = ContextSettings.from_config(config)
    q = load_questionnaire(STAI_S)
    stress_file = ROOT / config["stimuli"]["classes"]["stress"]
    stimulus = load_stimuli(stress_file, "stress").stimuli[0].text(protocol.version)
    model, tok, _ = smollm2
    pipe = peers.PipelineLike(model, peers.RecordingTokenizer(tok), model.device, "smollm2")
    builder = PromptBuilder(tok, PromptFormat.from_settings(spec.prompt_format, engine))
    loaded = loaded_model(spec, model, tok, engine)

    for condition, files, pre_text in (("vanilla", [], None), ("stress", [stress_file], stimulus)):
        cell = replace(likert_cell(STAI_S, condition, files), config=LikertProbe.scoring_config(config))
        tokens, _ = score_cell(loaded, cell, protocol)
        variants, items = condition_tables(tokens, scoring["aggregation"], scoring["item_score"],
                                           scoring["normalization_epsilon"])
        [ctx] = item_contexts(q, condition, [load_stimuli(f, "stress") for f in files] or None, protocol,
                              Wordings.from_config(config))
        texts, continuations = builder.build(ctx.stimulus, ctx.variants)

        item = q.items[0]
        question = authors_form(peers, q, item)
        pipe.tokenizer.texts.clear()
        question.run(model=pipe, pre_text=pre_text, scoring=peers.QLATENT_SCORING[scoring["aggregation"]],
                     mode="chat")
        assert set(pipe.tokenizer.texts) == set(texts) | {t + c for t, c in zip(texts, continuations)}, condition

        theirs = question._pdf.rename(columns={"question": "cterm", "answer": "intensifier", "P": "p_qlatent"})
        both = variants.merge(theirs[["cterm", "intensifier", "p_qlatent"]], on=["cterm", "intensifier"],
                              validate="1:1")
        assert len(both) == len(ctx.variants) == 48
        assert np.abs(np.log(both["p_qlatent"]) - np.log(both["p_raw"])).max() < 1e-4, condition
        normalized = question.softmax(dim=["question", "answer"])
        their_score = float(normalized.mean_score(question.get_filter_for_postive_keywords(["answer"])))
        [our_score] = items["score"]
        assert our_score == pytest.approx(their_score, rel=1e-4, abs=1e-7), condition
