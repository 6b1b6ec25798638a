"""The Core Sentiment Inventory probe kind (issue 18): word files and their problems, the shuffles, the prompts in
every prompt format, the numbers (O + P + N = 1, consistency >= O + P, the random-consistency constant against a
simulation), a tiny model trained to prefer one label for some words, list and single mode on one prompt, and
the story test's path. The workflow wiring is in tests/test_workflow.py (the shared run)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, load_dir, loaded_model

from qclm.contexts import Context
from qclm.errors import InputError
from qclm.models.table import ModelSpec
from qclm.probes.base import Asking, Instance, ScoringCell
from qclm.probes.csi import prompts as P
from qclm.probes.csi import scores as S
from qclm.probes.csi.kind import ANSWER_COLUMNS, CSIProbe
from qclm.probes.csi.words import load_words, parse_words, word_problems

WORDS = ROOT / "resources" / "csi" / "words.tsv"
CONTROL = ROOT / "resources" / "csi" / "valence_control.tsv"


def probe(**settings) -> CSIProbe:
    return CSIProbe(Instance("csi", "csi", {**CSIProbe.defaults(), "words": str(WORDS), "control": str(CONTROL),
                                            **settings}))


# -- word files ------------------------------------------------------------------------------------------------------

def test_the_shipped_lists_load_with_their_attribution():
    words = load_words(WORDS)
    assert len(words.words) == 5000 and len({w.word for w in words.words}) == 5000
    ranks = [w.freq_rank for w in words.words]
    assert ranks == sorted(ranks)  # frequency order: limit_words takes the most frequent
    assert {w.pos for w in words.words} == {"noun", "verb", "noun|verb"}
    head = WORDS.read_text().split("\nword\t")[0]
    assert "CC BY-SA 4.0" in head and "wordfreq" in head and "VADER" in head and "lemminflect" in head
    first = [w.word for w in words.head(300)]
    for word in ("time", "people", "love", "death", "music"):
        assert word in first
    for not_a_head in ("the", "good", "very", "years", "found", "or"):  # function words, modifiers, inflections
        assert not_a_head not in first
    control = load_words(CONTROL)
    signs = [np.sign(w.valence) for w in control.words]
    assert signs.count(1) == signs.count(-1) == 50
    assert "CC BY-SA 4.0" in CONTROL.read_text().split("\nword\t")[0]
    # each names the command that rebuilds both (qclm words build), as it was run
    command = ("#   qclm words build --size 5000 --out resources/csi/words.tsv "
               "--control resources/csi/valence_control.tsv\n")
    assert command in head and command in CONTROL.read_text().split("\nword\t")[0]


def test_a_plain_list_and_a_tsv(tmp_path):
    plain = tmp_path / "mine.txt"
    plain.write_text("# my words\nsun\n\nrain\nice cream\n")
    assert [w.word for w in load_words(plain).words] == ["sun", "rain", "ice cream"]
    tsv = tmp_path / "mine.tsv"
    tsv.write_text("extra\tword\tvalence\nx\tsun\t2.5\ny\train\t\n")
    words = load_words(tsv).words
    assert [(w.word, w.valence, w.line) for w in words] == [("sun", 2.5, 2), ("rain", None, 3)]


def test_bad_word_files_are_named_by_file_and_line(tmp_path):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("# header comment\nword\tfreq_rank\tvalence\nsun\t1\t2\nsun\t2\t1\nrain\tzero\t1\n"
                   "snow\t3\tlots\nwind\t4\n\t5\t1\n")
    lines = InputError(word_problems(tsv)).lines
    assert lines == [f"{tsv}: line 4, field word: 'sun' is also on line 3",
                     f"{tsv}: line 5, field freq_rank: 'zero' is not a positive integer",
                     f"{tsv}: line 6, field valence: 'lots' is not a finite number",
                     f"{tsv}: line 7: 2 tab-separated fields, the header has 3",
                     f"{tsv}: line 8, field word: empty word"]
    # the checks every questionnaire's text gets: a control character, a word only invisible characters, a column
    # named twice
    _, problems = parse_words("word\tpos\tpos\nsun\x07\tnoun\tnoun\n\u200b\tnoun\tnoun\n", "odd.tsv")
    assert [(where, problem.split(":")[0].split(";")[0]) for _, where, problem in problems] == [
        ("line 1 (header)", "column 'pos' is given twice (columns 2 and 3)"),
        ("line 2, field word", "'sun\\x07' has the control character U+0007 (BELL) at character 4"),
        ("line 3, field word", "'\\u200b' has only invisible characters (U+200B (ZERO WIDTH SPACE))")]
    _, problems = parse_words("pos\tvalence\nnoun\t1\n", "x.tsv")
    assert problems == [("x.tsv", "line 1", "the header (pos, valence) has no 'word' column")]
    _, problems = parse_words("# only a comment\n\n", "empty.txt")
    assert problems == [("empty.txt", "file", "has no words (one word per line, or a TSV with a word column)")]
    with pytest.raises(InputError, match="does not exist"):
        load_words(tmp_path / "missing.txt")


def test_the_config_check_reports_the_word_file(tmp_path):
    from qclm import probes

    bad = tmp_path / "w.txt"
    bad.write_text("sun\nsun\n")
    one_sign = tmp_path / "c.tsv"
    one_sign.write_text("word\tvalence\nsun\t2\nhope\t1.5\n")
    config = {"probes": {"csi": {"kind": "csi", "words": str(bad), "control": str(one_sign), "list_sise": 3}}}
    found = probes.problems(config, "run.yaml", ["vanilla"])
    assert [p[:2] for p in found] == [("run.yaml", "field probes.csi.list_sise")]  # the misspelt key, alone
    del config["probes"]["csi"]["list_sise"]
    found = probes.problems(config, "run.yaml", ["vanilla"])
    assert found == [(str(bad), "line 2, field word", "'sun' is also on line 1")]
    bad.write_text("sun\nrain\n")
    found = probes.problems(config, "run.yaml", ["vanilla"])
    assert found == [(str(one_sign), "column valence",
                      "the valence control needs words of both signs in its valence column")]


# -- shuffles and prompts ----------------------------------------------------------------------------------------------

def test_shuffles_are_seeded_and_stable_under_additions():
    words = [f"w{i}" for i in range(100)]
    lists = P.shuffled_lists(words, "words", 3, 30, seed=0, probe="csi")
    assert [len(wl.words) for wl in lists if wl.repetition == 1] == [25, 25, 25, 25]  # sizes within one
    for r in (1, 2, 3):
        assert sorted(w for wl in lists if wl.repetition == r for w in wl.words) == sorted(words)
    assert [wl.order for wl in lists if wl.index == 1] == ["AB", "BA", "AB"]
    order = [w for wl in lists if wl.repetition == 1 for w in wl.words]
    assert order != words and order != [w for wl in lists if wl.repetition == 2 for w in wl.words]
    assert lists == P.shuffled_lists(words, "words", 3, 30, seed=0, probe="csi")
    assert lists != P.shuffled_lists(words, "words", 3, 30, seed=1, probe="csi")
    # a fourth repetition leaves the first three as they were
    assert P.shuffled_lists(words, "words", 4, 30, seed=0, probe="csi")[:len(lists)] == lists
    # a new word keeps every other word's order relative to the rest
    more = [w for wl in P.shuffled_lists(words + ["new"], "words", 1, 30, 0, "csi") for w in wl.words]
    assert [w for w in more if w != "new"] == order


def test_prompts_in_every_format(smollm2_tokenizer_dir):
    from transformers import AutoTokenizer

    from qclm.prompts import PromptBuilder, PromptFormat

    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    wl = P.WordList("words", 2, "BA", 1, ("time", "music"))
    raw = P.chain(PromptBuilder(tok, PromptFormat("raw")), "A story.\n\n", wl, ["comedy", "tragedy"], "other")
    assert raw.context.startswith("A story.\n\nFor each word in the list below, decide whether it makes you think "
                                  "of tragedy or of comedy.")  # BA: the labels named in swapped order
    assert raw.context.endswith("Words:\ntime\nmusic\n\nAnswers:")
    assert [s.text for s in raw.steps] == ["\ntime:", "\nmusic:"]
    assert raw.steps[0].options == (" comedy", " tragedy", " other")  # options keep their order: a, b, other
    chat = P.chain(PromptBuilder(tok, PromptFormat("chat")), "", wl, ["comedy", "tragedy"], "other")
    assert chat.context.endswith("music<|im_end|>\n<|im_start|>assistant\n")
    assert [s.text for s in chat.steps] == ["time:", "\nmusic:"]  # the answer's first line starts bare
    single = P.single(PromptBuilder(tok, PromptFormat("raw")), "", "time", ["good", "bad"], "other", "AB")
    assert single.context.endswith("think of good or of bad. If a word makes you think of neither, answer other. Go "
                                   "through the words in the order given and answer one word per line: the word, a "
                                   "colon and your choice.\n\nWords:\ntime\n\nAnswers:\ntime:")
    rating = P.rating_request(PromptBuilder(tok, PromptFormat("raw")), "", "Once upon a time.")
    assert rating.options[0] == " 1/10" and rating.options[-1] == " 10/10" and rating.values[-1] == 10.0


# -- the numbers --------------------------------------------------------------------------------------------------------

def answers_frame(choices: np.ndarray, bias: np.ndarray | None = None, condition: str = "vanilla",
                  stimulus: str = "", prompts: list[int] | None = None) -> pd.DataFrame:
    """An answers table of words x repetitions choices ('a', 'b', 'other'), each word alone (single mode);
    ``prompts``: the prompt each repetition asks (repetitions with the same number asked the same prompt; default:
    each its own)."""
    n_words, reps = choices.shape
    bias = np.zeros_like(choices, dtype=float) if bias is None else bias
    prompts = list(range(reps)) if prompts is None else prompts
    rows = []
    for w in range(n_words):
        for r in range(reps):
            rows.append({"model": "m", "probe": "csi", "condition": condition, "stimulus_id": stimulus,
                         "part": "words", "repetition": r + 1, "label_order": "AB" if r % 2 == 0 else "BA",
                         "wording": 1, "prompt_id": f"w{w}/p{prompts[r]}",
                         "list_index": w + 1, "position": 1, "list_size": 1, "word": f"w{w}",
                         "label_a": "comedy", "label_b": "tragedy", "label_other": "other",
                         "logp_a": -1.0 + bias[w, r], "logp_b": -1.0, "logp_other": -5.0,
                         "choice": choices[w, r]})
    return pd.DataFrame(rows).reindex(columns=ANSWER_COLUMNS)


def test_random_consistency_matches_a_simulation():
    """2 x 0.5^R is what coin flips between the two labels give, through the kind's own computation."""
    rng = np.random.default_rng(0)
    n = 4000
    for reps in (1, 2, 3, 5):
        choices = np.where(rng.random((n, reps)) < 0.5, "a", "b")
        table = S.score_table(answers_frame(choices), n_boot=0, seed=0)
        expected = S.random_consistency(reps)
        se = np.sqrt(expected * (1 - expected) / n)
        assert abs(table["consistency"].iloc[0] - expected) < 4 * se + 1e-12, (reps, table["consistency"].iloc[0])
        assert table["consistency_random"].iloc[0] == expected
        # the independence baseline with the model's own answer rates is the same for fair coins
        assert abs(table["consistency_independent"].iloc[0] - expected) < 0.02
    assert S.random_consistency(5) == 0.0625


