"""The analysis as a registry of outputs (qclm.analysis.registry): every registration resolves and has its caption,
bad registrations are refused, a probe kind registered here gets its table and figure written by the runner (the
worked example of the registry's docstring), and the report's first page is composed from the kinds' sections."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docutils.core
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from qclm.analysis import overview, registry, runner
from qclm.analysis.registry import FIGURE, LIKERT, TABLE, Output

ROOT = Path(__file__).resolve().parents[1]
CAPTIONS = ROOT / registry.CAPTION_DIR


# --------------------------------------------------------------------------- the registrations

def test_the_registry_and_the_overview_import_no_numpy_pandas_or_matplotlib():
    """The workflow imports them while building its DAG."""
    code = ("import sys, qclm.analysis.registry, qclm.analysis.overview; "
            "print(sorted(m for m in ('numpy', 'pandas', 'matplotlib', 'scipy') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_every_registration_resolves_and_has_its_caption():
    outputs = registry.outputs(LIKERT)
    assert len(registry.outputs(LIKERT, TABLE)) == 14 and len(registry.outputs(LIKERT, FIGURE)) == 12
    for output in outputs:
        assert callable(runner.resolve(output)), output.code
        assert (CAPTIONS / output.caption).is_file(), output.caption
    # every caption belongs to an output of some probe kind (workflow.rst: the report's page before a run has an
    # overview)
    every = registry.outputs()
    assert all((CAPTIONS / o.caption).is_file() for o in every), [o.caption for o in every]
    assert {p.name for p in CAPTIONS.glob("*.rst")} - {o.caption for o in every} == {"workflow.rst"}
    assert registry.categories(LIKERT) == ("1. Per-model results", "2. Across-model results", "3. Validation",
                                           "4. Instrument library", "5. Wording")
    assert registry.probes()[0] == LIKERT
    # a figure's table is one of its kind's tables; the per-model results come first, as the report lists them
    tables = registry.names(LIKERT, TABLE)
    assert all(o.table in tables for o in registry.outputs(LIKERT, FIGURE) if o.table)
    assert tables[:3] == ("per_model", "per_model_state_trait", "per_model_interaction")
    assert registry.get(FIGURE, "fig4_model_scores").reads == ("condition_summary", "zscores")
    with pytest.raises(KeyError, match="no analysis figure named 'nope'"):
        registry.get(FIGURE, "nope")


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made in a test are forgotten after it."""
    monkeypatch.setattr(registry, "_OUTPUTS", list(registry._OUTPUTS))


@pytest.mark.parametrize("output, message", [
    (Output("zscores", TABLE, "x", LIKERT, "m:f"), "a table of that name is registered already"),
    (Output("t", "chart", "x", "fake", "m:f"), "kind must be one of table, figure"),
    (Output("a b", TABLE, "x", "fake", "m:f"), "a file stem of letters, digits and underscores"),
    (Output("t", TABLE, "", "fake", "m:f"), "needs a report category and a probe kind"),
    (Output("t", TABLE, "x", "fake", "module.function"), "code must be 'module:function'"),
    (Output("t", TABLE, "x", "fake", "m:f", uses=("zscores",)), "reads zscores, not a table of probe kind fake"),
    (Output("f", FIGURE, "x", "fake", "m:f", table="later"), "reads later, not a table of probe kind fake"),
    (Output("f", FIGURE, "x", "fake", "m:f", uses=("t",)), "names the one whose underpowered column it draws"),
    (Output("t", TABLE, "x", "fake", "m:f", table="zscores"), "names the tables it reads in uses"),
])
def test_a_bad_registration_is_refused(scratch_registry, output, message):
    with pytest.raises(ValueError, match=message) as err:
        registry.register(output)
    assert str(err.value).startswith(f"analysis output {output.kind} {output.name!r}")
    assert output not in registry.outputs()


# --------------------------------------------------------------------------- a probe kind of its own

FAKE = "fake"


def fake_table(context) -> pd.DataFrame:
    """One row per model: its mean score and whether it rests on too few items."""
    scores = context["scores"]
    out = scores.groupby("model", as_index=False)["score"].agg(mean="mean", n="size")
    return out.assign(underpowered=out["n"] < context["min_items"])


def fake_summary(context, per_model: pd.DataFrame) -> pd.DataFrame:
    """A table reading an earlier one."""
    return pd.DataFrame({"models": [len(per_model)], "mean": [per_model["mean"].mean()],
                         "underpowered": [bool(per_model["underpowered"].any())]})


