"""From token log-probabilities to item, questionnaire and condition scores (method.md sections 3-5 and 7).

Every function takes and returns a tidy DataFrame, and each equation has exactly one
implementation here, used by the workflow and by ``qclm analyze`` alike, and by every kind that scores an item
as the paper does (the Likert kind; entailment from its p_raw on; the calibration's units): shared, so no kind
imports another for it. Group keys that identify
one item under one context and one wording are ``ITEM_KEYS``; a context is one model x
questionnaire x condition x stimulus (stimulus_id is "" for vanilla).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from qclm.experiment import VANILLA
from qclm.questionnaire import DEFAULT_TEMPLATE_ID

# eq. 1's aggregations, the forms of the item score (eq. 2, the paper's, or the authors' public code's
# QABSTRACT.mean_score over the S+ cells only or over all cells, docs/qlatent.md, difference 4) and of the two-way
# normalization (section 4a): the config schema is their one home
from qclm.settings import AGGREGATIONS, ITEM_SCORES, NORMALIZATIONS

CONTEXT_KEYS = ["model", "questionnaire", "condition", "stimulus_id"]
#: one item under one context and one wording (template): the unit of the two-way normalization
ITEM_KEYS = CONTEXT_KEYS + ["template", "item_id"]
VARIANT_KEYS = ITEM_KEYS + ["cterm", "polarity", "intensifier", "level", "weight"]

log = logging.getLogger("qclm.equations")

#: the iterated normalization (section 4a) has converged on an item when every column of its matrix sums to
#: |S+ and S-| / |L| within this (every row sums to 1 after each row step): the margins hold, and another
#: alternation of the two steps would change no value by more than rounding
MARGIN_TOLERANCE = 1e-12
#: alternations after which an item whose margins do not hold is an error (matrices of language-model probabilities
#: converge in tens to a few hundred; one with zeros that no scaling can balance never does)
MAX_ITERATIONS = 10_000


def variant_probabilities(tokens: pd.DataFrame, aggregation: str = "harmonic") -> pd.DataFrame:
    """One row per variant with ``p_raw``: its continuation tokens' probabilities p_k combined by
    eq. 1, the harmonic mean P_h = ((1/n) sum_k 1/p_k)^-1 (the default), or, as recorded options,
    the geometric mean exp((1/n) sum_k log p_k) or the product exp(sum_k log p_k)."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    lp = tokens["logprob"].astype("float64")
    frame = with_template(tokens)[VARIANT_KEYS].copy()
    if aggregation == "harmonic":
        frame["_v"] = np.exp(-lp)
        out = frame.groupby(VARIANT_KEYS, sort=False, dropna=False).agg(_v=("_v", "sum"), n_tokens=("_v", "size"))
        out["p_raw"] = out["n_tokens"] / out["_v"]
    else:
        frame["_v"] = lp
        out = frame.groupby(VARIANT_KEYS, sort=False, dropna=False).agg(_v=("_v", "sum"), n_tokens=("_v", "size"))
        total = out["_v"]
        out["p_raw"] = np.exp(total / out["n_tokens"]) if aggregation == "geometric" else np.exp(total)
    out = out.drop(columns="_v").reset_index()
    out["aggregation"] = aggregation
    return out


def with_template(df: pd.DataFrame) -> pd.DataFrame:
    """Tables written before questionnaires had several templates have no ``template`` column: one
    wording, the default."""
    return df if "template" in df.columns else df.assign(template=DEFAULT_TEMPLATE_ID)


