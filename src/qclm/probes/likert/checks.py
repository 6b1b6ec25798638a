"""The Likert kind's checks of a run's config beyond each instance's own (``LikertProbe.check_config``, called by
:func:`qclm.validation.validate_config` for a run with Likert questionnaires): the wordings ``templates:`` scores and
selects exist in every questionnaire, and ``analysis.heatmap_item`` names one item the run scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qclm.errors import InputError, Problem
from qclm.probes.likert.sections import TEMPLATE_SELECTIONS, TEMPLATES
from qclm.questionnaire import Questionnaire, load_questionnaire


def config_problems(kind, config: dict, cf: str, instances: list[tuple[str, Any, str]],
                    found: list[Problem]) -> list[Problem]:
    """The problems of the Likert settings across the run's questionnaires (``instances``: (id, entry, location)
    of each; ``found``: the problems found so far, so that an instance whose entry has one is not read again)."""
    from qclm import probes

    problems: list[Problem] = []
    likert: dict[str, Questionnaire | None] = {}  # None: a questionnaire that does not load
    for ident, entry, where in instances:
        if any(loc.startswith(where) for _, loc, _ in found):
            continue
        path = probes.settings_of(kind, entry).get("questionnaire")
        if isinstance(path, str) and Path(path).expanduser().is_file():  # else: the schema or the kind reports it
            try:
                likert[ident] = load_questionnaire(path)
            except InputError as err:
                problems.extend(err.problems)
                likert[ident] = None
    problems.extend(template_problems(config, cf, {k: q for k, q in likert.items() if q is not None}))
    all_loaded = len(likert) == len(instances) and all(q is not None for q in likert.values())
    analysis = config.get("analysis")
    item = analysis.get("heatmap_item") if isinstance(analysis, dict) else None
    if isinstance(item, str) and all_loaded and likert:
        problem = heatmap_item_problem(item, likert, config.get("limit_items"))
        if problem:
            problems.append((cf, "field analysis.heatmap_item", problem))
    return problems


def template_problems(config: dict, cf: str, questionnaires: dict) -> list[Problem]:
    """The wordings the config scores and selects exist in every questionnaire; averaging over templates needs
    every template under every stimulus."""
    settings = config.get(TEMPLATES)
    if not isinstance(settings, dict):
        return []
    problems: list[Problem] = []
    score, select = settings.get("score"), settings.get("select")
    wanted = [("score", t) for t in score if isinstance(t, str)] if isinstance(score, list) else []
    if isinstance(select, str) and select not in TEMPLATE_SELECTIONS:
        wanted.append(("select", select))
    for field, tid in wanted:
        for q in questionnaires.values():
            if tid not in q.templates:
                problems.append((cf, f"field templates.{field}", f"unknown template id '{tid}': {q.path} has "
                                 f"templates {', '.join(q.templates)}"))
    if isinstance(select, str) and select not in TEMPLATE_SELECTIONS and isinstance(score, (list, str)):
        scored = score if isinstance(score, list) else None
        if score == "first" or (scored is not None and select not in scored):
            problems.append((cf, "field templates.select", f"selects template '{select}', which "
                             "templates.score does not score"))
    if select == "all" and settings.get("extra_limit_stimuli") is not None:
        problems.append((cf, "field templates.select", "all averages over the templates, but "
                         "templates.extra_limit_stimuli scores the templates after the first on a subset of the "
                         "stimuli only: select first (or a template id), or set extra_limit_stimuli to null"))
    return problems


def heatmap_item_problem(item: str, questionnaires: dict, limit_items: Any = None) -> str | None:
    """Why ``item`` names no single item the run scores (questionnaire id -> loaded questionnaire), or None."""
    limit = limit_items if isinstance(limit_items, int) and not isinstance(limit_items, bool) else None
    scored = {key: [i.id for i in q.items][:limit] if limit else [i.id for i in q.items]
              for key, q in questionnaires.items()}
    if ":" in item and not any(item in ids for ids in scored.values()):
        key, item_id = item.split(":", 1)
        if key not in scored:
            return f"{item!r}: no questionnaire {key!r} (questionnaires: {', '.join(scored)})"
        if item_id not in scored[key]:
            return f"{item!r}: questionnaire {key} scores no item {item_id!r}" + (
                f" (limit_items: {limit})" if limit else "")
        return None
    holders = [key for key, ids in scored.items() if item in ids]
    if not holders:
        return f"{item!r} is not an item the run scores" + (f" (limit_items: {limit})" if limit else "") + \
            "; write ITEM or QUESTIONNAIRE:ITEM"
    if len(holders) > 1:
        return f"{item!r} is an item of {', '.join(holders)}: write QUESTIONNAIRE:ITEM"
    return None