def fake_figure(context, table: pd.DataFrame):
    from qclm.analysis.plotting import mark_underpowered

    fig, ax = plt.subplots()
    ax.bar(table["model"], table["mean"])
    mark_underpowered(ax, table, what="items")
    return fig


def fake_unavailable(context, table: pd.DataFrame):
    return "needs what this run does not have"


def broken_figure(context, table: pd.DataFrame):
    raise RuntimeError("drawing failed")


def _register_fake(*extra: Output) -> None:
    here = Path(__file__).stem  # tests/ is on sys.path: the code of an output is any importable function
    registry.register(Output("fake_scores", TABLE, "6. Fake", FAKE, f"{here}:fake_table"))
    registry.register(Output("fake_summary", TABLE, "6. Fake", FAKE, f"{here}:fake_summary", uses=("fake_scores",)))
    registry.register(Output("fake_scores", FIGURE, "6. Fake", FAKE, f"{here}:fake_figure", table="fake_scores"))
    registry.register(Output("fake_empty", FIGURE, "6. Fake", FAKE, f"{here}:fake_unavailable",
                             table="fake_summary"))
    for output in extra:
        registry.register(output)


def _context() -> dict:
    scores = pd.DataFrame({"model": ["a", "a", "a", "b"], "score": [1.0, 2.0, 3.0, 5.0]})
    return {"scores": scores, "min_items": 2}


def test_a_new_probe_kind_registers_a_table_and_a_figure_and_the_runner_writes_them(scratch_registry, tmp_path):
    _register_fake()
    assert registry.probes()[0] == LIKERT and registry.probes()[-1] == FAKE
    assert registry.categories(FAKE) == ("6. Fake",)
    assert registry.names(FAKE, TABLE) == ("fake_scores", "fake_summary")
    tables = runner.run_outputs(FAKE, _context(), tmp_path)
    assert list(tables) == ["fake_scores", "fake_summary"]
    written = pd.read_csv(tmp_path / "fake_scores.csv")
    assert written.to_dict("list") == {"model": ["a", "b"], "mean": [2.0, 5.0], "n": [3, 1],
                                       "underpowered": [False, True]}
    assert pd.read_csv(tmp_path / "fake_summary.csv")["models"].tolist() == [2]
    for output in registry.outputs(FAKE):
        for path in output.files:
            assert (tmp_path / path).stat().st_size > 0, path
    assert "underpowered" in (tmp_path / "tables" / "fake_scores.md").read_text().splitlines()[0]
    # the kind's section of the report's first page follows the Likert section
    overview.write_fragment(tmp_path, FAKE, "## Fake probe\n\n- **Models**: a, b\n")
    overview.write_fragment(tmp_path, LIKERT, "## Likert questionnaires\n\nFirst.\n")
    md, rst = overview.compose(tmp_path)
    text = md.read_text()
    assert text.startswith("# What this run measured\n\n## Likert questionnaires")
    assert text.index("## Likert questionnaires") < text.index("## Fake probe")
    assert "Fake probe\n----------" in rst.read_text()


def test_the_figure_mark_comes_from_the_table(scratch_registry, tmp_path, monkeypatch):
    _register_fake()
    drawn = {}

    def keep(fig, out_dir, name):
        drawn[name] = [t.get_text() for ax in fig.axes for t in ax.texts]
        plt.close(fig)
        return []

    from qclm.analysis import plotting

    monkeypatch.setattr(plotting, "save", keep)
    runner.run_outputs(FAKE, _context(), tmp_path)
    assert drawn["fake_scores"] == ["underpowered: 1 items"]  # model b: one item, fewer than 2
    drawn.clear()
    runner.run_outputs(FAKE, {**_context(), "min_items": 1}, tmp_path)
    assert drawn["fake_scores"] == []


def test_a_failing_figure_lets_the_others_be_drawn_then_fails(scratch_registry, tmp_path):
    here = Path(__file__).stem
    _register_fake(Output("fake_broken", FIGURE, "6. Fake", FAKE, f"{here}:broken_figure", table="fake_scores"),
                   Output("fake_last", FIGURE, "6. Fake", FAKE, f"{here}:fake_figure", table="fake_scores"))
    with pytest.raises(RuntimeError, match="drawing failed"):
        runner.run_outputs(FAKE, _context(), tmp_path)
    assert (tmp_path / "fake_summary.csv").exists()  # the tables were written before
    assert (tmp_path / "figures" / "fake_last.png").exists() and not (tmp_path / "figures" / "fake_broken.png").exists()
    assert plt.get_fignums() == []  # nothing left open


