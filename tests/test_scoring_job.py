"""The per-model scoring job: cells finished before a kill are not scored again."""

import logging
from pathlib import Path

import pandas as pd
import pytest

from qclm.jobs import score_model as scoring_job
from qclm.models.table import parse_model_row
from qclm.contexts import ContextSettings
from qclm.jobs.score_model import CellSpec, run_scoring_job
from conftest import ROOT, likert_cell


def _spec(path):
    return parse_model_row({"name": "tiny", "source": str(path), "revision": "", "params_b": "0.001",
                            "type": "base", "family": "tiny", "dtype": "float32"}, "test", 0)


def test_cached_cells_are_reused_and_the_model_is_not_loaded(tmp_path, tiny_llama_dir, monkeypatch, caplog):
    spec = _spec(tiny_llama_dir)
    cells = [likert_cell(ROOT / "resources/questionnaires/stai_s.yaml"),
             likert_cell(ROOT / "resources/questionnaires/stai_s.yaml", "stress", [ROOT / "resources/stimuli/stress.yaml"])]
    outputs = [str(tmp_path / "out" / f"{c.condition}.parquet") for c in cells]
    logs = [str(tmp_path / f"{c.condition}.log") for c in cells]
    protocol = ContextSettings(limit_items=1, limit_stimuli=1)
    args = (spec, cells, outputs, logs, protocol, {"method": "auto"}, tmp_path / "models", tmp_path / "cache")
    assert run_scoring_job(*args) == 0
    first = [pd.read_parquet(p) for p in outputs]
    # what Snakemake does to an incomplete job's outputs before it reruns it
    for p in outputs:
        Path(p).unlink()

    def no_load(*a, **k):
        raise AssertionError("the model was loaded although every cell was cached")

    monkeypatch.setattr(scoring_job, "load", no_load)
    with caplog.at_level(logging.INFO, logger="qclm.jobs"):
        assert run_scoring_job(*args) == 0
    assert caplog.text.count("computed before") == 2
    for p, df in zip(outputs, first):
        pd.testing.assert_frame_equal(pd.read_parquet(p), df)


def test_a_changed_setting_invalidates_the_cache(tmp_path, tiny_llama_dir):
    spec = _spec(tiny_llama_dir)
    cell = likert_cell(ROOT / "resources/questionnaires/stai_t.yaml")
    a = scoring_job.cell_key(spec, cell, ContextSettings(limit_items=1), {"method": "auto", "threads": 1})
    assert a == scoring_job.cell_key(spec, cell, ContextSettings(limit_items=1), {"method": "auto", "threads": 8})
    assert a != scoring_job.cell_key(spec, cell, ContextSettings(limit_items=2), {"method": "auto"})
    assert a != scoring_job.cell_key(spec, cell, ContextSettings(limit_items=1), {"method": "full"})
    # a probe's scoring settings are in the key; another probe id is another cell
    assert a != scoring_job.cell_key(spec, CellSpec(**{**cell.__dict__, "settings": {"questionnaire": "x"}}),
                                     ContextSettings(limit_items=1), {"method": "auto"})
    assert a != scoring_job.cell_key(spec, CellSpec(**{**cell.__dict__, "probe": "other"}),
                                     ContextSettings(limit_items=1), {"method": "auto"})


def test_a_wording_setting_is_in_the_likert_cells_keys_only(tmp_path, tiny_llama_dir):
    """The Likert wordings (config templates.score, extra_limit_stimuli) reach the Likert kind's cells only
    (ProbeKind.scoring_sections): changing one changes the Likert cells' keys and no other kind's, so no other kind's
    cached cell is scored again; templates.select (the analysis') changes no key."""
    from qclm import probes

    spec = _spec(tiny_llama_dir)

    def keys(**templates) -> dict[str, str]:
        config = {"templates": templates}
        out = {}
        for kind in probes.KINDS:
            cls = probes.kind_class(kind)
            cell = CellSpec("p", kind, "vanilla", {}, (), (), cls.version, cls.scoring_config(config))
            out[kind] = scoring_job.cell_key(spec, cell, ContextSettings(), {"method": "auto"})
        return out

    before = keys(score="all", select="first")
    assert len(before) >= 5
    for changed in (keys(score="first", select="first"), keys(score="all", select="first", extra_limit_stimuli=1)):
        assert {k for k in before if before[k] != changed[k]} == {"likert"}
    assert keys(score="all", select="all") == before


def test_a_model_that_cannot_load_fails_with_one_line(tmp_path, capfd, monkeypatch):
    # log records go to the job log in the workflow; here nowhere, so stderr holds only the line
    # (other tests' CLIs may have left handlers on closed streams)
    monkeypatch.setattr(logging.getLogger(), "handlers", [logging.NullHandler()])
    monkeypatch.setattr(logging.getLogger("qclm"), "handlers", [])
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    cell = likert_cell(ROOT / "resources/questionnaires/stai_t.yaml")
    code = run_scoring_job(_spec(broken), [cell], [str(tmp_path / "o.parquet")], [str(tmp_path / "c.log")],
                           ContextSettings(limit_items=1), {}, tmp_path, tmp_path / "cache")
    assert code == 1
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("model tiny: cannot load: ")