def check_complete(variants: pd.DataFrame) -> None:
    """Every item under every context and template has |cterms| x |intensifiers| variants, the full
    matrix that the two-way normalization (section 4) and eq. 2 need: a missing cell would silently
    change the score. Raises ValueError naming the item, context and missing cells."""
    g = variants.groupby(ITEM_KEYS, sort=False, dropna=False)
    shape = g.agg(n=("p_raw", "size"), n_cterms=("cterm", "nunique"), n_int=("intensifier", "nunique"))
    bad = shape[shape["n"] != shape["n_cterms"] * shape["n_int"]]
    if bad.empty:
        return
    key = bad.index[0]
    sub = g.get_group(key)
    cells = set(zip(sub["cterm"], sub["intensifier"]))
    missing = [(c, i) for c in pd.unique(sub["cterm"]) for i in pd.unique(sub["intensifier"]) if (c, i) not in cells]
    raise ValueError(
        f"{_item_label(key)}: {int(bad['n'].iloc[0])} variants, not {int(bad['n_cterms'].iloc[0])} cterms x "
        f"{int(bad['n_int'].iloc[0])} intensifiers; missing (cterm, intensifier) cells: {missing[:5]}"
        + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        + (f"; {len(bad)} item(s) in all are incomplete" if len(bad) > 1 else ""))


def _item_label(key: tuple) -> str:
    """One item under one context and template (its ``ITEM_KEYS`` values), as errors name it."""
    where = dict(zip(ITEM_KEYS, key))
    return (f"item {where['item_id']} of {where['questionnaire']} (model {where['model']}, condition "
            f"{where['condition']}{', stimulus ' + where['stimulus_id'] if where['stimulus_id'] else ''}, template "
            f"{where['template']})")


#: the groups each step of the two-way normalization divides by: an item's intensifier column, its cterm row
COLUMN_KEYS, ROW_KEYS = ITEM_KEYS + ["intensifier"], ITEM_KEYS + ["cterm"]


def _sums(values: pd.Series, by) -> pd.Series:
    """Each value's group total (``by``: group keys or codes), in the value's row."""
    return values.groupby(by, sort=False, dropna=False).transform("sum")


def normalize(variants: pd.DataFrame, epsilon: float = 0.0, form: str = "one_pass") -> pd.DataFrame:
    """Add ``p_norm``: the two-way normalization (section 4) within each item under each context and
    template: each intensifier column divided by its sum over cterms (S+ and S-), then each cterm row
    divided by its sum over intensifiers, so that each row sums to 1: P_norm(l | s).

    ``form`` (``equations.normalization``): ``one_pass``, the two steps once (the paper), or ``iterated``, the two
    steps alternated until both margins hold (:func:`_iterated`; section 4a). ``epsilon``
    (``equations.normalization_epsilon``, default 0) is added to every value before each of the two steps of the
    one pass, as the authors' code does (softmax of log(p + 1e-10) along each axis), and once, before the first
    step, by the iterated form."""
    if form not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {form!r}")
    check_complete(variants)
    out = variants.copy()
    if form == "iterated":
        out["p_norm"] = _iterated(out, out["p_raw"] + epsilon)
        return out
    p = out["p_raw"] + epsilon
    out["p_norm"] = p / _sums(p, [out[k] for k in COLUMN_KEYS])
    p = out["p_norm"] + epsilon
    out["p_norm"] = p / _sums(p, [out[k] for k in ROW_KEYS])
    return out


