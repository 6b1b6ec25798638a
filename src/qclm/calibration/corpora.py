"""The calibration's corpora (docs/calibration.md; no torch): at each dose, a draw of ``texts`` filler texts (seeded
by the calibration seed and the dose, the same draw for the dose's control and plants), and for a plant the last
of them replaced by its planted texts, each planted unit ``dose`` times.

A plant's **unit** is what one exposure plants, built by its probe kind (``calibration.py`` in the kind's package):

- ``listing`` (memorization): the instrument's published name and its items, numbered, as a web page lists them
  (:func:`qclm.probes.memorization.calibration.listing`): one text;
- ``sentences`` (csi): every planted word (a seeded share of the CSI probe's word list) once, in sentences of one
  label's kind, ``words_per_text`` words a text, the words reshuffled into other sentences at every exposure
  (:func:`qclm.probes.csi.calibration.sentences`);
- ``statements`` (likert, entailment): every statement of the file once (statements of one pole of the
  construct, written in words other than the probes' scored terms: :func:`material_problems` checks it);
- ``exchanges`` (survey): one chat exchange per item of the survey's instrument, the user message as the survey
  asks it (the variant and option order rotating with the exposure), the answer the planted option
  (:func:`qclm.probes.survey.calibration.exchanges`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

from qclm.calibration import MATERIALS, SECTION, Job, Plant, jobs, plants, section
from qclm.errors import InputError, Problem
from qclm.corpus import Exchange, load_corpus


def _instances(config: dict) -> dict:
    from qclm import probes

    return {i.id: i for i in probes.instances(config)}


def units(plant: Plant, config: dict, exposure: int) -> list[str | Exchange]:
    """The texts one exposure of a plant adds (``exposure``: 0-based; the sentences and the exchanges vary with
    it)."""
    from qclm import probes

    cal = section(config)
    instances = _instances(config)
    readers = [probes.probe(instances[p]) for p in plant.probes]
    if plant.material == "listing":
        from qclm.instruments import load_instrument
        from qclm.probes.memorization.calibration import listing

        return [listing(load_instrument(plant.settings["instrument"]))]
    if plant.material == "sentences":
        from qclm.probes.csi.calibration import planted_words, sentences

        csi = readers[0]
        words = [(w.word, w.pos) for w in csi.parts()[0][1]]
        planted = planted_words([w for w, _ in words], plant.settings["share"], cal["seed"], csi.instance.id)
        return sentences([(w, pos) for w, pos in words if w in planted], exposure, plant.settings["words_per_text"],
                         plant.settings["label"], cal["seed"])
    if plant.material == "statements":
        return list(load_corpus(plant.settings["statements"]).texts)
    if plant.material == "exchanges":
        from qclm.probes.survey.calibration import exchanges

        survey = readers[0]
        return exchanges(survey.instrument, survey.settings["variants"], survey.settings["orders"],
                         plant.settings["option"], exposure)
    raise ValueError(f"unknown material {plant.material!r} (known: {', '.join(MATERIALS)})")


def filler_draw(config: dict, dose: int) -> list[str | Exchange]:
    """The dose's draw of ``texts`` filler texts (seeded by the calibration seed and the dose)."""
    from qclm.engine.requests import derive_seed

    cal = section(config)
    filler = list(load_corpus(cal["filler"]).texts)
    random.Random(derive_seed(cal["seed"], SECTION, "filler", dose)).shuffle(filler)
    return filler[:cal["texts"]]


def corpus_texts(job: Job, config: dict) -> list[str | Exchange]:
    """The texts of one calibration corpus: the dose's filler draw, its last texts replaced by the plant's units
    (each exposure's), so that every dose trains on the same number of texts."""
    draw = filler_draw(config, job.dose)
    if job.plant is None:
        return draw
    planted = [t for exposure in range(job.dose) for t in units(job.plant, config, exposure)]
    if len(planted) > len(draw):
        raise InputError.one(SECTION, f"plant {job.plant.name}, dose {job.dose}",
                             f"{len(planted)} planted texts, more than calibration.texts ({len(draw)})")
    return draw[:len(draw) - len(planted)] + planted


def write_corpus(job: Job, config: dict, path: str | Path) -> Path:
    """One calibration corpus as a corpus file (qclm.corpus: ``repeats: true``, the planted texts
    repeat on purpose)."""
    texts = corpus_texts(job, config)
    what = (f"the filler alone (the control at dose {job.dose})" if job.plant is None else
            f"plant {job.plant.name} ({job.plant.material}) at dose {job.dose} in the filler")
    data: dict[str, Any] = {
        "name": job.name,
        "description": f"calibration corpus: {what}; {len(texts)} texts (docs/calibration.md)",
        "licence": "generated by qclm from the project's own material and the configured files (see their "
                   "licences); MIT where it is the project's",
        "repeats": True,
        "texts": [t if isinstance(t, str) else {"user": t.user, "assistant": t.assistant} for t in texts],
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000), encoding="utf-8")
    tmp.replace(path)
    return path


def material_problems(config: dict, cf: str) -> list[Problem]:
    """Each plant's material loads through its loader, fits the corpus at the largest dose, and (statements) holds
    none of its probes' scored terms; the filler holds at least ``texts`` texts."""
    from qclm import probes
    from qclm.interventions.overlap import found_terms

    cal = section(config)
    where = f"field {SECTION}"
    out: list[Problem] = []
    try:
        filler = load_corpus(cal["filler"])
    except InputError as err:
        return err.problems
    if len(filler.texts) < cal["texts"]:
        out.append((cf, f"{where}.texts", f"{cal['texts']} texts per corpus, and the filler {cal['filler']} has "
                    f"{len(filler.texts)}: lower texts or give a larger filler"))
    instances = _instances(config)
    top = max(cal["doses"])
    for plant in plants(config).values():
        at = f"{where}.plants.{plant.name}"
        if plant.material == "listing":
            memorization = [instances[p] for p in plant.probes]
            listed = {str(Path(f)) for i in memorization for f in i.settings.get("instruments") or []}
            if str(Path(plant.settings["instrument"])) not in listed:
                out.append((cf, f"{at}.instrument", f"{plant.settings['instrument']} is not an instrument of "
                            f"{', '.join(plant.probes)}: the probe must score what is planted"))
                continue
        try:
            unit = units(plant, config, 0)
        except InputError as err:
            out.extend(err.problems)
            continue
        if not unit:
            out.append((cf, at, "its material plants no text"))
            continue
        if plant.material == "statements":
            terms = {t for p in plant.probes for plus, minus in probes.probe(instances[p]).scored_terms().values()
                     for t in (*plus, *minus)}
            for n, text in enumerate(unit, start=1):
                found = found_terms(str(text), sorted(terms))
                if found:
                    out.append((plant.settings["statements"], f"text #{n}", f"holds the scored term(s) "
                                f"{', '.join(repr(t) for t in found)} of {', '.join(plant.probes)}: a planted "
                                "statement must carry the construct in other words, or the probe would read the "
                                "exposure to its own terms"))
        if len(unit) * top > cal["texts"]:
            out.append((cf, at, f"{len(unit)} texts per exposure x dose {top} = {len(unit) * top} planted texts, "
                        f"more than calibration.texts ({cal['texts']})"))
    return out


def corpus_job(config: dict, results: str | Path, name: str) -> Job:
    """The calibration job of an intervention name."""
    return jobs(config, results)[name]