def test_o_p_n_consistency_and_reluctancy_by_hand():
    choices = np.array([["a"] * 3, ["b"] * 3, ["other"] * 3, ["a", "b", "a"], ["a", "other", "a"]])
    table = S.score_table(answers_frame(choices), n_boot=50, seed=0).iloc[0]
    assert (table["O"], table["P"], table["N"]) == pytest.approx((0.2, 0.2, 0.6))
    assert table["consistency"] == pytest.approx(0.6)  # the all-other word is consistent, not O or P
    assert table["reluctancy"] == pytest.approx(4 / 15)
    assert table["O_ci_low"] <= table["O"] <= table["O_ci_high"]
    words = S.word_table(answers_frame(choices)).set_index("word")
    assert words["consistent_label"].tolist() == ["comedy", "tragedy", "other", "", ""]


def test_the_valence_auc_and_the_interpretability_mark():
    assert S.auc([2, 3], [0, 1]) == 1.0 and S.auc([0, 1], [2, 3]) == 0.0 and S.auc([1], [1]) == 0.5
    rng = np.random.default_rng(1)
    valence = np.repeat([2.0, -2.0], 40)
    rows = []
    for name, bias in (("separates", valence + rng.normal(0, 1, 80)), ("noise", rng.normal(0, 1, 80))):
        rows.append(pd.DataFrame({"model": name, "probe": "csi", "condition": "vanilla", "part": "control",
                                  "word": [f"w{i}" for i in range(80)], "valence": valence, "mean_bias": bias}))
    v = S.validity_table(pd.concat(rows), n_boot=500, seed=0).set_index("model")
    assert v.loc["separates", "auc"] > 0.9 and v.loc["separates", "interpretable"] == True  # noqa: E712
    assert v.loc["noise", "auc_ci_low"] < 0.5 < v.loc["noise", "auc_ci_high"]
    assert v.loc["noise", "interpretable"] == False  # noqa: E712