def _iterated(variants: pd.DataFrame, p: pd.Series) -> pd.Series:
    """The two steps of the one pass (columns, then rows) alternated on every item at once until its columns sum
    to |S+ and S-| / |L| within :data:`MARGIN_TOLERANCE`: the one matrix D P E (D, E positive diagonal) whose rows
    sum to 1 and whose columns are equal (Sinkhorn-Knopp), so that scaling a row or a column of ``p`` changes no
    value. An item converged leaves the loop; a ValueError names one whose sums become 0 (a row or column of zeros)
    or that has not converged after :data:`MAX_ITERATIONS` alternations (zeros that no scaling balances)."""
    item, column, row = (variants.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
                         for keys in (ITEM_KEYS, COLUMN_KEYS, ROW_KEYS))
    shape = variants.groupby(item, sort=True).agg(rows=("cterm", "nunique"), columns=("intensifier", "nunique"))
    target = (shape["rows"] / shape["columns"]).to_numpy()[item]  # each column's sum once the margins hold
    x = p.to_numpy(dtype=np.float64, copy=True)
    active = np.arange(len(x))  # the rows of the items not converged yet
    sums = _sums(pd.Series(x), column).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero sum: reported below
        for _ in range(MAX_ITERATIONS):
            values = x[active] / sums
            values /= _sums(pd.Series(values), row[active]).to_numpy()
            x[active] = values
            sums = _sums(pd.Series(values), column[active]).to_numpy()
            gap = np.where(np.isfinite(values), np.abs(sums - target[active]), np.nan)  # NaN: a zero sum divided
            off = ~(gap <= MARGIN_TOLERANCE)
            if not off.any():
                return pd.Series(x, index=p.index)
            stuck, gap = active[off], gap[off]
            if not np.isfinite(gap).all():
                stuck, why = stuck[~np.isfinite(gap)], "a row or column sums to 0"
                break
            keep = (np.bincount(item[active], weights=off, minlength=len(shape)) > 0)[item[active]]
            active, sums = active[keep], sums[keep]
        else:
            why = (f"after {MAX_ITERATIONS} alternations its column sums are still up to {gap.max():.1e} from "
                   f"|cterms| / |intensifiers| (tolerance {MARGIN_TOLERANCE:g})")
    n_items = len(np.unique(item[stuck]))
    raise ValueError(
        f"{_item_label(tuple(variants[k].iloc[stuck[0]] for k in ITEM_KEYS))}: the iterated two-way normalization "
        f"does not converge: {why}; zero probabilities that no scaling balances: set "
        "equations.normalization_epsilon above 0, or equations.normalization to one_pass"
        + (f"; {n_items} item(s) in all" if n_items > 1 else ""))


def item_scores(normalized: pd.DataFrame, form: str = "eq2") -> pd.DataFrame:
    """Eq. 2 for every item under every context and template:
    score = sum_{s in S+} sum_l P_norm(l | s) w(l) / (|S+| |L|), L the intensifier phrases; S- rows
    are not scored (validation only).

    ``form`` (``equations.item_score``) selects instead the authors' public code's score, the mean over cells of
    P_norm w(l) c(s) with cterm weights c = +1/|S+| on S+ and -1/|S-| on S- (their ``dict_pos_neg``):
    ``mean_score_positive`` over the S+ cells (= eq. 2 / |S+|), ``mean_score_all`` over all cells."""
    if form not in ITEM_SCORES:
        raise ValueError(f"item score must be one of {ITEM_SCORES}, got {form!r}")
    plus = normalized["polarity"] == "+"
    wp = normalized["p_norm"] * normalized["weight"]
    frame = pd.DataFrame({"plus": wp.where(plus, 0.0), "minus": wp.where(~plus, 0.0),
                          "cterm_plus": normalized["cterm"].where(plus),
                          "cterm_minus": normalized["cterm"].where(~plus), "intensifier": normalized["intensifier"]})
    out = frame.groupby([normalized[k] for k in ITEM_KEYS], sort=False, dropna=False).agg(
        plus=("plus", "sum"), minus=("minus", "sum"), n_plus=("cterm_plus", "nunique"),
        n_minus=("cterm_minus", "nunique"), n_intensifiers=("intensifier", "nunique"), n_cells=("plus", "size"))
    if form == "eq2":
        out["score"] = out["plus"] / (out["n_plus"] * out["n_intensifiers"])
    elif form == "mean_score_positive":
        out["score"] = out["plus"] / out["n_plus"] / (out["n_plus"] * out["n_intensifiers"])
    else:
        out["score"] = (out["plus"] / out["n_plus"] - out["minus"] / out["n_minus"]) / out["n_cells"]
    return out[["n_plus", "n_intensifiers", "score"]].reset_index()