def test_a_figure_of_a_table_without_an_underpowered_column_is_refused(scratch_registry, tmp_path):
    here = Path(__file__).stem
    registry.register(Output("plain", TABLE, "6. Fake", FAKE, f"{here}:fake_table"))
    registry.register(Output("plain", FIGURE, "6. Fake", FAKE, f"{here}:fake_figure", table="plain"))
    tables = {"plain": fake_table(_context()).drop(columns="underpowered")}
    with pytest.raises(ValueError, match="figure 'plain': its table 'plain' has no `underpowered` column"):
        runner.draw_figures(FAKE, _context(), tables, tmp_path)


def test_code_that_does_not_load_names_the_output(scratch_registry):
    output = registry.register(Output("ghost", TABLE, "6. Fake", FAKE, "qclm.analysis.stats:no_such_table"))
    with pytest.raises(ValueError, match="analysis table 'ghost': cannot load 'qclm.analysis.stats:no_such_table'"):
        runner.resolve(output)


# --------------------------------------------------------------------------- the report's first page

PAGE = """# What this run measured

## Likert questionnaires

- **Models (2; size)**: a (1B), b (2B)
- **Contrasts**: `vanilla vs stress`

Per-model analyses come first.

Across-model analyses rest on 2 models.

### Per-model results

| model | d | note |
|---|---|---|
| a | 0.50 | x \\| y |
| b |  | yes |
"""


def test_markdown_fragments_become_rst_that_docutils_renders_without_a_warning():
    rst = overview.markdown_to_rst(PAGE)
    assert rst.startswith("What this run measured\n======================\n\nLikert questionnaires\n-----")
    assert "Per-model results\n~~~~~~~~~~~~~~~~~\n" in rst
    assert "- **Contrasts**: ``vanilla vs stress``" in rst
    assert "   * - a\n     - 0.50\n     - x \\| y\n   * - b\n     -  \n     - yes" in rst
    assert "Per-model analyses come first.\n\nAcross-model" in rst
    html = docutils.core.publish_string(rst, writer="html",
                                        settings_overrides={"report_level": 2, "halt_level": 2}).decode()
    assert "<td>x | y</td>" in html.replace("<p>", "").replace("</p>", "") and "<strong>Models" in html


def test_compose_orders_the_sections_and_the_command_composes_the_given_ones(tmp_path):
    for kind in ("zeta", LIKERT, "alpha"):
        overview.write_fragment(tmp_path, kind, f"## Section {kind}\n\nText of {kind}.")
    assert [p.name for p in overview.fragments(tmp_path)] == [
        "overview.likert.md", "overview.alpha.md", "overview.zeta.md"]  # Likert first, then by name
    overview.compose(tmp_path)
    text = (tmp_path / "overview.md").read_text()
    assert text.index("Section likert") < text.index("Section alpha") < text.index("Section zeta")
    # the workflow's rule: the sections it names, nothing else
    assert overview.main(["--out", str(tmp_path), str(tmp_path / "overview.zeta.md"),
                          str(tmp_path / "overview.likert.md")]) == 0
    text = (tmp_path / "overview.md").read_text()
    assert "alpha" not in text and text.index("Section likert") < text.index("Section zeta")
    assert overview.main(["--out", str(tmp_path), str(tmp_path / "overview.nope.md")]) == 2


def test_qclm_analyze_writes_the_likert_section_and_the_whole_page(tmp_path):
    from qclm.analysis import analyze
    from qclm.analysis.synthetic import synthetic_item_scores

    synthetic_item_scores(n_models=2, n_items=2, n_stimuli=2).to_parquet(tmp_path / "items.parquet")
    out = tmp_path / "out"
    overview.write_fragment(out, "memorization", "## Memorization\n\nAnother kind's section.")
    analyze(tmp_path / "items.parquet", out, bootstrap=10, figures=False)
    section = (out / "overview.likert.md").read_text()
    assert section.startswith("## Likert questionnaires\n\n- **Models (2; size, dtype, prompt format)**")
    page = (out / "overview.md").read_text()
    assert page == f"# What this run measured\n\n{section}\n## Memorization\n\nAnother kind's section.\n"
    assert (out / "overview.rst").read_text() == overview.markdown_to_rst(page)