def test_condition_contrasts_are_paired_over_words():
    rng = np.random.default_rng(2)
    n, reps = 60, 3
    base = rng.normal(0, 1, (n, 1)).repeat(reps, axis=1)
    choice_v = np.where(base > 0, "a", "b")
    stress = []
    for s in range(2):
        shifted = base - 0.5 + rng.normal(0, 0.01, (n, reps))
        stress.append(answers_frame(np.where(shifted > 0, "a", "b"), shifted, "stress", f"stress_{s}"))
    answers = pd.concat([answers_frame(choice_v, base), *stress])
    table = S.contrast_table(answers, [("vanilla", "stress")], n_boot=200, seed=0, min_stimuli=10).iloc[0]
    assert table["bias_diff"] == pytest.approx(0.5, abs=0.01)  # first minus second
    assert table["bias_diff_ci_low"] > 0.45 and table["p_wilcoxon"] < 1e-6
    assert table["P_diff"] < 0 < table["O_diff"] and table["underpowered"]  # 2 stimuli < 10
    assert table["n_stimuli_second"] == 2 and table["n_words"] == n


# -- scoring on tiny models -----------------------------------------------------------------------------------------------

def cell(loaded, contexts, condition="vanilla", model_type="base", seed=0) -> ScoringCell:
    return ScoringCell(condition, contexts, loaded.backend, loaded.prompts,
                       Asking(loaded.spec.name, model_type, seed))


def tiny(tiny_llama_dir, engine=None):
    model, tok = load_dir(tiny_llama_dir)
    spec = ModelSpec("tiny-llama", str(tiny_llama_dir), "", 0.001, "base", "tiny", "float32")
    return model, tok, loaded_model(spec, model, tok, engine or {"method": "auto"})