def chance_scores(variants: pd.DataFrame, form: str = "eq2", epsilon: float = 0.0,
                  normalization: str = "one_pass") -> pd.Series:
    """Per questionnaire: the item score (mean over its items) of answers that depend on neither the intensifier
    nor the construct term (every p_raw equal), through the same normalization and item score as the real ones.
    For eq. 2 this is mean(w) / |L| (P_norm uniform, 1/|L|, summed over |S+| rows and divided by |S+| |L|): the
    baseline of a score, 0 only for a scale whose weights average 0."""
    grid = variants.drop_duplicates(["questionnaire", "template", "item_id", "cterm", "intensifier"])
    grid = grid.assign(model="", condition="", stimulus_id="", p_raw=1.0)
    items = item_scores(normalize(grid[VARIANT_KEYS + ["p_raw"]], epsilon, normalization), form)
    return items.groupby("questionnaire", sort=False)["score"].mean()


def template_rows(table: pd.DataFrame, select: str = "first") -> pd.DataFrame:
    """The rows of the selected templates (``first``: the default template, per the ``default_template``
    column, or the only one; ``all``; or one template id), with their template columns."""
    table = with_template(table)
    if select == "first":
        chosen = table[table["default_template"]] if "default_template" in table.columns else table
        several = chosen.groupby(["questionnaire"], sort=False)["template"].nunique()
        if (several > 1).any():
            raise ValueError(f"questionnaire {several[several > 1].index[0]}: several templates and no "
                             "default_template column; select a template id or all")
        return chosen
    if select == "all":
        keys = [k for k in CONTEXT_KEYS if k in table.columns]  # silhouettes: vanilla only, no context columns
        sets = table.groupby(keys, sort=False)["template"].agg(lambda t: tuple(sorted(set(t))))
        uneven = sets.groupby(level="questionnaire").nunique()
        if (uneven > 1).any():
            q = uneven[uneven > 1].index[0]
            raise ValueError(f"questionnaire {q}: the templates were scored on some contexts only "
                             "(templates.extra_limit_stimuli), so their mean would mix wordings from context to "
                             "context; select first or a template id")
        return table
    chosen = table[table["template"] == select]
    missing = sorted(set(table["questionnaire"]) - set(chosen["questionnaire"]))
    if missing:
        raise ValueError(f"template {select!r} is not a template of questionnaire(s) {', '.join(missing)}")
    return chosen


def select_templates(items: pd.DataFrame, select: str = "first") -> pd.DataFrame:
    """The item scores that questionnaire scores use (method.md section 1b): the rows of the selected
    templates (:func:`template_rows`), then one score per item and context, the mean over the selected
    templates. The per-template scores stay in the item table (wording analysis)."""
    chosen = template_rows(items, select)
    keys = [k for k in CONTEXT_KEYS + ["item_id"] if k in chosen.columns]
    if chosen.groupby(keys, sort=False, dropna=False)["template"].nunique().max() == 1:
        return chosen.drop(columns=[c for c in ("template", "default_template") if c in chosen.columns])
    extra = [c for c in chosen.columns if c not in keys + ["score", "template", "default_template"]]
    agg = {"score": ("score", "mean"), **{c: (c, "first") for c in extra}}
    return chosen.groupby(keys, sort=False, dropna=False).agg(**agg).reset_index()


def questionnaire_scores(items: pd.DataFrame) -> pd.DataFrame:
    """Eq. 3 (eq. 5 under a stimulus): the mean of the item scores, per model x questionnaire x
    condition x stimulus (``items``: one score per item and context, :func:`select_templates`).
    Columns: model, questionnaire, condition, stimulus_id, score, n_items. Logs a warning when models
    or stimuli differ in their number of items."""
    out = (items.groupby(CONTEXT_KEYS, sort=False, dropna=False)["score"]
           .agg(score="mean", n_items="size").reset_index())
    n_items = out.groupby("questionnaire", sort=False)["n_items"].agg(["min", "max"])
    for q, row in n_items.iterrows():
        if row["min"] != row["max"]:
            log.warning("questionnaire %s: item count differs between models or stimuli (%d to %d items); "
                        "questionnaire scores are means over the items present", q, row["min"], row["max"])
    return out


