"""The analysis outputs (qclm.analysis.registry): every kind's outputs resolve and have their captions in the kind's
package, bad declarations are refused, the report numbers the categories in report order, a probe kind declared here
gets its table and figure written by the runner (the worked example of the registry's docstring), and the report's
first page is composed from the kinds' sections."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docutils.core
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from qclm import probes
from qclm.analysis import overview, registry, runner
from qclm.analysis.registry import FIGURE, TABLE, Output
from qclm.probes.likert import LIKERT

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "qclm"


def _owners() -> dict[str, tuple[Output, ...]]:
    """Every owner's outputs, in report order: the built-in kinds, then the interventions and the calibration."""
    from qclm.calibration import outputs as calibration
    from qclm.interventions import outputs as interventions

    kinds = {name: probes.kind_class(name).analysis_outputs() for name in probes.KINDS}
    return {**kinds, interventions.PROBE: interventions.OUTPUTS, calibration.PROBE: calibration.OUTPUTS}


# --------------------------------------------------------------------------- the declarations

def test_the_registry_the_overview_and_the_kinds_outputs_import_no_numpy_pandas_or_matplotlib():
    """The workflow imports them while building its DAG."""
    code = ("import sys, qclm.analysis.registry, qclm.analysis.overview, qclm.interventions.outputs, "
            "qclm.calibration.outputs\n"
            "from qclm import probes\n"
            "[probes.kind_class(k).analysis_outputs() for k in probes.KINDS]\n"
            "print(sorted(m for m in ('pandas', 'matplotlib', 'scipy') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_every_output_resolves_and_its_caption_lies_in_its_owners_package():
    owners = _owners()
    likert = owners[LIKERT]
    assert len(registry.select(likert, TABLE)) == 17 and len(registry.select(likert, FIGURE)) == 12
    captions = set()
    for owner, outputs in owners.items():
        for output in outputs:
            assert output.probe == owner
            assert callable(runner.resolve(output)), output.code
            caption = Path(output.caption)
            assert caption.is_absolute() and caption.is_file(), output.caption
            assert caption.parent.name == "report" and caption.is_relative_to(SRC), output.caption
            captions.add(caption)
    # every caption in the packages belongs to an output; workflow/report keeps the page shown before a run has
    # an overview, and nothing of a kind
    assert set(SRC.glob("**/report/*.rst")) == captions
    assert [p.name for p in (ROOT / "workflow" / "report").iterdir()] == ["workflow.rst"]
    assert registry.categories(likert) == ("Per-model results", "Across-model results", "Validation",
                                           "Instrument library", "Wording")
    # a figure's table is one of its kind's tables; the per-model results come first, as the report lists them
    tables = registry.names(likert, TABLE)
    assert all(o.table in tables for o in registry.select(likert, FIGURE) if o.table)
    assert tables[:3] == ("per_model", "per_model_state_trait", "per_model_interaction")
    assert registry.get(likert, FIGURE, "fig4_model_scores").reads == ("condition_summary", "zscores")
    with pytest.raises(KeyError, match="no analysis figure named 'nope'"):
        registry.get(likert, FIGURE, "nope")


def test_the_report_numbers_the_categories_in_report_order():
    """Likert first, then the run's kinds, then the interventions and the calibration; a run without Likert
    numbers its first kind 1 (no hand-numbered category anywhere)."""
    owners = _owners()
    labels = registry.report_categories(list(owners.values()))
    assert [labels[(LIKERT, c)] for c in registry.categories(owners[LIKERT])] == [
        "1. Per-model results", "2. Across-model results", "3. Validation", "4. Instrument library", "5. Wording"]
    assert labels[("memorization", "Memorization")] == "6. Memorization"
    assert labels[("calibration", "Calibration")] == f"{len(labels)}. Calibration"
    assert registry.report_categories([owners["csi"], owners["interventions"]]) == {
        ("csi", "Implicit sentiment"): "1. Implicit sentiment", ("interventions", "Interventions"): "2. Interventions"}
    # two owners writing one file are refused
    clash = registry.declare("other", [Output("csi_scores", TABLE, "Other", "m:f", caption=owners["csi"][0].caption)],
                             ROOT)
    with pytest.raises(ValueError, match="other and csi both write csi_scores.csv"):
        registry.report_categories([owners["csi"], clash])


@pytest.mark.parametrize("output, message", [
    (Output("zscores", TABLE, "x", "m:f"), "a table of that name is declared already"),
    (Output("t", "chart", "x", "m:f"), "kind must be one of table, figure"),
    (Output("a b", TABLE, "x", "m:f"), "a file stem of letters, digits and underscores"),
    (Output("t", TABLE, "", "m:f"), "needs a report category and a probe kind"),
    (Output("t", TABLE, "6. Fake", "m:f"), "the category is a title, unnumbered"),
    (Output("t", TABLE, "x", "module.function"), "code must be 'module:function'"),
    (Output("t", TABLE, "x", "m:f", uses=("nope",)), "reads nope, not a table of fake declared before it"),
    (Output("f", FIGURE, "x", "m:f", table="later"), "reads later, not a table of fake declared before it"),
    (Output("f", FIGURE, "x", "m:f", uses=("zscores",)), "names the one whose underpowered column it draws"),
    (Output("t", TABLE, "x", "m:f", table="zscores"), "names the tables it reads in uses"),
    (Output("t", TABLE, "x", "m:f", caption="missing.rst"), "its caption .*missing.rst does not exist"),
])
def test_a_bad_declaration_is_refused(output, message, tmp_path):
    for name in ("zscores", "t", "f", "a b"):
        (tmp_path / f"{name}.rst").write_text("A caption.\n")
    first = Output("zscores", TABLE, "x", "m:f")
    with pytest.raises(ValueError, match=message) as err:
        registry.declare("fake", [first, output], tmp_path)
    assert str(err.value).startswith(f"analysis output {output.kind} {output.name!r} (fake)")


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


def _fake(*extra: Output, tmp_path: Path) -> tuple[Output, ...]:
    """The fake kind's outputs, declared with their captions in ``tmp_path`` (tests/ is on sys.path: the code of
    an output is any importable function)."""
    here = Path(__file__).stem
    outputs = (Output("fake_scores", TABLE, "Fake", f"{here}:fake_table"),
               Output("fake_summary", TABLE, "Fake", f"{here}:fake_summary", uses=("fake_scores",)),
               Output("fake_scores", FIGURE, "Fake", f"{here}:fake_figure", table="fake_scores"),
               Output("fake_empty", FIGURE, "Fake", f"{here}:fake_unavailable", table="fake_summary"), *extra)
    captions = tmp_path / "captions"
    captions.mkdir(exist_ok=True)
    for output in outputs:
        (captions / output.caption).write_text("A caption.\n")
    return registry.declare(FAKE, outputs, captions)


def _context() -> dict:
    scores = pd.DataFrame({"model": ["a", "a", "a", "b"], "score": [1.0, 2.0, 3.0, 5.0]})
    return {"scores": scores, "min_items": 2}


def test_a_new_probe_kind_declares_a_table_and_a_figure_and_the_runner_writes_them(tmp_path):
    fake = _fake(tmp_path=tmp_path)
    labels = registry.report_categories([_owners()[LIKERT], fake])
    assert labels[(FAKE, "Fake")] == "6. Fake"
    assert registry.names(fake, TABLE) == ("fake_scores", "fake_summary")
    tables = runner.run_outputs(fake, _context(), tmp_path)
    assert list(tables) == ["fake_scores", "fake_summary"]
    written = pd.read_csv(tmp_path / "fake_scores.csv")
    assert written.to_dict("list") == {"model": ["a", "b"], "mean": [2.0, 5.0], "n": [3, 1],
                                       "underpowered": [False, True]}
    assert pd.read_csv(tmp_path / "fake_summary.csv")["models"].tolist() == [2]
    for output in fake:
        for path in output.files:
            assert (tmp_path / path).stat().st_size > 0, path
    assert "underpowered" in (tmp_path / "tables" / "fake_scores.md").read_text().splitlines()[0]
    # the kind's section of the report's first page follows the Likert section
    overview.write_fragment(tmp_path, FAKE, "## Fake probe\n\n- **Models**: a, b\n")
    overview.write_fragment(tmp_path, LIKERT, "## Likert questionnaires\n\nFirst.\n")
    md, rst = overview.compose(tmp_path, first=(LIKERT,))
    text = md.read_text()
    assert text.startswith("# What this run measured\n\n## Likert questionnaires")
    assert text.index("## Likert questionnaires") < text.index("## Fake probe")
    assert "Fake probe\n----------" in rst.read_text()


def test_the_figure_mark_comes_from_the_table(tmp_path, monkeypatch):
    fake = _fake(tmp_path=tmp_path)
    drawn = {}

    def keep(fig, out_dir, name, png_text=None):
        drawn[name] = [t.get_text() for ax in fig.axes for t in ax.texts]
        plt.close(fig)
        return []

    from qclm.analysis import plotting

    monkeypatch.setattr(plotting, "save", keep)
    runner.run_outputs(fake, _context(), tmp_path)
    assert drawn["fake_scores"] == ["underpowered: 1 items"]  # model b: one item, fewer than 2
    drawn.clear()
    runner.run_outputs(fake, {**_context(), "min_items": 1}, tmp_path)
    assert drawn["fake_scores"] == []


def test_a_failing_figure_lets_the_others_be_drawn_then_fails(tmp_path):
    here = Path(__file__).stem
    fake = _fake(Output("fake_broken", FIGURE, "Fake", f"{here}:broken_figure", table="fake_scores"),
                 Output("fake_last", FIGURE, "Fake", f"{here}:fake_figure", table="fake_scores"), tmp_path=tmp_path)
    with pytest.raises(RuntimeError, match="drawing failed"):
        runner.run_outputs(fake, _context(), tmp_path)
    assert (tmp_path / "fake_summary.csv").exists()  # the tables were written before
    assert (tmp_path / "figures" / "fake_last.png").exists() and not (tmp_path / "figures" / "fake_broken.png").exists()
    assert plt.get_fignums() == []  # nothing left open


def test_a_figure_of_a_table_without_an_underpowered_column_is_refused(tmp_path):
    here = Path(__file__).stem
    (tmp_path / "plain.rst").write_text("A caption.\n")
    outputs = registry.declare(FAKE, [Output("plain", TABLE, "Fake", f"{here}:fake_table"),
                                      Output("plain", FIGURE, "Fake", f"{here}:fake_figure", table="plain")], tmp_path)
    tables = {"plain": fake_table(_context()).drop(columns="underpowered")}
    with pytest.raises(ValueError, match="figure 'plain': its table 'plain' has no `underpowered` column"):
        runner.draw_figures(outputs, _context(), tables, tmp_path)


def test_code_that_does_not_load_names_the_output():
    output = Output("ghost", TABLE, "Fake", "qclm.analysis.stats:no_such_table")
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


def test_compose_orders_the_sections_and_composes_the_given_ones(tmp_path):
    for kind in ("zeta", LIKERT, "alpha"):
        overview.write_fragment(tmp_path, kind, f"## Section {kind}\n\nText of {kind}.")
    assert [p.name for p in overview.fragments(tmp_path, first=(LIKERT,))] == [
        "overview.likert.md", "overview.alpha.md", "overview.zeta.md"]  # Likert first, then by name
    overview.compose(tmp_path, first=(LIKERT,))
    text = (tmp_path / "overview.md").read_text()
    assert text.index("Section likert") < text.index("Section alpha") < text.index("Section zeta")
    # the workflow's rule: the sections it names, in its (report) order, nothing else
    overview.compose(tmp_path, [tmp_path / "overview.likert.md", tmp_path / "overview.zeta.md"])
    text = (tmp_path / "overview.md").read_text()
    assert "alpha" not in text and text.index("Section likert") < text.index("Section zeta")


def test_qclm_analyze_writes_the_likert_section_and_the_whole_page(tmp_path):
    from qclm.analysis.synthetic import synthetic_item_scores
    from qclm.probes.likert.analysis import analyze

    synthetic_item_scores(n_models=2, n_items=2, n_stimuli=2).to_parquet(tmp_path / "items.parquet")
    out = tmp_path / "out"
    overview.write_fragment(out, "memorization", "## Memorization\n\nAnother kind's section.")
    analyze(tmp_path / "items.parquet", out, bootstrap=10, figures=False)
    section = (out / "overview.likert.md").read_text()
    assert section.startswith("## Likert questionnaires\n\n- **Models (2; size, dtype, prompt format)**")
    page = (out / "overview.md").read_text()
    assert page == f"# What this run measured\n\n{section}\n## Memorization\n\nAnother kind's section.\n"
    assert (out / "overview.rst").read_text() == overview.markdown_to_rst(page)