def test_real_output_sums_to_one_and_consistency_covers_o_and_p(tiny_llama_dir, tmp_path):
    """On a tiny model's real answers: every answer is one of the three options, O + P + N = 1 and consistency >=
    O + P, per context and per word."""
    _, _, loaded = tiny(tiny_llama_dir)
    kind = probe(limit_words=24, repetitions=3, list_size=8)
    raw, own = kind.score(cell(loaded, [Context("vanilla")]))
    assert len(raw) == (24 + 100) * 3 and set(raw["choice"]) <= {"a", "b", "other"}
    assert own["csi_n_words"] == 24 and own["csi_story_test"] is False  # a base model: no story test
    np.testing.assert_allclose(raw[["p_a", "p_b", "p_other"]].sum(axis=1), 1, atol=1e-9)
    assert (raw[["logp_a", "logp_b", "logp_other"]] < 0).all().all()  # normalized log-probabilities
    tables = S.collect_tables([raw])
    scores = S.score_table(tables["answers"], n_boot=100, seed=0).iloc[0]
    assert scores["O"] + scores["P"] + scores["N"] == pytest.approx(1)
    assert scores["consistency"] >= scores["O"] + scores["P"]
    words = tables["words"]
    assert (words["consistent_share"] >= words["o_share"] + words["p_share"] - 1e-12).all()
    assert len(tables["items"]) == 24 and set(tables["items"]["instrument"]) == {"csi"}


def test_list_and_single_mode_ask_the_same_first_question(tiny_llama_dir):
    """A list of one word in list mode (a chain) and single mode (a forced choice) are one prompt: their numbers
    agree, and single mode scores each distinct prompt once."""
    _, _, loaded = tiny(tiny_llama_dir)
    settings = dict(limit_words=6, repetitions=2, control=None, wordings=1)
    chain, _ = probe(mode="list", list_size=1, **settings).score(cell(loaded, [Context("vanilla")]))
    single, _ = probe(mode="single", **settings).score(cell(loaded, [Context("vanilla")]))
    key = ["word", "repetition"]
    a, b = chain.sort_values(key).reset_index(drop=True), single.sort_values(key).reset_index(drop=True)
    np.testing.assert_allclose(a[["logp_a", "logp_b", "logp_other"]], b[["logp_a", "logp_b", "logp_other"]],
                               atol=2e-4)
    assert (a["choice"] == b["choice"]).all() and (a["prompt_id"] == b["prompt_id"]).all()
    labelled = probe(mode="single", **settings).requests(Context("vanilla"), loaded.prompts, Asking())
    assert len(labelled) == 6 * 2  # per word: the two label orders, each once


def train_to_prefer(model, tok, kind: CSIProbe, prefer: dict[str, int], steps: int = 40) -> None:
    """A few steps of Adam on the kind's own chains: at each preferred word, its label (0: first, 1: second) is
    the target; the answers appended are the preferred labels, and ``other`` elsewhere."""
    import torch

    from qclm.engine.chains import tokenize_chains

    requests = [r.request for r in kind.requests(Context("vanilla"), loaded_prompts(tok), Asking())]
    chains = tokenize_chains(tok, requests)
    seqs, targets = [], []
    for req, ch in zip(requests, chains):
        ids, tgt = list(ch.context), []
        for step, (text, options) in zip(req.steps, ch.steps):
            word = step.text.strip().rstrip(":")
            ids += list(text)
            k = prefer.get(word, 2)
            if word in prefer:
                tgt.append((len(ids) - 1, options[k][0]))
            ids += list(options[k])
        seqs.append(ids)
        targets.append(tgt)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small ops: one thread is many times faster than two on a busy machine
    for _ in range(steps):
        opt.zero_grad()
        loss = 0
        for ids, tgt in zip(seqs, targets):
            hidden = model.model(torch.tensor([ids])).last_hidden_state[0]
            logits = model.lm_head(hidden[torch.tensor([p for p, _ in tgt])])  # the head at the targets only
            loss = loss + torch.nn.functional.cross_entropy(logits, torch.tensor([t for _, t in tgt]))
        loss.backward()
        opt.step()
    torch.set_num_threads(threads)
    model.eval()


def loaded_prompts(tok):
    from qclm.prompts import PromptBuilder, PromptFormat

    return PromptBuilder(tok, PromptFormat("raw"))


def test_a_tiny_model_trained_to_prefer_a_label_shows_those_words_as_consistent(tiny_llama_dir, tmp_path):
    model, tok, loaded = tiny(tiny_llama_dir)
    kind = probe(limit_words=12, repetitions=3, list_size=6, control=None)
    words = [w.word for w in kind.parts()[0][1]]
    prefer = {w: 0 for w in words[:3]} | {w: 1 for w in words[3:6]}

    def label_of(raw):
        table = S.word_table(S.collect_tables([raw])["answers"]).set_index("word")
        return table["consistent_label"]

    before = label_of(kind.score(cell(loaded, [Context("vanilla")]))[0])
    assert [before[w] for w in words[:6]] != ["comedy"] * 3 + ["tragedy"] * 3
    train_to_prefer(model, tok, kind, prefer)
    trained = loaded_model(loaded.spec, model, tok, {"method": "auto"})
    raw, _ = kind.score(cell(trained, [Context("vanilla")]))
    after = label_of(raw)
    assert [after[w] for w in words[:6]] == ["comedy"] * 3 + ["tragedy"] * 3
    scores = S.score_table(S.collect_tables([raw])["answers"], n_boot=0, seed=0).iloc[0]
    assert scores["O"] >= 3 / 12 and scores["P"] >= 3 / 12


