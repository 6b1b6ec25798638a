"""What a calibration material is (docs/calibration.md, "A material of your own"; no torch): how a plant's texts are
built, declared by the probe kinds that read it, so that :mod:`qclm.calibration` and the config schema name no kind.
It lives with the probes (as :mod:`qclm.probes.calibration_units` does) because the kinds declare it; the calibration
above them builds the corpora from it.

A probe kind lists the materials its probes read in :attr:`qclm.probes.base.ProbeKind.materials` ("module:NAME" of
a tuple of :class:`Material`); a material listed by several kinds (:data:`STATEMENTS`, the transfer plant of every
kind whose items carry a construct's poles) is read by each of them. A material gives:

- ``units(planting, run, exposure)``: the texts one exposure of a run adds (``run``: ``plus``, ``minus`` or
  ``shamI``; a text is a string or a :class:`qclm.corpus.Exchange`, trained on its answer);
- ``heldout(planting, arm)``: texts of the same material that no run trains on (the manipulation check's held-out
  set; none: the material has none);
- ``keys``: its own keys of a plant entry with their defaults (:data:`REQUIRED`: the plant must give it), ``schema``
  the JSON Schema of each (checked as the config's schema checks the rest), ``files`` those of them that name files
  (the corpus rule's inputs);
- ``problems(planting, cf, at)``: what its keys and probes must satisfy beyond the schema (the probes it plants
  for ask the task it trains...);
- ``tier`` (1: the probe's own format, whether the readout can see; 2: a transfer, whether the model generalizes)
  and ``chat_only`` (chat exchanges: fine-tuned into chat-format rows only).

:class:`Planting` is what a material's functions are given: the plant, the config, the probes that read it, and the
seeded draws every material shares (a sham's balanced answers, the per-item stances of the two poles, neutral
statements).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from qclm.errors import InputError, Problem
from qclm.probes.base import FILE_SETTING

if TYPE_CHECKING:
    from qclm.corpus import Exchange

#: a material key without a default that the plant must give
REQUIRED = object()
#: the two opposite arms of every plant (plus: the direction the probe's metric is read in)
ARMS = ("plus", "minus")
#: the shams' name in a run's name (``sham0``, ``sham1``...)
SHAM = "sham"


def sham_index(run: str) -> int | None:
    """The sham's index of a run's name (``sham2``: 2), None for an arm."""
    return int(run[len(SHAM):]) if run.startswith(SHAM) else None


@dataclass(frozen=True)
class Material:
    """One calibration material (module docstring)."""

    name: str
    tier: int
    units: Callable[[Planting, str, int], list]
    heldout: Callable[[Planting, str], list] | None = None
    keys: Mapping[str, Any] = field(default_factory=dict)
    schema: Mapping[str, dict] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    problems: Callable[[Planting, str, str], list[Problem]] | None = None
    chat_only: bool = False
    description: str = ""


def seeded(seed: int, namespace: str, *parts) -> random.Random:
    """The generator of one draw of the calibration: seeded by its seed, its namespace and ``parts`` (the plant, the
    run, the exposure...), the same on every machine."""
    from qclm.engine.requests import derive_seed

    return random.Random(derive_seed(seed, namespace, *parts))


def balanced(rng: random.Random, options: Sequence, n: int) -> list:
    """A sham's draw of ``n`` answers among ``options``, each as often as the others (within one), in a seeded
    order: a draw of each answer alone gives a sham, by chance, more of one answer than of its opposite, which it
    then learns to prefer, and widens the shams' spread on what the arms are read by."""
    out = [options[i % len(options)] for i in range(n)]
    rng.shuffle(out)
    return out