@pytest.mark.parametrize("kind,settings", [
    ("likert", {"questionnaire": str(ROOT / "resources/questionnaires/stai_s.yaml")}),
    ("csi", {"mode": "list", "limit_words": 12, "repetitions": 1, "control": None, "story_test": False}),
    ("csi", {"mode": "single", "limit_words": 6, "repetitions": 2, "control": None, "story_test": False}),
    ("entailment", {"instrument": str(ROOT / "resources/entailment/gad7.yaml")}),
    ("memorization", {"instruments": [str(ROOT / "resources/questionnaires/gad7.yaml")],
                      "tasks": ["exposure", "recall", "cloze"]}),
], ids=["likert", "csi-list", "csi-single", "entailment", "memorization"])
def test_the_progress_bar_has_the_cells_requests_as_its_total(tmp_path, tiny_llama_dir, monkeypatch, kind, settings):
    """The scoring job's bar knows its total (so it shows an ETA) and reaches it: every kind counts its progress
    in the requests its ``requests`` lists."""
    import tqdm

    from qclm import probes

    seen = []

    class Bar:
        def __init__(self, *args, total=None, **kwargs):
            self.total, self.n = total, 0
            seen.append(self)

        def update(self, n=1):
            self.n += n

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(tqdm, "tqdm", Bar)
    spec = _spec(tiny_llama_dir)
    cls = probes.kind_class(kind)
    full = {**cls.defaults(), **settings}
    files = tuple(v for k in cls.file_keys for v in ([full[k]] if isinstance(full.get(k), str) else full.get(k) or []))
    cell = CellSpec(kind, kind, "vanilla", full, files, version=cls.version)
    out = tmp_path / "out.parquet"
    assert run_scoring_job(spec, [cell], [str(out)], [str(tmp_path / "c.log")],
                           ContextSettings(limit_items=1, limit_stimuli=2), {"method": "auto"}, tmp_path / "models",
                           tmp_path / "cache") == 0
    assert len(seen) == 1 and seen[0].total == seen[0].n > 0 and out.exists()


class _Recorder:
    """A backend that answers every request with its own text and records each call (method, contexts of the
    requests); ``per_context`` as a model in this process says it."""

    def __init__(self, per_context: bool):
        self.per_context = per_context
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def _answer(self, method, requests, describe=None, progress=None):
        self.calls.append((method, tuple(r.context for r in requests)))
        if progress:
            progress(len(requests))
        return [(method, r.context) for r in requests]

    def loglikelihood(self, requests, describe=None, progress=None):
        return self._answer("loglikelihood", requests, describe, progress)

    def choose(self, requests, describe=None, progress=None):  # a backend's choose counts options: not passed
        assert progress is None
        return self._answer("choose", requests, describe)

    def generate(self, requests, describe=None):
        return self._answer("generate", requests, describe)


@pytest.mark.parametrize("per_context", [False, True])
def test_the_request_loop_sends_each_request_kind_of_a_cell_at_once_and_answers_in_order(per_context):
    """The scoring job's loop (qclm.engine.asking), not the kinds, talks to the backend: one call per request kind
    for the whole cell (a server keeps them all in flight), or per context and kind for a model in this process
    (its shared prefix is then the context's stimulus); answers come back in the order asked, every request counted
    once on the progress bar."""
    from qclm.engine.asking import ask
    from qclm.engine.requests import ChoiceRequest, GenerateRequest, LoglikRequest

    requests, contexts = [], []
    for c in ("a", "b"):
        for make in (lambda t: LoglikRequest(t, " x"), lambda t: ChoiceRequest(t, (" y", " n")),
                     lambda t: GenerateRequest(t, 0), lambda t: LoglikRequest(t + "2", " x")):
            requests.append(make(c))
            contexts.append(c)
    backend, counted = _Recorder(per_context), []
    answers = ask(backend, requests, contexts, lambda i: f"request {i}", counted.append)
    assert [a[1] for a in answers] == [r.context for r in requests]
    assert [a[0] for a in answers] == ["loglikelihood", "choose", "generate", "loglikelihood"] * 2
    assert sum(counted) == len(requests)
    if per_context:
        assert backend.calls == [("loglikelihood", ("a", "a2")), ("choose", ("a",)), ("generate", ("a",)),
                                 ("loglikelihood", ("b", "b2")), ("choose", ("b",)), ("generate", ("b",))]
    else:
        assert backend.calls == [("loglikelihood", ("a", "a2", "b", "b2")), ("choose", ("a", "b")),
                                 ("generate", ("a", "b"))]
    with pytest.raises(TypeError, match="str is not a request a backend answers"):
        ask(backend, ["text"], ["a"], str)