def test_the_story_test_runs_for_instruct_models_under_vanilla(tiny_llama_dir):
    _, _, loaded = tiny(tiny_llama_dir)
    kind = probe(limit_words=24, repetitions=2, list_size=12, control=None, story_samples=1, story_tokens=8)
    raw, own = kind.score(cell(loaded, [Context("vanilla")], model_type="instruct", seed=3))
    assert own["csi_story_test"] is True
    stories = S.collect_tables([raw])["stories"]
    assert stories["story_k"].tolist() == [0, 1, 2, 3, 4, 5]
    assert stories["rating_expected"].between(1, 10).all()
    tragedy_words = stories["story_words"].str.split().map(len)
    assert (tragedy_words == 5).all()
    again, _ = kind.score(cell(loaded, [Context("vanilla")], model_type="instruct", seed=3))
    pd.testing.assert_frame_equal(raw, again)  # seeded: the same words and stories
    table = S.story_table(stories, n_boot=50, seed=0)
    assert table["n_stories"].iloc[0] == 6 and table["underpowered"].iloc[0]
    # under a stimulus condition, or for a base model: no stories
    stimulus, _ = kind.score(cell(loaded, [Context("stress", "s1", "A story.\n\n", 0)], "stress", "instruct"))
    assert (stimulus["part"] != "story").all()


def test_requests_share_each_lists_prompt(tiny_llama_dir):
    """Each list is one chain whose steps follow its own prompt (the growing shared prefix), under the context's
    stimulus lead; all lists of a context are one backend call."""
    _, _, loaded = tiny(tiny_llama_dir)
    kind = probe(limit_words=60, repetitions=2, list_size=30)
    labelled = kind.requests(Context("stress", "s1", "A hard day.\n\n", 0), loaded.prompts, Asking())
    assert len(labelled) == 2 * 2 + 2 * 4  # words: 2 lists x 2 repetitions; control: 4 lists of 25 x 2
    first = labelled[0].request
    assert first.context.startswith("A hard day.\n\n") and len(first.steps) == 30
    assert labelled[0].describe.endswith("words list 1 of repetition 1")
    calls = []
    original = loaded.backend.choose_chain
    loaded.backend.choose_chain = lambda reqs, describe=None: calls.append(len(reqs)) or original(reqs, describe)
    kind = dataclasses.replace(kind.instance, settings={**kind.settings, "limit_words": 6, "control": None})
    CSIProbe(kind).score(cell(loaded, [Context("vanilla"), Context("stress", "s1", "A.\n\n", 0)], "stress"))
    assert calls == [2 * 1, 2 * 1]  # one call per context, every list of it


# -- independent answers, the third option, consistency against chance, repeats, interpretability (the validity issue)

def test_single_mode_repetitions_ask_distinct_prompts(tiny_llama_dir):
    """Single mode: a word's repetitions differ in wording and label order (a word alone cannot be reshuffled), so
    with swap_labels none each repetition is its own prompt; beyond the distinct (wording, order) pairs a repetition
    repeats an earlier prompt, is scored once, and the analysis counts the distinct prompts (k), not R."""
    _, _, loaded = tiny(tiny_llama_dir)
    kind = probe(mode="single", swap_labels="none", repetitions=3, limit_words=4, control=None)
    labelled = kind.requests(Context("vanilla"), loaded.prompts, Asking())
    assert len(labelled) == 4 * 3
    first_word = [r.request.context for r in labelled if r.label.startswith("words word 'time'")]
    assert len(first_word) == 3 and len(set(first_word)) == 3  # three wordings of one question
    assert [wl.wording for wl in kind.lists(0) if wl.words == ("time",)] == [1, 2, 3]
    # alternate: AB and BA with each wording in turn, six distinct prompts; an eighth repetition repeats the second
    assert [(P.wording(r, 3, "alternate"), P.label_order(r, "alternate")) for r in range(1, 9)] == [
        (1, "AB"), (1, "BA"), (2, "AB"), (2, "BA"), (3, "AB"), (3, "BA"), (1, "AB"), (1, "BA")]
    eight = probe(mode="single", repetitions=8, limit_words=4, control=None)
    assert len(eight.requests(Context("vanilla"), loaded.prompts, Asking())) == 4 * 6
    raw, own = eight.score(cell(loaded, [Context("vanilla")]))
    assert len(raw) == 4 * 8 and (raw.groupby("word")["prompt_id"].nunique() == 6).all()
    assert own["csi_wordings"] == 3 and len(own["csi_instruction"]) == 3
    scores = S.score_table(S.collect_tables([raw])["answers"], n_boot=0, seed=0).iloc[0]
    assert scores["repetitions"] == 8 and scores["independent_answers"] == 6
    assert scores["consistency_random"] == pytest.approx(S.random_consistency(6))
    # one wording, no swap: one prompt per word, copied to every repetition: consistency 1 by construction, said so
    once = probe(mode="single", swap_labels="none", wordings=1, repetitions=3, limit_words=8, control=None)
    raw, _ = once.score(cell(loaded, [Context("vanilla")]))
    scores = S.score_table(S.collect_tables([raw])["answers"], n_boot=100, seed=0).iloc[0]
    assert scores["consistency"] == 1 and scores["independent_answers"] == 1
    assert scores["consistency_random"] == 1 and scores["consistency_independent"] == 1
    assert scores["consistency_vs_chance"] == "at chance"
    assert "one independent answer per word" in scores["not_interpretable_reason"] or \
        "one answer for every word" in scores["not_interpretable_reason"]


