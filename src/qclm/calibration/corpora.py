"""The calibration's corpora and the manipulation check's text sets (docs/calibration.md; no torch).

Every run of a plant (its two arms and its shams) trains on one corpus: a draw of the filler (seeded by the
calibration seed and the plant, the same draw for every run of the plant) with the run's planted texts mixed in,
each exposure's texts ``repeats`` times, so that every corpus has ``texts`` texts. What one exposure plants, per run
(the plus arm, the minus arm, or sham ``i``: the same structure, neutral content or a direction drawn at random with
the sham's seed), is the plant's material's (:class:`qclm.probes.calibration_material.Material`, declared by the
probe kinds that read it: ``prompts`` by the Likert kind, ``pairs`` by entailment, ``exchanges`` by the survey,
``recall`` and ``listing`` by memorization, ``instructions`` and ``sentences`` by the CSI, the shared ``statements``
by Likert and entailment; each kind's ``calibration`` module says what they plant).

The manipulation check's sets (:func:`check_sets`, the same for every run of a plant): ``planted_plus`` and
``planted_minus`` (the arms' planted texts as trained), ``heldout_plus`` and ``heldout_minus`` (the material's
texts that no run trains on: the held-out statements, the listing in reversed order, the recalled items as a
listing, the planted words in new sentences or asked in the wording no run trains, the prompts in the
questionnaire's other wording, the pairs in the other form; empty where the material has none) and ``neutral``
(``heldout_neutral``: the cost).
"""

from __future__ import annotations

import random
from pathlib import Path

import yaml

from qclm.calibration.plants import (
    ARMS, MAX_SHARE, SECTION, Job, Plant, group_location, material_run, plants, run_groups, runs, section,
)
from qclm.corpus import Exchange, load_corpus
from qclm.probes.calibration_material import seeded
from qclm.errors import InputError, Problem

#: the manipulation check's sets, in the order the check table lists them
CHECK_SETS = ("planted_plus", "planted_minus", "heldout_plus", "heldout_minus", "neutral")
#: between a plant's name and its set's in a run's check file (``PLANT/planted_plus``)
SET_SEP = "/"


def _rng(config: dict, *parts) -> random.Random:
    return seeded(section(config)["seed"], SECTION, *parts)


def units(plant: Plant, config: dict, run: str, exposure: int) -> list[str | Exchange]:
    """The texts one exposure of a plant's run adds (``run``: plus, minus or ``shamI``; ``exposure``: 0-based; the
    sentences, the exchanges and the prompts' intensifiers vary with it): its material's."""
    return plant.declared.units(plant.planting(config), run, exposure)


def planted_texts(plant: Plant, config: dict, run: str) -> list[str | Exchange]:
    """Every planted text of one epoch of a run: each exposure's units, the plant's ``repeats`` exposures."""
    return [t for exposure in range(plant.repeats) for t in units(plant, config, run, exposure)]


def heldout(plant: Plant, config: dict, arm: str) -> list[str | Exchange]:
    """Texts of the same material as an arm's that no run trains on (the manipulation check's held-out set;
    empty where the material has none)."""
    own = plant.declared.heldout
    return list(own(plant.planting(config), arm)) if own else []


def check_sets(plant: Plant, config: dict) -> dict[str, list[str | Exchange]]:
    """The manipulation check's text sets of a plant (module docstring), each text once, a planted or held-out set
    of more than ``check_texts`` texts a seeded draw of them (in their order). The arms' sets of a kind are drawn
    at the same places where they are as long: an answer plant's arms answer the same prompts in the same order, so
    the draw keeps them paired and the arms' preference (:func:`qclm.calibration.analysis.check_table`) compares
    two answers to one prompt, not two prompts. Paired, only the places where the arms' texts differ are drawn
    (the entailment AND answers a bottom-level pair False in both arms): a text both arms train on tells neither
    arm's own from the other's, and drawn among the rest it takes a place of one that does."""
    cal = section(config)
    most = int(cal["check_texts"])

    def drawn(kind: str, arms: dict[str, list]) -> dict[str, list]:
        arms = {arm: list(dict.fromkeys(texts)) for arm, texts in arms.items()}
        paired = len({len(texts) for texts in arms.values()}) == 1
        places: list[int] = list(range(len(next(iter(arms.values())))))
        if paired:
            places = [i for i in places if len({texts[i] for texts in arms.values()}) > 1] or places
        out = {}
        for arm, texts in arms.items():
            where = places if paired else list(range(len(texts)))
            if len(where) <= most:
                keep = set(where)
            else:
                seed = (kind,) if paired else (f"{kind}_{arm}",)
                keep = set(_rng(config, "check", plant.name, *seed).sample(where, most))
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
    return [t for plant in job.plants for t in planted_texts(plant, config, job.texts_of)]


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
    if job.texts_of != job.run:
        what += f" (the texts of arm {job.texts_of}, in a training order of its own)"
    return _write(path, {"name": job.name, "description": f"calibration corpus: {what}; {len(texts)} texts "
                         "(docs/calibration.md)", "licence": LICENCE, "repeats": True, "texts": _as_data(texts)})


def measures_base(job: Job) -> bool:
    """Whether a run measures the check on the base model before its first step: one run of a group does (the
    plus arm; every run of the group starts from the same weights and reads the same sets, so the others would
    repeat it)."""
    return job.run == ARMS[0]