@dataclass
class Planting:
    """A plant in its config, as its material's functions see it (made by :meth:`qclm.calibration.Plant.planting`:
    ``section`` the calibration section with its defaults, ``namespace`` the name its seeds are derived under)."""

    plant: Any  # qclm.calibration.Plant
    config: dict
    section: dict
    namespace: str

    @property
    def settings(self) -> dict:
        """The plant's material keys (defaults filled in)."""
        return self.plant.settings

    @property
    def seed(self) -> int:
        return int(self.section["seed"])

    @property
    def limit_items(self) -> int | None:
        """The items a run scores of each instrument (the config's ``limit_items``; None: all)."""
        return self.config.get("limit_items") or None

    @cached_property
    def readers(self) -> list:
        """The probes (:func:`qclm.probes.probe`) of the instances the plant names, in its order."""
        from qclm import probes

        instances = {i.id: i for i in probes.instances(self.config)}
        return [probes.probe(instances[p]) for p in self.plant.probes]

    def rng(self, *parts) -> random.Random:
        """A generator seeded by the calibration seed and ``parts`` (:func:`seeded`)."""
        return seeded(self.seed, self.namespace, *parts)

    def stances(self, run: str, exposure: int, instrument: str, items: Sequence, one_high: bool = False) -> list:
        """Per item, (S+ or S- construct term, the level it is answered with: high or not, turn) at one exposure,
        once per polarity (the terms rotating with the exposure): the plus arm answers the S+ term high and the S-
        term low, the minus arm the reverse, a sham half of each polarity's items high (:func:`balanced`);
        ``one_high``: a sham too answers one of an item's two terms high, the polarity drawn per item, half of the
        items each (as an arm)."""
        name = self.plant.name
        if one_high:
            lead = balanced(self.rng("answers", name, run, exposure, instrument), "+-", len(items))
            draws = {polarity: [lead[at] == polarity for at in range(len(items))] for polarity in "+-"}
        else:
            draws = {polarity: balanced(self.rng("answers", name, run, exposure, instrument, polarity),
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

    def sham_statements(self, run: str, n: int) -> list[str | Exchange]:
        """``n`` neutral statements of the section's ``sham_statements``, a seeded draw per run (a corpus's texts:
        statements, or chat exchanges where the file gives them)."""
        from qclm.corpus import load_corpus

        path = self.section["sham_statements"]
        pool = list(load_corpus(path).texts)
        if n > len(pool):
            raise InputError.one(path, "texts", f"{len(pool)} statements, and a sham of plant {self.plant.name} "
                                 f"needs {n}")
        return self.rng("sham statements", self.plant.name, run).sample(pool, n)


# -- the material every kind whose items carry a construct's poles may list ---------------------------------------

def _statement_units(planting: Planting, run: str, exposure: int) -> list[str | Exchange]:
    from qclm.corpus import load_corpus

    plus = list(load_corpus(planting.settings["statements"]).texts)
    if sham_index(run) is not None:
        return list(planting.sham_statements(run, len(plus)))
    return plus if run == "plus" else list(load_corpus(planting.settings["opposite"]).texts)


def _statement_heldout(planting: Planting, arm: str) -> list[str | Exchange]:
    from qclm.corpus import load_corpus

    key = "heldout" if arm == "plus" else "opposite_heldout"
    return list(load_corpus(planting.settings[key]).texts) if planting.settings.get(key) else []


def _statement_problems(planting: Planting, cf: str, at: str) -> list[Problem]:
    """No statement holds a term its probes score: a planted statement carries the construct in other words, or
    the probe would read the exposure to its own terms."""
    from qclm.corpus import found_terms, load_corpus

    terms = {t for probe in planting.readers for plus, minus in probe.scored_terms().values() for t in (*plus, *minus)}
    out: list[Problem] = []
    for key in ("statements", "opposite", "heldout", "opposite_heldout"):
        if not planting.settings.get(key):
            continue
        for n, text in enumerate(load_corpus(planting.settings[key]).texts, start=1):
            found = found_terms(str(text), sorted(terms))
            if found:
                out.append((planting.settings[key], f"text #{n}", f"holds the scored term(s) "
                            f"{', '.join(repr(t) for t in found)} of {', '.join(planting.plant.probes)}: a planted "
                            "statement must carry the construct in other words, or the probe would read the "
                            "exposure to its own terms"))
    return out


#: tier 2: statements of one pole of the construct (plus), of the other pole (``opposite``, minus), as many neutral
#: statements drawn from ``sham_statements`` (a sham)
STATEMENTS = Material(
    "statements", 2, _statement_units, _statement_heldout,
    keys={"statements": REQUIRED, "opposite": REQUIRED, "pole": "plus", "heldout": "", "opposite_heldout": ""},
    schema={
        "statements": {**FILE_SETTING, "description": "a corpus file of statements of one pole of the probes' "
                       "construct, in words other than their scored terms (the plus arm)"},
        "opposite": {**FILE_SETTING, "description": "the statements of the other pole (the minus arm)"},
        "pole": {"enum": ["plus", "minus"], "description": "the pole the plus arm's statements take (plus: the S+ "
                 "terms' side, which raises the score)"},
        "heldout": {**FILE_SETTING, "description": "statements of the plus arm's pole that no run trains on (the "
                    "manipulation check's held-out texts)"},
        "opposite_heldout": {**FILE_SETTING, "description": "held-out statements of the minus arm's pole"},
    },
    files=("statements", "opposite", "heldout", "opposite_heldout"),
    problems=_statement_problems,
    description="statements of one pole of the construct (minus: of the other pole)",
)