def test_the_baselines_count_the_independent_answers_not_the_repetitions():
    """Four repetitions that asked two distinct prompts (the third and fourth copy the first two): consistency of
    coin flips is 2 x 0.5^2, and so are both baselines; crediting R = 4 would put the random baseline at 0.125."""
    rng = np.random.default_rng(3)
    two = np.where(rng.random((2000, 2)) < 0.5, "a", "b")
    choices = np.concatenate([two, two], axis=1)
    table = S.score_table(answers_frame(choices, prompts=[0, 1, 0, 1]), n_boot=200, seed=0).iloc[0]
    assert table["repetitions"] == 4 and table["independent_answers"] == 2
    assert table["consistency"] == pytest.approx(0.5, abs=0.04)
    assert table["consistency_random"] == 0.5 and table["consistency_independent"] == pytest.approx(0.5, abs=0.01)
    assert table["consistency_vs_chance"] == "at chance"
    assert table["reluctancy"] == 0 and table["O"] + table["P"] == pytest.approx(table["consistency"])


def test_the_instruction_names_the_third_option_and_the_control_does_not(tiny_llama_dir):
    """The third option is named in the instruction (configurable, as the labels are); ``name_other: false`` is
    the control, the instruction of earlier versions; the provenance and its hash say which."""
    _, _, loaded = tiny(tiny_llama_dir)
    settings = dict(limit_words=6, repetitions=2, list_size=6, control=None)
    named = probe(**settings)
    context = named.requests(Context("vanilla"), loaded.prompts, Asking())[0].request.context
    assert ("decide whether it makes you think of comedy or of tragedy. If a word makes you think of neither, "
            "answer neither. Go through the words") in context
    assert named.requests(Context("vanilla"), loaded.prompts, Asking())[0].request.steps[0].options == (
        " comedy", " tragedy", " neither")
    mine = probe(other="unrelated", **settings).requests(Context("vanilla"), loaded.prompts, Asking())
    assert "If a word makes you think of neither, answer unrelated." in mine[0].request.context
    control = probe(name_other=False, **settings)
    context = control.requests(Context("vanilla"), loaded.prompts, Asking())[0].request.context
    assert ("For each word in the list below, decide whether it makes you think of comedy or of tragedy. Go through "
            "the words in the order given and answer one word per line: the word, a colon and your choice.") in context
    assert "neither" not in context
    _, own_named = named.score(cell(loaded, [Context("vanilla")]))
    _, own_control = control.score(cell(loaded, [Context("vanilla")]))
    assert own_named["csi_name_other"] is True and own_control["csi_name_other"] is False
    assert own_named["csi_other"] == "neither"
    assert own_named["csi_instruction_sha256"] != own_control["csi_instruction_sha256"]
    assert "answer {other}" in own_named["csi_instruction"][0] and "{other}" not in own_control["csi_instruction"][0]
    assert {"name_other", "wordings"} <= set(CSIProbe.scoring_keys)
    assert CSIProbe.scoring_settings(control.settings)["name_other"] is False
    import argparse

    parser = argparse.ArgumentParser()
    CSIProbe.add_arguments(parser)
    args = parser.parse_args(["--no-name-other", "--other", "neutral", "--wordings", "2", "--swap-labels", "none"])
    assert CSIProbe.settings_from_args(args) == {"name_other": False, "other": "neutral", "wordings": 2,
                                                 "swap_labels": "none"}
    from qclm import probes

    config = {"probes": {"csi": {"kind": "csi", "words": str(WORDS), "control": None, "other": "tragedy"}}}
    assert probes.problems(config, "run.yaml", ["vanilla"]) == [
        ("run.yaml", "field probes.csi.other", "the third option 'tragedy' is the same as labels, entry 2: every "
                                               "choice would be between two identical options; the two labels and the "
                                               "third option must differ")]
    config["probes"]["csi"].update(other="neither", wordings=4, name_other="yes")
    assert [p[1] for p in probes.problems(config, "run.yaml", ["vanilla"])] == [
        "field probes.csi.name_other", "field probes.csi.wordings"]


def test_naming_the_third_option_raises_its_probability_on_the_real_smollm2(smollm2_prepared_dir):
    """Reluctancy can move: on the real SmolLM2 the named option is many times more probable than in the control
    (where it is never offered and its probability is a few in 100,000)."""
    model, tok = load_dir(smollm2_prepared_dir)
    spec = ModelSpec("smollm2-135m-instruct", str(smollm2_prepared_dir), "", 0.135, "instruct", "smollm2", "float32")
    loaded = loaded_model(spec, model, tok, {"method": "auto"})
    settings = dict(limit_words=5, repetitions=1, list_size=5, control=None, story_test=False)
    named, _ = probe(**settings).score(cell(loaded, [Context("vanilla")]))
    control, _ = probe(name_other=False, **settings).score(cell(loaded, [Context("vanilla")]))
    assert named["p_other"].mean() > 5 * control["p_other"].mean()