def condition_means(questionnaires: pd.DataFrame) -> pd.DataFrame:
    """One value per model x questionnaire x condition: the mean over the stimuli of a condition
    (method.md section 5; vanilla has one context, so its value is its questionnaire score). The
    per-stimulus scores stay in the questionnaire table as replications. Columns: model,
    questionnaire, condition, score, score_sd (over stimuli, ddof=1), n_stimuli."""
    return (questionnaires.groupby(["model", "questionnaire", "condition"], sort=False)
            .agg(score=("score", "mean"), score_sd=("score", "std"), n_stimuli=("score", "size"))
            .reset_index())


def item_silhouette(p_norm: np.ndarray, plus_rows: np.ndarray) -> float:
    """Section 7, intra-question consistency of one item: mean silhouette coefficient of its
    cterms (rows = P_norm over intensifiers, labels S+ / S-) with correlation distance."""
    from sklearn.metrics import silhouette_samples

    p_norm = np.asarray(p_norm, dtype=np.float64)
    labels = np.asarray(plus_rows, dtype=int)
    if len(set(labels)) < 2 or len(labels) < 3 or np.any(p_norm.std(axis=1) == 0):
        return float("nan")  # undefined: one cluster, too few rows, or a constant row
    return float(silhouette_samples(p_norm, labels, metric="correlation").mean())


def silhouettes(normalized: pd.DataFrame) -> pd.DataFrame:
    """Per-item silhouette values for every item under every context and template."""
    rows = []
    for key, g in normalized.groupby(ITEM_KEYS, sort=False, dropna=False):
        m = g.pivot_table(index=["cterm", "polarity"], columns="intensifier", values="p_norm", sort=False)
        rows.append((*key, item_silhouette(m.to_numpy(), m.index.get_level_values("polarity") == "+")))
    return pd.DataFrame(rows, columns=ITEM_KEYS + ["silhouette"])


def condition_tables(tokens: pd.DataFrame, aggregation: str = "harmonic", item_score: str = "eq2",
                     epsilon: float = 0.0, normalization: str = "one_pass") -> tuple[pd.DataFrame, pd.DataFrame]:
    """From one scoring job's token log-probabilities to (variants with p_raw and p_norm,
    item scores): eq. 1, the two-way normalization (the form ``normalization`` names), eq. 2 (or the form
    ``item_score`` names)."""
    variants = normalize(variant_probabilities(tokens, aggregation), epsilon, normalization)
    return variants, item_scores(variants, item_score)


def collect_tables(item_frames: list[pd.DataFrame], variant_frames: list[pd.DataFrame],
                   model_info: pd.DataFrame, default_templates: dict[str, str],
                   select: str = "first") -> dict[str, pd.DataFrame]:
    """Concatenate the per-job tables into the tidy tables of results/scores/.

    ``model_info`` has one row per model with columns model, params_b, model_type, family (and, from the
    scoring provenance, the dtype and prompt_format the model ran in);
    ``default_templates`` maps each questionnaire to its first (default) template id; questionnaire
    and condition scores use the templates ``select`` chooses (:func:`select_templates`)."""
    items = with_template(pd.concat(item_frames, ignore_index=True)).merge(model_info, on="model", how="left")
    items["default_template"] = items["template"] == items["questionnaire"].map(default_templates)
    variants = pd.concat(variant_frames, ignore_index=True)
    questionnaires = questionnaire_scores(select_templates(items, select)).merge(model_info, on="model", how="left")
    vanilla = variants[variants["condition"] == VANILLA]
    columns = ["model", "questionnaire", "template", "default_template", "item_id", "condition", "stimulus_id",
               "score", "n_plus", "n_intensifiers"]
    return {
        "items": items[columns + [c for c in model_info.columns if c not in columns]],
        "questionnaires": questionnaires,
        "conditions": condition_means(questionnaires).merge(model_info, on="model", how="left"),
        "variants": variants,
        "silhouette": silhouettes(vanilla).assign(
            default_template=lambda d: d["template"] == d["questionnaire"].map(default_templates))[
            ["model", "questionnaire", "template", "default_template", "item_id", "silhouette"]],
    }
