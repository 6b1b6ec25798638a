"""Prompt formats (raw, chat, chat_preamble), stimulus placement, ``qclm render``, and the validation of chat
formats and template ids."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
import yaml
from conftest import MODEL_TABLE_HEADER, ROOT, likert_cell, likert_requests, load_dir, write_workflow_config
from transformers import AutoTokenizer

from qclm.engine import FullSequenceScorer, PrefixTreeScorer, tokenize_requests
from qclm.parquet import read_metadata, write_parquet
from qclm.jobs.backends import load
from qclm.jobs.score_model import score_cell
from qclm.models.table import parse_model_row
from qclm.prompts import ChatTemplateError, PromptBuilder, PromptFormat
from qclm.contexts import ContextSettings
from qclm.probes.likert.kind import Wordings, item_contexts
from qclm.questionnaire import load_questionnaire
from qclm.commands.render import render
from qclm.stimuli import load_stimuli
from qclm.validation import validate_config_file

STAI_S = ROOT / "resources/questionnaires/stai_s.yaml"
STRESS = ROOT / "resources/stimuli/stress.yaml"
#: the shape of Gemma's chat template: it writes the BOS token itself, and the tokenizer adds one too
GEMMA_STYLE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else "
               "m['role'] }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
               "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


@pytest.fixture(scope="module")
def smollm2_tok(smollm2_tokenizer_dir):
    return AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)


@pytest.fixture(scope="module")
def gemma_chat_tok(gemma3_tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(gemma3_tokenizer_dir)
    tok.chat_template = GEMMA_STYLE
    return tok


def _contexts(limit_stimuli=1):
    q = load_questionnaire(STAI_S)
    stress = item_contexts(q, "stress", [load_stimuli(STRESS)],
                           ContextSettings(limit_items=2, limit_stimuli=limit_stimuli), Wordings("first"))
    return q, stress


@pytest.mark.parametrize("tok_name", ["smollm2_tok", "gemma_chat_tok"])
def test_chat_context_ids_equal_apply_chat_template(request, tok_name):
    tok = request.getfixturevalue(tok_name)
    q, [ctx] = _contexts()
    builder = PromptBuilder(tok, PromptFormat("chat"))
    requests = likert_requests(builder, q, ctx)
    for v, r in list(zip(ctx.variants, requests))[:: 17]:
        want = tok.apply_chat_template([{"role": "user", "content": ctx.stimulus + v.prefix}], tokenize=True,
                                       add_generation_prompt=True)["input_ids"]
        assert list(r.context) == list(want)
        assert tok.decode(list(r.continuation)).strip() == v.intensifier  # the first tokens of the answer
    if tok("")["input_ids"] == [tok.bos_token_id]:  # Gemma adds a BOS: exactly one, at the start
        assert list(requests[0].context).count(tok.bos_token_id) == 1 and requests[0].context[0] == tok.bos_token_id


def test_prefix_placement_puts_the_stimulus_before_the_chat_markup(gemma_chat_tok):
    tok = gemma_chat_tok
    q, [ctx] = _contexts()
    builder = PromptBuilder(tok, PromptFormat("chat", placement="prefix"))
    text = builder.context(ctx.stimulus, ctx.variants[0].prefix)
    assert text.startswith(ctx.stimulus + "<start_of_turn>user\n") and "<bos>" not in text
    ids = tok(text)["input_ids"]
    assert ids.count(tok.bos_token_id) == 1 and ids[0] == tok.bos_token_id


def test_chat_preamble_opens_the_answer(smollm2_tok):
    q, [ctx] = _contexts()
    builder = PromptBuilder(smollm2_tok, PromptFormat("chat_preamble", preamble="My answer is"))
    v = ctx.variants[0]
    assert builder.context(ctx.stimulus, v.prefix).endswith("<|im_start|>assistant\nMy answer is")
    assert builder.continuation(v.intensifier) == " " + v.intensifier
    assert PromptBuilder(smollm2_tok, PromptFormat("raw")).context(ctx.stimulus, v.prefix) == ctx.texts[0]


def test_a_chat_format_needs_a_chat_template(gemma3_tokenizer_dir):
    with pytest.raises(ChatTemplateError, match="prompt format chat needs a chat template"):
        PromptBuilder(AutoTokenizer.from_pretrained(gemma3_tokenizer_dir), PromptFormat("chat"))
    with pytest.raises(ValueError, match="stimulus placement must be one of user, prefix"):
        PromptFormat.from_settings("chat", {"stimulus_placement": "system"})


@pytest.mark.parametrize("fixture, template", [("tiny_llama_dir", None), ("tiny_gemma_dir", GEMMA_STYLE)])
def test_engine_equals_full_sequences_in_chat_mode_and_shares_the_chat_header(request, fixture, template):
    model, tok = load_dir(request.getfixturevalue(fixture))
    if template:  # the test's own tokenizer: the shared one stays as the directory has it
        tok = AutoTokenizer.from_pretrained(request.getfixturevalue(fixture))
        tok.chat_template = template
    q, [ctx] = _contexts()
    requests = likert_requests(PromptBuilder(tok, PromptFormat("chat")), q, ctx)
    tree = PrefixTreeScorer(model, pack_tokens=512)
    full = FullSequenceScorer(model, batch_size=8)
    a, b = tree.score(requests), full.score(requests)
    assert max(float(np.max(np.abs(x - y))) for x, y in zip(a, b)) <= 1e-4
    # the chat header and the stimulus are computed once: far fewer tokens than full sequences
    assert tree.stats.tokens_computed * 10 < full.stats.tokens_computed


def test_scoring_records_the_prompt_format_in_the_provenance(tmp_path, tiny_llama_dir):
    spec = parse_model_row({"name": "tiny", "source": str(tiny_llama_dir), "revision": "", "params_b": "0.001",
                            "type": "instruct", "family": "t", "dtype": "float32", "prompt_format": "chat_preamble"},
                           "test", 0)
    engine = {"method": "auto", "stimulus_placement": "prefix", "answer_preamble": "I'd say"}
    df, meta = score_cell(load(spec, None, engine), likert_cell(STAI_S, "stress", [STRESS], "first"),
                          ContextSettings(limit_items=1, limit_stimuli=1))
    write_parquet(df, tmp_path / "x.parquet", meta)
    back = read_metadata(tmp_path / "x.parquet")
    assert (back["prompt_format"], back["stimulus_placement"], back["answer_preamble"]) == ("chat_preamble",
                                                                                            "prefix", "I'd say")
    assert back["templates_scored"] == ["question"] and back["templates"] == ["question", "statement", "interview"]


# --------------------------------------------------------------------------- qclm render

def _render_config(tmp_path, tiny_llama_dir, tiny_gemma_dir, llama_format="chat"):
    cfg = write_workflow_config(tmp_path, {"tiny-llama": tiny_llama_dir, "tiny-gemma3": tiny_gemma_dir})
    (tmp_path / "models.tsv").write_text(
        MODEL_TABLE_HEADER.rstrip("\n") + "\tprompt_format\n"
        f"tiny-llama\t{tiny_llama_dir}\t\t0.001\tinstruct\ttiny\tfloat32\t{llama_format}\n"
        f"tiny-gemma3\t{tiny_gemma_dir}\t\t0.002\tbase\ttiny\tfloat32\traw\n")
    return cfg


def test_render_shows_the_raw_and_the_chat_prompts(tmp_path, tiny_llama_dir, tiny_gemma_dir):
    cfg = _render_config(tmp_path, tiny_llama_dir, tiny_gemma_dir)
    out = io.StringIO()
    assert render(str(cfg), "tiny-llama", "stai_s", "stress", item="S02", stimulus="stress02", limit=2, out=out) == 0
    text = out.getvalue()
    assert text.count("### request") == 2 and "stimulus stress02" in text and "item S02" in text
    assert "<|im_start|>user\n" + load_stimuli(STRESS).stimuli[1].text("long") in text
    assert "Answer:<|im_end|>\n<|im_start|>assistant\n\n--- continuation ---\n'not at all'" in text
    out = io.StringIO()
    assert render(str(cfg), "tiny-gemma3", "stai_s", "vanilla", limit=1, out=out) == 0
    text = out.getvalue()
    assert "--- prompt: " in text and "<bos>Question: Right now, at this moment, do you feel agitated?\nAnswer:" in text
    assert "--- continuation ---\n' not at all'" in text and "--- continuation tokens (" in text


def test_render_uses_the_scoring_jobs_requests(tmp_path, tiny_llama_dir, tiny_gemma_dir, capsys):
    """What render prints is the decoded context of the very requests the scoring job scores."""
    cfg = _render_config(tmp_path, tiny_llama_dir, tiny_gemma_dir)
    model, tok = load_dir(tiny_llama_dir)
    q, [ctx] = _contexts()
    requests = likert_requests(PromptBuilder(tok, PromptFormat("chat")), q, ctx)
    out = io.StringIO()
    render(str(cfg), "tiny-llama", "stai_s", "stress", stimulus="stress01", limit=1, out=out)
    prompt = out.getvalue().split("as the model sees them ---\n", 1)[1].split("\n--- continuation ---")[0]
    assert prompt == tok.decode(list(requests[0].context), skip_special_tokens=False)


# --------------------------------------------------------------------------- validation

def test_validate_names_the_row_of_a_chat_model_without_a_template(tmp_path, tiny_llama_dir, tiny_gemma_dir):
    cfg = _render_config(tmp_path, tiny_llama_dir, tiny_gemma_dir)
    table = (tmp_path / "models.tsv").read_text().replace("tiny\tfloat32\traw", "tiny\tfloat32\tchat")
    (tmp_path / "models.tsv").write_text(table)
    problems = validate_config_file(cfg, ROOT / "src/qclm/schemas/config.schema.yaml")
    assert problems == [(str(tmp_path / "models.tsv"), "line 3 (model tiny-gemma3): column prompt_format",
                         f"chat needs a chat template, and the tokenizer of {tiny_gemma_dir} has none (a base "
                         "model?): use raw")]
    (tmp_path / "models.tsv").write_text(table.replace("base\ttiny\tfloat32\tchat", "base\ttiny\tfloat32\tdialog"))
    assert validate_config_file(cfg, ROOT / "src/qclm/schemas/config.schema.yaml") == [
        (str(tmp_path / "models.tsv"), "line 3 (model tiny-gemma3): column prompt_format",
         "must be one of raw, chat, chat_preamble (or empty: raw); got 'dialog'")]


@pytest.mark.parametrize("templates, expected", [
    ({"score": ["question", "statment"]},
     [("field templates.score", "unknown template id 'statment': {q} has templates question, statement, interview")]),
    ({"select": "wording9"},
     [("field templates.select", "unknown template id 'wording9': {q} has templates question, statement, interview")]),
    ({"score": "first", "select": "statement"},
     [("field templates.select", "selects template 'statement', which templates.score does not score")]),
    ({"select": "all", "extra_limit_stimuli": 2},
     [("field templates.select", "all averages over the templates, but templates.extra_limit_stimuli scores the "
       "templates after the first on a subset of the stimuli only: select first (or a template id), or set "
       "extra_limit_stimuli to null")]),
])
def test_template_settings_are_validated(tmp_path, tiny_llama_dir, templates, expected):
    cfg = write_workflow_config(tmp_path, {"tiny-llama": tiny_llama_dir},
                                questionnaires={"stai_s": str(STAI_S)}, templates=templates)
    problems = validate_config_file(cfg, ROOT / "src/qclm/schemas/config.schema.yaml")
    assert problems == [(str(cfg), loc, msg.format(q=STAI_S)) for loc, msg in expected]


def test_extra_templates_are_scored_on_vanilla_and_the_first_stimuli_only():
    q = load_questionnaire(STAI_S)
    stress = load_stimuli(STRESS)
    run, wordings = ContextSettings(limit_items=1, limit_stimuli=3), Wordings("all", extra_limit_stimuli=1)
    [vanilla] = item_contexts(q, "vanilla", None, run, wordings)
    contexts = item_contexts(q, "stress", [stress], run, wordings)
    assert sorted({v.template for v in vanilla.variants}) == ["interview", "question", "statement"]
    assert [sorted({v.template for v in c.variants}) for c in contexts] == [
        ["interview", "question", "statement"], ["question"], ["question"]]
    assert len(vanilla.variants) == 3 * 6 * 8
    ids = Wordings(("interview",)).template_ids(q)
    assert ids == ["question", "interview"]  # the first template is always scored