def test_consistency_is_read_against_its_own_rates_baseline():
    """Answers independent of the word, at rates 0.8/0.2, are consistent far above 2 x 0.5^R but not above the
    consistency of independent answers at those rates: at chance, and O and P are not read. Answers that follow the
    word are above chance."""
    rng = np.random.default_rng(4)
    reps = 3
    flips = np.where(rng.random((600, reps)) < 0.8, "a", "b")
    table = S.score_table(answers_frame(flips), n_boot=300, seed=0).iloc[0]
    assert table["consistency"] > 1.8 * table["consistency_random"]  # ~0.52 against 0.25: high beside random
    assert table["consistency_independent"] == pytest.approx(0.8 ** 3 + 0.2 ** 3, abs=0.03)
    assert table["consistency_excess_ci_low"] < 0 < table["consistency_excess_ci_high"]
    assert table["consistency_vs_chance"] == "at chance"
    assert table["not_interpretable_reason"].startswith("consistency at chance (own-rates baseline 0.5")
    follows = np.repeat(np.where(rng.random((600, 1)) < 0.8, "a", "b"), reps, axis=1)
    follows[:60, 0] = "other"  # a few words answered once otherwise: the answers vary, consistency 0.9
    table = S.score_table(answers_frame(follows), n_boot=300, seed=0).iloc[0]
    assert table["consistency_vs_chance"] == "above chance" and table["not_interpretable_reason"] == ""


def list_answers(chains: list[str], n_lists: int = 1) -> pd.DataFrame:
    """List-mode answers: each string is one repetition's list, one choice a letter per position (a, b, o)."""
    rows = []
    for r, chain in enumerate(chains, start=1):
        size = len(chain) // n_lists
        for i, c in enumerate(chain):
            word = f"w{(i * 7 + r) % len(chain)}"  # each repetition its own order of the words
            rows.append({"model": "m", "probe": "csi", "condition": "vanilla", "stimulus_id": "", "part": "words",
                         "repetition": r, "label_order": "AB", "wording": 1, "prompt_id": f"r{r}/l{i // size}",
                         "list_index": i // size + 1, "position": i % size + 1, "list_size": size, "word": word,
                         "label_a": "comedy", "label_b": "tragedy", "label_other": "neither", "logp_a": -1.0,
                         "logp_b": -1.0, "logp_other": -5.0, "choice": {"a": "a", "b": "b", "o": "other"}[c]})
    return pd.DataFrame(rows).reindex(columns=ANSWER_COLUMNS)


def test_the_repeat_rate_beside_its_baseline():
    """List mode: the share of answers (from a list's second word on) equal to the previous word's answer, beside
    the rate two independent answers at the model's own rates agree; single mode has none."""
    chains = ["a" * 10 + "b" * 10, "b" * 10 + "a" * 10, "ab" * 10]
    table = S.score_table(list_answers(chains, n_lists=2), n_boot=200, seed=0).iloc[0]
    # lists of 10: 9 transitions each; the first two repetitions repeat at every one, the third never
    assert table["repeat_rate"] == pytest.approx(36 / 54)
    assert table["repeat_independent"] == pytest.approx(0.5)
    assert table["repeat_rate_ci_low"] <= table["repeat_rate"] <= table["repeat_rate_ci_high"]
    single = S.score_table(answers_frame(np.array([["a", "b"], ["b", "b"]])), n_boot=0, seed=0).iloc[0]
    assert np.isnan(single["repeat_rate"])


def validity_for(words: pd.DataFrame, separates: bool) -> pd.DataFrame:
    """A valence control that separates (or not) for the scores' model, probe and condition."""
    rng = np.random.default_rng(5)
    valence = np.repeat([2.0, -2.0], 40)
    bias = valence + rng.normal(0, 1, 80) if separates else rng.normal(0, 1, 80)
    control = pd.DataFrame({"model": "m", "probe": "csi", "condition": "vanilla", "part": "control",
                            "word": [f"c{i}" for i in range(80)], "valence": valence, "mean_bias": bias})
    return S.validity_table(control, n_boot=300, seed=0)


