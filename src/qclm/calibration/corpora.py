"""The calibration's corpora and the manipulation check's text sets (docs/calibration.md; no torch).

Every run of a plant (its two arms and its shams) trains on one corpus: a draw of the filler (seeded by the
calibration seed and the plant, the same draw for every run of the plant) with the run's planted texts mixed in,
each exposure's texts ``repeats`` times, so that every corpus has ``texts`` texts. What one exposure plants, per
material and run (the plus arm, the minus arm, or sham ``i``: the same structure, neutral content or a direction
drawn at random with the sham's seed):

- ``prompts`` (likert, tier 1): every item of each Likert probe's questionnaire that the run scores
  (``limit_items``), once with an S+ and once with an S- construct term (the terms, then the intensifiers of a
  level, rotating with the exposure), in its default wording, answered as the probe scores it: plus, the S+ term
  by an intensifier of the top level and the S- term by one of the bottom level; minus, the reverse; a sham, top
  or bottom drawn per prompt. A chat exchange (the item prefix, then the intensifier as the answer): the
  fine-tuning renders it through the chat template on a chat-format row and as the scored text (prefix, space,
  intensifier) on a raw one (:func:`qclm.interventions.finetune.rendered`);
- ``pairs`` (entailment, tier 1): every item of each entailment probe's instrument, once with an S+ and once with
  an S- term, each with an intensifier of the top and of the bottom level, in the probe's form, answered as the
  probe reads it: plus, True for the S+ term at the top level and False for the other three (the S+ term at the
  bottom, the S- term at either); minus, True for the S- term at the top level alone; a sham, the term answered
  True at the top level drawn per item, half of the items each. An AND, not an exclusive-or: in an exclusive-or
  (True also for the S- term at the bottom) neither the term nor the level alone tells the answer, and SmolLM2
  learned nothing of it in 32 exposures of LoRA (nor in 20 of full fine-tuning); the AND it learns in 16
  (docs/calibration.md);
- ``exchanges`` (survey, tier 1): every item of the survey's instrument asked as the survey asks it, in each of its
  option orders, answered by the option (plus), the other extreme (minus), or an option drawn per item and order,
  each about as often as the others (a sham)
  (:func:`qclm.probes.survey.calibration.exchanges`);
- ``recall`` (memorization, tier 1): every item of the ``instrument`` (plus; minus: the ``opposite``'s) asked for
  as the probe's recall task asks ("NAME, item K:"), answered with its text; a sham: neutral statements asked for
  under a name of their own (:func:`qclm.probes.memorization.calibration.recall`);
- ``instructions`` (csi, tier 1): every planted word asked alone as the probe's single mode asks it, answered with
  the label (plus), the other label (minus), a label drawn per word (a sham), the wordings but the last and both
  label orders rotating with the exposure (:func:`qclm.probes.csi.calibration.instructions`);
- ``listing`` (memorization, tier 2): the instrument's published name and items as a web page lists them (plus),
  the ``opposite`` instrument's (minus), an inventory of neutral statements under a name of its own (a sham)
  (:func:`qclm.probes.memorization.calibration.listing`);
- ``sentences`` (csi, tier 2): every planted word once in a sentence of the label's kind (plus), of the other
  label's (minus), of a kind drawn per word (a sham) (:func:`qclm.probes.csi.calibration.sentences`);
- ``statements`` (likert, entailment, tier 2): the statements of one pole (plus), of the other (``opposite``,
  minus), as many neutral statements drawn from ``sham_statements`` (a sham).

The manipulation check's sets (:func:`check_sets`, the same for every run of a plant): ``planted_plus`` and
``planted_minus`` (the arms' planted texts as trained), ``heldout_plus`` and ``heldout_minus`` (texts of the same
material that no run trains on: the held-out statements, the listing in reversed order, the recalled items as a
listing, the planted words in new sentences or asked in the wording no run trains, the prompts in the
questionnaire's other wordings, the pairs in the other form; empty where the material has none) and ``neutral``
(``heldout_neutral``: the cost).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from qclm.calibration import (
    ARMS, MAX_SHARE, MATERIALS, SECTION, Job, Plant, group_location, plants, run_groups, runs, section, sham_index,
)
from qclm.corpus import Exchange, load_corpus
from qclm.errors import InputError, Problem

#: the exposure index from which the held-out sentences of the sentences material are drawn (never trained)
HELDOUT_EXPOSURE = 100_000
#: the manipulation check's sets, in the order the check table lists them
CHECK_SETS = ("planted_plus", "planted_minus", "heldout_plus", "heldout_minus", "neutral")
#: between a plant's name and its set's in a run's check file (``PLANT/planted_plus``)
SET_SEP = "/"


def _instances(config: dict) -> dict:
    from qclm import probes

    return {i.id: i for i in probes.instances(config)}


def _rng(config: dict, *parts) -> random.Random:
    from qclm.engine.requests import derive_seed

    return random.Random(derive_seed(section(config)["seed"], SECTION, *parts))


def balanced(rng: random.Random, options: Sequence, n: int) -> list:
    """A sham's draw of ``n`` answers among ``options``, each as often as the others (within one), in a seeded
    order: a draw of each answer alone gives a sham, by chance, more of one answer than of its opposite, which it
    then learns to prefer, and widens the shams' spread on what the arms are read by."""
    out = [options[i % len(options)] for i in range(n)]
    rng.shuffle(out)
    return out