def _check_data(job: Job, config: dict) -> dict[str, list]:
    """A run's check sets as its check file holds them (``PLANT/SET`` -> texts)."""
    return {f"{plant.name}{SET_SEP}{name}": _as_data(texts) for plant in job.plants
            for name, texts in check_sets(plant, config).items()}


def write_check(job: Job, config: dict, path: str | Path) -> Path:
    """The manipulation check's text sets of a run (:func:`check_sets`; read by :func:`load_check`), and whether
    the run measures them on the base model too (:func:`measures_base`)."""
    return _write(path, {"name": f"{job.name} check", "licence": LICENCE, "base": measures_base(job),
                         "sets": _check_data(job, config)})


def record(job: Job, config: dict) -> dict:
    """What one run trains and checks on, as :func:`read_record` reads it back from its files: the corpus's texts,
    the check's sets and whether it measures the base model (the calibration's provenance digests it:
    :mod:`qclm.calibration.provenance`)."""
    return {"texts": _as_data(corpus_texts(job, config)), "sets": _check_data(job, config),
            "base": measures_base(job)}


def read_record(corpus: str | Path, check: str | Path) -> dict:
    """:func:`record` of a run from the corpus and check files it was fine-tuned on."""
    texts = yaml.safe_load(Path(corpus).read_text(encoding="utf-8"))["texts"]
    data = yaml.safe_load(Path(check).read_text(encoding="utf-8"))
    return {"texts": texts, "sets": data["sets"], "base": bool(data.get("base", True))}


def load_check(path: str | Path) -> tuple[dict[str, list[str | Exchange]], bool]:
    """The text sets of a check file written by :func:`write_check`, and whether the run measures the base model."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return ({name: [t if isinstance(t, str) else Exchange(t["user"], t["assistant"], t.get("cue", Exchange.cue))
                    for t in texts]
             for name, texts in data["sets"].items()}, bool(data.get("base", True)))


def material_problems(config: dict, cf: str) -> list[Problem]:
    """Each plant's material's own checks (:attr:`qclm.probes.calibration_material.Material.problems`), its texts load
    and fit the corpus (at most :data:`MAX_SHARE` of it); the filler holds enough texts."""
    cal = section(config)
    where = f"field {SECTION}"
    out: list[Problem] = []
    try:
        filler = load_corpus(cal["filler"])
        load_corpus(cal["heldout_neutral"])
        load_corpus(cal["sham_statements"])
    except InputError as err:
        return err.problems
    trained = {str(t) for t in filler.texts} | {str(t) for t in load_corpus(cal["sham_statements"]).texts}
    for n, text in enumerate(load_corpus(cal["heldout_neutral"]).texts, start=1):
        if str(text) in trained:
            out.append((cal["heldout_neutral"], f"text #{n}", "is also a text of the filler or the sham statements: "
                        "the held-out neutral texts (the cost of the fine-tuning) must be texts no run trains on"))
            break
    counts: dict[str, dict[str, int]] = {}
    for plant in plants(config).values():
        at = f"{where}.plants.{plant.name}"
        own = plant.declared.problems(plant.planting(config), cf, at) if plant.declared.problems else []
        if own:
            out.extend(own)
            continue
        try:
            per_run = {run: planted_texts(plant, config, run)
                       for run in dict.fromkeys(material_run(r) for r in runs(config))}
            held = {arm: heldout(plant, config, arm) for arm in ARMS}
        except InputError as err:
            out.extend(err.problems)
            continue
        taught = {str(t): run for run in ARMS for t in per_run[run]}
        for arm, texts in held.items():
            leaked = next((str(t) for t in texts if str(t) in taught), None)
            if leaked is not None:
                out.append((cf, at, f"a held-out text of the {arm} arm is a planted text of the {taught[leaked]} "
                            f"arm ({leaked[:80]!r}): the manipulation check's held-out sets must hold texts no run "
                            "trains on"))
        if not per_run["plus"] or not per_run["minus"]:
            out.append((cf, at, "its material plants no text in one of its arms"))
            continue
        counts[plant.name] = {run: len(t) for run, t in per_run.items()}
    for group, members in run_groups(config).items():
        if not all(p.name in counts for p in members):
            continue
        totals = {run: sum(counts[p.name][run] for p in members) for run in counts[members[0].name]}
        most = max(totals.values())
        at = group_location(where, group, members)
        if most > MAX_SHARE * cal["texts"]:
            repeats = ", ".join(str(p.repeats) for p in members)
            out.append((cf, at, f"{most} planted texts an epoch ({repeats} repeats), more than "
                        f"{MAX_SHARE:.0%} of calibration.texts ({cal['texts']}): lower repeats or raise texts"))
        elif len(filler.texts) < cal["texts"] - min(totals.values()):
            out.append((cf, f"{where}.texts", f"{cal['texts']} texts per corpus, and the filler {cal['filler']} has "
                        f"{len(filler.texts)}: lower texts or give a larger filler"))
    return out


def corpus_job(config: dict, results: str | Path, name: str) -> Job:
    """The calibration job of an intervention name."""
    from qclm.calibration.plants import jobs

    return jobs(config, results)[name]