def test_one_answer_for_every_word_is_not_interpretable_whatever_the_control(tiny_llama_dir):
    """A run that gave one label to every word has no O and P to read, even where the bias separates valence
    (the control's AUC above 0.5): marked not interpretable, with the reason, in the table, overview and figure."""
    from types import SimpleNamespace

    from qclm.probes.csi import analysis as A

    validity = validity_for(pd.DataFrame(), separates=True)
    assert validity["interpretable"].iloc[0] == True  # noqa: E712
    one = S.mark_interpretable(S.score_table(answers_frame(np.full((40, 3), "a")), n_boot=200, seed=0), validity)
    row = one.iloc[0]
    assert row["O"] == 1 and row["interpretable"] == False and row["underpowered"]  # noqa: E712
    assert row["not_interpretable_reason"] == "one answer for every word (comedy)"
    rng = np.random.default_rng(6)
    words = np.repeat(np.where(rng.random((40, 1)) < 0.5, "a", "b"), 3, axis=1)
    good = S.mark_interpretable(S.score_table(answers_frame(words), n_boot=200, seed=0), validity).iloc[0]
    assert good["interpretable"] == True and not good["underpowered"]  # noqa: E712
    assert good["not_interpretable_reason"] == "" and good["consistency_vs_chance"] == "above chance"
    weak = S.mark_interpretable(S.score_table(answers_frame(words), n_boot=200, seed=0),
                                validity_for(pd.DataFrame(), separates=False)).iloc[0]
    assert weak["underpowered"] and weak["not_interpretable_reason"] == "valence AUC CI does not exceed 0.5"
    scores = pd.concat([one, good.to_frame().T, weak.to_frame().T], ignore_index=True)
    scores["condition"] = ["one label", "good", "weak control"]
    text = A.overview(scores, validity, pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    assert "not interpretable: one answer for every word (comedy)" in text
    assert "| interpretable |" in text and "valence AUC CI does not exceed 0.5" in text
    assert "own rates" in text and "*at chance*" in text  # the one-label row: consistency 1 against 1
    fig = A.figure_csi(SimpleNamespace(table=lambda name: pd.DataFrame()), scores, pd.DataFrame())
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "O/P not interpretable:\none answer for every word" in texts
    assert "O/P not interpretable:\nvalence AUC CI does not exceed 0.5" in texts
    assert "at chance" in texts  # panel (b): the consistency beside its own-rates baseline
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert "own-rates baseline" in labels and "repeat rate" not in labels  # no lists of several words here
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_render_shows_what_the_csi_kind_scores(tmp_path, tiny_llama_dir):
    """``qclm render`` prints the requests the scoring job scores: in single mode the word's distinct prompts (three
    wordings), each naming the third option, and the control's instruction without it."""
    import io

    from conftest import write_workflow_config

    from qclm.commands.render import render

    csi = {"kind": "csi", "words": str(WORDS), "control": None, "limit_words": 1, "mode": "single",
           "swap_labels": "none", "repetitions": 3}
    cfg = write_workflow_config(tmp_path, {"tiny-llama": tiny_llama_dir},
                                probes={"csi": csi, "csi_control": {**csi, "name_other": False, "wordings": 1}})
    out = io.StringIO()
    assert render(str(cfg), "tiny-llama", "csi", "vanilla", limit=None, out=out) == 0
    text = out.getvalue()
    assert text.count("### request") == 3 and text.count("If a word makes you think of neither, answer neither.") == 3
    for n in (1, 2, 3):
        assert f"(AB, wording {n})" in text
    assert "options (3) and their tokens" in text and "' neither'" in text
    out = io.StringIO()
    assert render(str(cfg), "tiny-llama", "csi_control", "vanilla", limit=None, out=out) == 0
    assert out.getvalue().count("### request") == 1 and "answer neither" not in out.getvalue()


def test_render_shows_the_lists_the_scoring_job_scores_under_the_run_seed(tmp_path, tiny_llama_dir):
    """``qclm render`` and the scoring job build the requests with the same model and run seed (``engine.seed``): the
    word lists render prints under a non-zero seed are the ones the job scores (its raw table's words, in list
    order), and they differ from seed 0's (render once showed seed 0's lists whatever the config said)."""
    import io
    import re

    import yaml
    from conftest import write_workflow_config

    from qclm import settings
    from qclm.commands.render import render
    from qclm.contexts import ContextSettings
    from qclm.jobs.score_model import CellSpec, score_cell

    csi = {"kind": "csi", "words": str(WORDS), "control": None, "limit_words": 12, "mode": "list", "list_size": 6,
           "repetitions": 2, "story_test": False}
    cfg = write_workflow_config(tmp_path, {"tiny-llama": tiny_llama_dir}, probes={"csi": csi})
    config = yaml.safe_load(cfg.read_text())
    config["engine"]["seed"] = 7
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    out = io.StringIO()
    assert render(str(cfg), "tiny-llama", "csi", "vanilla", limit=None, out=out) == 0
    steps = (re.findall(r"--- step \d+: text '(?:\\n)?(.*?):', options", block)
             for block in out.getvalue().split("### request")[1:])
    shown = [list(words) for words in steps]

    # the job's model under the run's engine settings: the seed reaches the kind from there
    _, _, loaded = tiny(tiny_llama_dir, settings.section(config, "engine"))
    cls = CSIProbe
    instance = Instance("csi", "csi", {**cls.defaults(), **csi})
    cell = CellSpec("csi", "csi", "vanilla", cls.scoring_settings(instance.settings), tuple(cls(instance).files()),
                    (), cls.version, cls.scoring_config(config))
    raw, _ = score_cell(loaded, cell, ContextSettings.from_config(config))
    raw = raw.sort_values(["repetition", "list_index", "position"])
    scored = [list(g["word"]) for _, g in raw.groupby(["repetition", "list_index"], sort=True)]
    assert len(scored) == 4 and shown == scored
    seed0 = [list(wl.words) for wl in cls(instance).lists(0)]
    assert seed0 != scored  # the seed matters: a render of seed 0 would show other lists