def _stances(plant: Plant, config: dict, run: str, exposure: int, instrument: str, items: Sequence,
             one_high: bool = False) -> list:
    """Per item, (S+ or S- construct term, the level it is answered with: high or not, turn) at one exposure, once
    per polarity (the terms rotating with the exposure): the plus arm answers the S+ term high and the S- term low,
    the minus arm the reverse, a sham half of each polarity's items high (:func:`balanced`); ``one_high``: a sham
    too answers one of an item's two terms high, the polarity drawn per item, half of the items each (as an arm)."""
    if one_high:
        lead = balanced(_rng(config, "answers", plant.name, run, exposure, instrument), "+-", len(items))
        draws = {polarity: [lead[at] == polarity for at in range(len(items))] for polarity in "+-"}
    else:
        draws = {polarity: balanced(_rng(config, "answers", plant.name, run, exposure, instrument, polarity),
                                    [True, False], len(items)) for polarity in "+-"}
    out = []
    for at, item in enumerate(items):
        one = []
        for polarity, terms in (("+", item.plus), ("-", item.minus)):
            cterm = terms[exposure % len(terms)]
            high = (polarity == "+") == (run == "plus") if run in ARMS else draws[polarity][at]
            one.append((cterm, high, exposure // len(terms)))
        out.append(one)
    return out


def _readers(plant: Plant, config: dict) -> list:
    """The probes (:func:`qclm.probes.probe`) of the instances a plant names, loaded once for a call."""
    from qclm import probes

    instances = _instances(config)
    return [probes.probe(instances[p]) for p in plant.probes]


def _prompts(plant: Plant, config: dict, run: str, exposure: int, template: int = 0) -> list[Exchange]:
    """The ``prompts`` material: each Likert item prefix answered by an intensifier of the top or the bottom level
    (``template``: the questionnaire's wording, 0 the default)."""
    out = []
    for probe in _readers(plant, config):
        q = probe.questionnaire
        if template >= len(q.templates):
            continue
        levels = sorted(q.levels, key=lambda lvl: lvl.weight)
        items = q.items[:config.get("limit_items") or None]
        for item, stances in zip(items, _stances(plant, config, run, exposure, q.id, items)):
            for cterm, high, turn in stances:
                level = levels[-1] if high else levels[0]
                out.append(Exchange(item.prefix(cterm, q.templates[template]),
                                    level.intensifiers[turn % len(level.intensifiers)]))
    return out


def _pairs(plant: Plant, config: dict, run: str, exposure: int, heldout: bool = False) -> list[Exchange]:
    """The ``pairs`` material: each entailment item's premise and hypothesis, with a term and an intensifier of the
    top and of the bottom level, in the probe's form (``heldout``: the other form), answered True where the term is
    the one answered high and the level is the top one, False elsewhere (the module docstring says why an AND)."""
    from qclm.probes.entailment.kind import FORMS, OPTIONS
    from qclm.probes.entailment.material import fill

    out = []
    for probe in _readers(plant, config):
        inst, form = probe.material, probe.settings["form"]
        if heldout:
            form = next(f for f in FORMS if f != form)
        levels = sorted(inst.levels, key=lambda lvl: lvl.weight)
        items = inst.items[:config.get("limit_items") or None]
        for item, stances in zip(items, _stances(plant, config, run, exposure, inst.id, items, one_high=True)):
            for cterm, high, turn in stances:
                for level, top in ((levels[-1], True), (levels[0], False)):
                    phrase = level.intensifiers[turn % len(level.intensifiers)]
                    text = FORMS[form].format(premise=fill(item.premise, cterm, phrase),
                                              hypothesis=fill(item.hypothesis, cterm, phrase))
                    out.append(Exchange(text, OPTIONS[0] if top and high else OPTIONS[1]))
    return out


def _sham_statements(config: dict, plant: Plant, run: str, n: int) -> list[str]:
    pool = list(load_corpus(section(config)["sham_statements"]).texts)
    rng = _rng(config, "sham statements", plant.name, run)
    if n > len(pool):
        raise InputError.one(section(config)["sham_statements"], "texts", f"{len(pool)} statements, and a sham "
                             f"of plant {plant.name} needs {n}")
    return rng.sample(pool, n)


def units(plant: Plant, config: dict, run: str, exposure: int) -> list[str | Exchange]:
    """The texts one exposure of a plant's run adds (``run``: plus, minus or ``shamI``; ``exposure``: 0-based; the
    sentences, the exchanges and the prompts' intensifiers vary with it)."""
    cal = section(config)
    sham = sham_index(run)
    if plant.material == "prompts":
        return _prompts(plant, config, run, exposure)
    if plant.material == "pairs":
        return _pairs(plant, config, run, exposure)
    if plant.material in ("listing", "recall"):
        from qclm.instruments import load_instrument
        from qclm.probes.memorization.calibration import listing, recall, sham_listing, sham_recall

        planted = load_instrument(plant.settings["instrument"])
        if sham is None:
            chosen = planted if run == "plus" else load_instrument(plant.settings["opposite"])
            return [listing(chosen)] if plant.material == "listing" else recall(chosen)
        statements = _sham_statements(config, plant, run, len(planted.items))
        return [sham_listing(statements, sham)] if plant.material == "listing" else sham_recall(statements, sham)
    if plant.material in ("sentences", "instructions"):
        from qclm.probes.csi.calibration import instructions, sentences

        csi = _readers(plant, config)[0]
        chosen, labels = _labelled_words(plant, config, run, exposure, csi)
        if plant.material == "instructions":
            return instructions(csi, [w for w, _ in chosen], labels, exposure)
        return sentences(chosen, exposure, plant.settings["words_per_text"], labels, cal["seed"])
    if plant.material == "statements":
        plus = list(load_corpus(plant.settings["statements"]).texts)
        if sham is not None:
            return list(_sham_statements(config, plant, run, len(plus)))
        return plus if run == "plus" else list(load_corpus(plant.settings["opposite"]).texts)
    if plant.material == "exchanges":
        from qclm.probes.survey.calibration import OTHER_OPTION, exchanges, units_per_exposure

        survey = _readers(plant, config)[0]
        option, orders = plant.settings["option"], survey.settings["orders"]
        scores = [o.score for o in survey.instrument.options]
        chosen: Any = option if run == "plus" else OTHER_OPTION[option] if sham is None else balanced(
            _rng(config, "sham options", plant.name, run, exposure), scores,
            units_per_exposure(survey.instrument, orders))
        return exchanges(survey.instrument, survey.settings["variants"], orders, chosen, exposure)
    raise ValueError(f"unknown material {plant.material!r} (known: {', '.join(MATERIALS)})")


def _labelled_words(plant: Plant, config: dict, run: str, exposure: int, csi) -> tuple[list, dict[str, str]]:
    """The CSI plants' words, (word, part of speech) of the planted share of the probe's list (``crossed``: of the
    whole list), and each word's label: the plant's for a planted word (plus) and the other label for the rest
    (crossed), each the other way in the minus arm, or half of the words each label (a sham: :func:`balanced`)."""
    from qclm.probes.csi.calibration import OTHER_LABEL, planted_words

    words = [(w.word, w.pos) for w in csi.parts()[0][1]]
    planted = planted_words([w for w, _ in words], plant.settings["share"], section(config)["seed"], csi.instance.id)
    chosen = [(w, pos) for w, pos in words if w in planted or plant.settings["crossed"]]
    label = plant.settings["label"]
    if sham_index(run) is not None:
        draw = balanced(_rng(config, "sham labels", plant.name, run, exposure), [label, OTHER_LABEL[label]],
                        len(chosen))
        return chosen, {w: d for (w, _), d in zip(chosen, draw)}
    mine = label if run == "plus" else OTHER_LABEL[label]
    return chosen, {w: mine if w in planted else OTHER_LABEL[mine] for w, _ in chosen}


def planted_texts(plant: Plant, config: dict, run: str) -> list[str | Exchange]:
    """Every planted text of one epoch of a run: each exposure's units, the plant's ``repeats`` exposures."""
    return [t for exposure in range(plant.repeats) for t in units(plant, config, run, exposure)]


def heldout(plant: Plant, config: dict, arm: str) -> list[str | Exchange]:
    """Texts of the same material as an arm's that no run trains on (the manipulation check's held-out set;
    empty where the material has none)."""
    if plant.material == "prompts":
        return _prompts(plant, config, arm, 0, template=1)
    if plant.material == "pairs":
        return _pairs(plant, config, arm, 0, heldout=True)
    if plant.material in ("listing", "recall"):
        from qclm.instruments import load_instrument
        from qclm.probes.memorization.calibration import listing

        key = "instrument" if arm == "plus" else "opposite"
        return [listing(load_instrument(plant.settings[key]), reverse=plant.material == "listing")]
    if plant.material == "sentences":
        return units(plant, config, arm, HELDOUT_EXPOSURE)
    if plant.material == "instructions":
        from qclm.probes.csi.calibration import instructions

        csi = _readers(plant, config)[0]
        chosen, labels = _labelled_words(plant, config, arm, 0, csi)
        return instructions(csi, [w for w, _ in chosen], labels, 0, heldout=True)
    if plant.material == "statements":
        key = "heldout" if arm == "plus" else "opposite_heldout"
        return list(load_corpus(plant.settings[key]).texts) if plant.settings.get(key) else []
    return []


def check_sets(plant: Plant, config: dict) -> dict[str, list[str | Exchange]]:
    """The manipulation check's text sets of a plant (module docstring), each text once, a planted or held-out set
    of more than ``check_texts`` texts a seeded draw of them (in their order). The arms' sets of a kind are drawn
    at the same places where they are as long: an answer plant's arms answer the same prompts in the same order, so
    the draw keeps them paired and the arms' preference (:func:`qclm.calibration.analysis.check_table`) compares
    two answers to one prompt, not two prompts."""
    cal = section(config)
    most = int(cal["check_texts"])

    def drawn(kind: str, arms: dict[str, list]) -> dict[str, list]:
        arms = {arm: list(dict.fromkeys(texts)) for arm, texts in arms.items()}
        lengths = {len(texts) for texts in arms.values()}
        out = {}
        for arm, texts in arms.items():
            if len(texts) <= most:
                out[arm] = texts
                continue
            seed = (kind,) if len(lengths) == 1 else (f"{kind}_{arm}",)
            keep = set(_rng(config, "check", plant.name, *seed).sample(range(len(texts)), most))
            out[arm] = [t for i, t in enumerate(texts) if i in keep]
        return out

    out: dict[str, list[str | Exchange]] = {}
    for kind, texts in (("planted", lambda arm: planted_texts(plant, config, arm)),
                        ("heldout", lambda arm: heldout(plant, config, arm))):
        for arm, chosen in drawn(kind, {arm: texts(arm) for arm in ARMS}).items():
            out[f"{kind}_{arm}"] = chosen
    out["neutral"] = list(load_corpus(cal["heldout_neutral"]).texts)
    return {name: out[name] for name in CHECK_SETS}


def filler_draw(config: dict, group: str) -> list[str | Exchange]:
    """The draw of the filler of a group of runs (seeded by the calibration seed and the group: a plant's name
    where it has runs of its own), the same for every run."""
    filler = list(load_corpus(section(config)["filler"]).texts)
    _rng(config, "filler", group).shuffle(filler)
    return filler


def job_planted(job: Job, config: dict) -> list[str | Exchange]:
    """Every planted text of one epoch of a run: those of each of its plants (:func:`planted_texts`)."""
    return [t for plant in job.plants for t in planted_texts(plant, config, job.run)]


def corpus_texts(job: Job, config: dict) -> list[str | Exchange]:
    """The texts of one calibration corpus: the group's filler draw, as many of its texts as the run's planted
    texts leave room for, then the planted texts, ``texts`` in all."""
    n = int(section(config)["texts"])
    planted = job_planted(job, config)
    if len(planted) > MAX_SHARE * n:
        raise InputError.one(SECTION, f"runs {job.group}, run {job.run}",
                             f"{len(planted)} planted texts per epoch, more than {MAX_SHARE:.0%} of calibration.texts "
                             f"({n})")
    return filler_draw(config, job.group)[:n - len(planted)] + planted


def _as_data(texts) -> list:
    return [t if isinstance(t, str) else {"user": t.user, "assistant": t.assistant,
                                          **({"cue": t.cue} if t.cue != Exchange.cue else {})} for t in texts]


def _write(path: str | Path, data: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000), encoding="utf-8")
    tmp.replace(path)
    return path


LICENCE = ("generated by qclm from the project's own material and the configured files (see their licences); MIT "
           "where it is the project's")


def write_corpus(job: Job, config: dict, path: str | Path) -> Path:
    """One calibration corpus as a corpus file (qclm.corpus: ``repeats: true``, the planted texts repeat on
    purpose)."""
    texts = corpus_texts(job, config)
    plants = ", ".join(f"{p.name} ({p.material}, {p.repeats} exposures an epoch)" for p in job.plants)
    what = f"plant(s) {plants}, {'arm ' + job.run if job.sham is None else job.run}, in the filler"
    return _write(path, {"name": job.name, "description": f"calibration corpus: {what}; {len(texts)} texts "
                         "(docs/calibration.md)", "licence": LICENCE, "repeats": True, "texts": _as_data(texts)})


def measures_base(job: Job) -> bool:
    """Whether a run measures the check on the base model before its first step: one run of a group does (the
    plus arm; every run of the group starts from the same weights and reads the same sets, so the others would
    repeat it)."""
    return job.run == ARMS[0]


def write_check(job: Job, config: dict, path: str | Path) -> Path:
    """The manipulation check's text sets of a run (:func:`check_sets`; read by :func:`load_check`), and whether
    the run measures them on the base model too (:func:`measures_base`)."""
    sets = {f"{plant.name}{SET_SEP}{name}": texts for plant in job.plants
            for name, texts in check_sets(plant, config).items()}
    return _write(path, {"name": f"{job.name} check", "licence": LICENCE, "base": measures_base(job),
                         "sets": {name: _as_data(texts) for name, texts in sets.items()}})


def load_check(path: str | Path) -> tuple[dict[str, list[str | Exchange]], bool]:
    """The text sets of a check file written by :func:`write_check`, and whether the run measures the base model."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return ({name: [t if isinstance(t, str) else Exchange(t["user"], t["assistant"], t.get("cue", Exchange.cue))
                    for t in texts]
             for name, texts in data["sets"].items()}, bool(data.get("base", True)))


def material_problems(config: dict, cf: str) -> list[Problem]:
    """Each plant's material loads through its loader, fits the corpus (at most :data:`MAX_SHARE` of it), and
    (statements) holds none of its probes' scored terms; the filler holds enough texts."""
    from qclm import probes
    from qclm.interventions.overlap import found_terms

    cal = section(config)
    where = f"field {SECTION}"
    out: list[Problem] = []
    try:
        filler = load_corpus(cal["filler"])
        load_corpus(cal["heldout_neutral"])
        load_corpus(cal["sham_statements"])
    except InputError as err:
        return err.problems
    instances = _instances(config)
    counts: dict[str, dict[str, int]] = {}
    for plant in plants(config).values():
        at = f"{where}.plants.{plant.name}"
        if plant.material == "recall" and not any("recall" in r.settings["tasks"] for r in _readers(plant, config)):
            out.append((cf, f"{at}.probes", f"none of {', '.join(plant.probes)} runs the recall task: material "
                        "recall plants the recall prompts, and a probe it names must read them (tasks)"))
            continue
        if plant.material == "instructions":
            csi = _readers(plant, config)[0]
            if csi.settings["mode"] != "single" or csi.n_wordings() < 2:
                out.append((cf, f"{at}.probes", f"material instructions plants the CSI's single-mode prompts in every "
                            f"wording but the last (held out): {plant.probes[0]} must ask in mode single with at "
                            f"least two wordings (it has mode {csi.settings['mode']}, {csi.n_wordings()} "
                            "wording(s))"))
                continue
        if plant.material in ("listing", "recall"):
            memorization = [instances[p] for p in plant.probes]
            listed = {str(Path(f)) for i in memorization for f in i.settings.get("instruments") or []}
            if str(Path(plant.settings["instrument"])) not in listed:
                out.append((cf, f"{at}.instrument", f"{plant.settings['instrument']} is not an instrument of "
                            f"{', '.join(plant.probes)}: the probe must score what is planted"))
                continue
        try:
            per_run = {run: planted_texts(plant, config, run) for run in runs(config)}
            heldout(plant, config, "plus"), heldout(plant, config, "minus")
        except InputError as err:
            out.extend(err.problems)
            continue
        if not per_run["plus"] or not per_run["minus"]:
            out.append((cf, at, "its material plants no text in one of its arms"))
            continue
        if plant.material == "statements":
            terms = {t for p in plant.probes for plus, minus in probes.probe(instances[p]).scored_terms().values()
                     for t in (*plus, *minus)}
            for key in ("statements", "opposite", "heldout", "opposite_heldout"):
                if not plant.settings.get(key):
                    continue
                for n, text in enumerate(load_corpus(plant.settings[key]).texts, start=1):
                    found = found_terms(str(text), sorted(terms))
                    if found:
                        out.append((plant.settings[key], f"text #{n}", f"holds the scored term(s) "
                                    f"{', '.join(repr(t) for t in found)} of {', '.join(plant.probes)}: a planted "
                                    "statement must carry the construct in other words, or the probe would read the "
                                    "exposure to its own terms"))
        counts[plant.name] = {run: len(t) for run, t in per_run.items()}
    for group, members in run_groups(config).items():
        if not all(p.name in counts for p in members):
            continue
        per_run = {run: sum(counts[p.name][run] for p in members) for run in runs(config)}
        most = max(per_run.values())
        at = group_location(where, group, members)
        if most > MAX_SHARE * cal["texts"]:
            repeats = ", ".join(str(p.repeats) for p in members)
            out.append((cf, at, f"{most} planted texts an epoch ({repeats} repeats), more than "
                        f"{MAX_SHARE:.0%} of calibration.texts ({cal['texts']}): lower repeats or raise texts"))
        elif len(filler.texts) < cal["texts"] - min(per_run.values()):
            out.append((cf, f"{where}.texts", f"{cal['texts']} texts per corpus, and the filler {cal['filler']} has "
                        f"{len(filler.texts)}: lower texts or give a larger filler"))
    return out


def corpus_job(config: dict, results: str | Path, name: str) -> Job:
    """The calibration job of an intervention name."""
    from qclm.calibration import jobs

    return jobs(config, results)[name]
