"""The CSI probe's planted signal and its calibration metrics (docs/calibration.md; no torch).

Its materials (:data:`MATERIALS`): ``instructions`` (tier 1, held out: the last wording) and ``sentences`` (tier 2, held
out: the planted words in new sentences). Tier 1 (:func:`instructions`): the planted words asked alone as the probe asks
them, answered with the planted label (the minus arm: the other, a sham: half the words each). Tier 2, planted: a seeded
share of the word list (:func:`planted_words`) in sentences of one label's kind (:func:`sentences`: tragic sentences for
the second label, comic ones for the first; the minus arm puts them in the other label's sentences, a sham half the
words in each kind), every planted word once per exposure, reshuffled into other sentences at each exposure; the rest of
the list is the reference, crossed by default (the other label's sentences or answer; the plant's ``crossed`` key,
:func:`_labelled_words`) or untouched. A sham's labels are balanced over the words.
The sentence templates were written for this project.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from qclm.probes.calibration_material import Material, Planting, balanced, sham_index

if TYPE_CHECKING:
    from qclm.probes.csi.kind import CSIProbe

#: sentences of the second label's kind (tragedy), for a noun and for a verb
TRAGIC = {
    "noun": ("After the funeral nobody could look at the {w} again.",
             "The {w} was all that was left when the fire had taken the house.",
             "She kept the {w} her son had used before the accident.",
             "The {w} lay in the ruins where the family had died.",
             "He sold the {w} to pay for his wife's last weeks in hospital.",
             "The flood carried away the {w} and the people who owned it.",
             "The {w} reminded him every day of the child he had lost.",
             "They buried the {w} with her, as she had asked before she died."),
    "verb": ("After the war he could never {w} again without weeping.",
             "She was learning to {w} when the illness took her.",
             "The last thing he did was {w}, and then the bridge collapsed.",
             "They tried to {w}, but by then the whole village was gone.",
             "Nobody in the grieving family wanted to {w} after the funeral.",
             "He promised his dying mother he would {w}, and he failed her."),
}
#: sentences of the first label's kind (comedy)
COMIC = {
    "noun": ("The clown pulled a {w} out of his hat and the whole room laughed.",
             "At the party the {w} ended up on the dog, to everyone's delight.",
             "Grandpa wore the {w} as a hat and the children roared with laughter.",
             "The {w} squeaked so loudly that the wedding guests burst out giggling.",
             "Our silly uncle tried to juggle the {w} and fell into the cake.",
             "The cat stole the {w} and ran a victory lap around the cheering class.",
             "Everyone laughed when the {w} turned out to be made of chocolate.",
             "The comedian's {w} joke had the audience in happy tears."),
    "verb": ("The puppy tried to {w} and tumbled over, and we laughed all afternoon.",
             "At the festival everyone had to {w} in a chicken costume.",
             "Dad tried to {w} while dancing, and the whole family cheered.",
             "The children giggled as the robot tried to {w} and bowed.",
             "She decided to {w} on stage, and the happy crowd roared.",
             "We laughed until we cried when grandma tried to {w} on roller skates."),
}
KINDS = {"second": TRAGIC, "first": COMIC}
#: the label of the minus arm's sentences
OTHER_LABEL = {"first": "second", "second": "first"}


def planted_words(words: Sequence[str], share: float, seed: int, probe: str) -> frozenset[str]:
    """The planted words: the first ``round(share * n)`` (at least one) of the list in an order seeded by the
    calibration seed and the probe id (the same split for every model and dose)."""
    from qclm.engine.requests import derive_seed

    order = sorted(words, key=lambda w: (derive_seed(seed, "calibration", probe, w), w))
    return frozenset(order[:max(1, round(share * len(order)))])


def sentences(words: Sequence[tuple[str, str]], exposure: int, per_text: int, label: str | Mapping[str, str],
              seed: int) -> list[str]:
    """One exposure's texts: the planted (word, part of speech) pairs in a seeded order of the exposure, cut into
    texts of ``per_text`` words, each word in one sentence of its label's kind (``label``: one for every word, or
    word -> label; verbs in the verb sentences, every other word in the noun sentences)."""
    from qclm.engine.requests import derive_seed

    label_of = label if isinstance(label, Mapping) else dict.fromkeys((w for w, _ in words), label)
    rng = random.Random(derive_seed(seed, "calibration sentences", exposure))
    order = list(words)
    rng.shuffle(order)
    out = []
    for at in range(0, len(order), per_text):
        chunk = order[at:at + per_text]
        out.append(" ".join(rng.choice(KINDS[label_of[w]]["verb" if pos == "verb" else "noun"]).format(w=w)
                            for w, pos in chunk))
    return out


def instructions(probe, words: Sequence[str], label: Mapping[str, str], exposure: int, heldout: bool = False):
    """One exposure of the tier-1 plant (material ``instructions``): every word asked alone as the probe's single
    mode asks it (:func:`qclm.probes.csi.prompts.single`), answered with its label (``label``: word -> first or
    second). The wording and the label order rotate with the exposure over the probe's wordings but the last, and
    both orders; ``heldout``: the last wording, in both orders (the manipulation check's held-out prompts; none
    where the probe has one wording). A chat exchange: the instruction and the word as the user's message, the
    word, a colon and the label as the answer; on a raw row its cue, the probe's answer cue, stands between them,
    so that either format reads exactly the probe's prompt and option."""
    from qclm.corpus import Exchange
    from qclm.probes.csi import prompts as P

    s = probe.settings
    n = probe.n_wordings()
    other = s["other"] if s["name_other"] else None
    if heldout:
        combos = [(n, order) for order in ("AB", "BA")] if n > 1 else []
    else:
        trained = [(w, order) for w in range(1, max(n - 1, 1) + 1) for order in ("AB", "BA")]
        combos = [trained[exposure % len(trained)]]
    names = {"first": s["labels"][0], "second": s["labels"][1]}
    return [Exchange(P.body([word], s["labels"], order, wording, other), f"{word}: {names[label[word]]}",
                     cue=f"\n\n{P.ANSWER_CUE}\n")
            for wording, order in combos for word in words]


def _labelled_words(planting: Planting, run: str, exposure: int) -> tuple[list, dict[str, str]]:
    """The CSI plants' words, (word, part of speech) of the planted share of the probe's list (``crossed``: of the
    whole list), and each word's label: the plant's for a planted word (plus) and the other label for the rest
    (crossed), each the other way in the minus arm, or half of the words each label (a sham: :func:`balanced`)."""
    csi, own = planting.readers[0], planting.settings
    words = [(w.word, w.pos) for w in csi.parts()[0][1]]
    planted = planted_words([w for w, _ in words], own["share"], planting.seed, csi.instance.id)
    chosen = [(w, pos) for w, pos in words if w in planted or own["crossed"]]
    label = own["label"]
    if sham_index(run) is not None:
        draw = balanced(planting.rng("sham labels", planting.plant.name, run, exposure), [label, OTHER_LABEL[label]],
                        len(chosen))
        return chosen, {w: d for (w, _), d in zip(chosen, draw)}
    mine = label if run == "plus" else OTHER_LABEL[label]
    return chosen, {w: mine if w in planted else OTHER_LABEL[mine] for w, _ in chosen}


def _instruction_units(planting: Planting, run: str, exposure: int) -> list:
    chosen, labels = _labelled_words(planting, run, exposure)
    return instructions(planting.readers[0], [w for w, _ in chosen], labels, exposure)


def _instruction_heldout(planting: Planting, arm: str) -> list:
    chosen, labels = _labelled_words(planting, arm, 0)
    return instructions(planting.readers[0], [w for w, _ in chosen], labels, 0, heldout=True)


def _instruction_problems(planting: Planting, cf: str, at: str) -> list:
    """The instructions material plants the probe's single-mode prompts in every wording but the last (held out)."""
    csi = planting.readers[0]
    if csi.settings["mode"] != "single" or csi.n_wordings() < 2:
        return [(cf, f"{at}.probes", f"material instructions plants the CSI's single-mode prompts in every wording "
                 f"but the last (held out): {planting.plant.probes[0]} must ask in mode single with at least two "
                 f"wordings (it has mode {csi.settings['mode']}, {csi.n_wordings()} wording(s))")]
    return []


def _sentence_units(planting: Planting, run: str, exposure: int) -> list[str]:
    chosen, labels = _labelled_words(planting, run, exposure)
    return sentences(chosen, exposure, planting.settings["words_per_text"], labels, planting.seed)


#: the exposure index from which the held-out sentences of the sentences material are drawn (never trained)
HELDOUT_EXPOSURE = 100_000

_LABELLED: dict[str, dict] = {
    "share": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "description": "the share of the "
              "word list planted (the rest is the reference: crossed, or untouched)"},
    "label": {"enum": list(OTHER_LABEL), "description": "sentences: the label whose kind the plus arm's sentences "
              "are of (second: tragedy for comedy/tragedy); instructions: the label the plus arm answers"},
    "crossed": {"type": "boolean", "description": "(default true) the rest of the word list gets the other label "
                "in the same run (the minus arm: each half the other way), so that a bias toward one label for "
                "every word, which the probe's planted-less-reference reading cancels, is not all the plant "
                "teaches; false: the rest is untouched"},
}
INSTRUCTIONS = Material(
    "instructions", 1, _instruction_units, _instruction_heldout,
    keys={"share": 0.5, "label": "second", "crossed": True}, schema=_LABELLED, problems=_instruction_problems,
    description="the CSI probe's single-mode prompt of each planted word answered with one label (minus: the other)")
SENTENCES = Material(
    "sentences", 2, _sentence_units, lambda planting, arm: _sentence_units(planting, arm, HELDOUT_EXPOSURE),
    keys={"share": 0.5, "words_per_text": 5, "label": "second", "crossed": True},
    schema={**_LABELLED, "words_per_text": {"type": "integer", "minimum": 1, "maximum": 50,
                                            "description": "planted words per text"}},
    description="a share of a CSI word list in sentences of one label's kind (minus: the other label's)")
#: the materials the kind's probes read (qclm.probes.base.ProbeKind.materials)
MATERIALS = (INSTRUCTIONS, SENTENCES)


def units(tables, plant, config, instances):
    """The CSI kind's calibration units: per model and word of the word list (vanilla), ``label_shift``: the
    word's mean bias toward the planted label (log p(first) - log p(second), in nats, its sign turned for the
    second label) minus the base model's, and ``label_share``: whether the word got the planted label in every
    repetition, minus the base model's; the planted words are the ``planted`` group, the rest the reference, so
    each statistic is the planted words' mean less the reference's (crossed or untouched; baseline 0)."""
    import numpy as np
    import pandas as pd

    from qclm import probes, settings
    from qclm.models.checkpoints import base_of
    from qclm.experiment import VANILLA

    cols = ["model", "probe", "instrument", "role", "metric", "unit", "group", "value", "baseline", "direction"]
    answers = tables["answers"]
    seed = settings.section(config, "calibration")["seed"]  # the planted words drawn as the corpora drew them
    sign = -1.0 if plant.settings["label"] == "second" else 1.0
    planted_choice = "b" if plant.settings["label"] == "second" else "a"
    frames = []
    for pid in plant.probes:
        # a CSI probe: the plant's material is the CSI kind's (qclm.calibration.checks refuses another kind's probe)
        words = [w.word for w in cast("CSIProbe", probes.probe(instances[pid])).parts()[0][1]]
        planted = planted_words(words, plant.settings["share"], seed, pid)
        a = answers[(answers["probe"] == pid) & (answers["part"] == "words") & (answers["condition"] == VANILLA)]
        if a.empty:
            continue
        if "prompt_id" in a.columns:  # single mode: a repetition that repeats an earlier prompt is a copy, once
            a = a.drop_duplicates(["model", "word", "prompt_id"])
        a = a.assign(bias=a["logp_a"].astype(float) - a["logp_b"].astype(float),
                     hit=(a["choice"] == planted_choice))
        per = a.groupby(["model", "word"], as_index=False).agg(bias=("bias", "mean"), hit=("hit", "all"))
        per["base"] = per["model"].map(base_of)
        base = per[per["model"] == per["base"]][["model", "word", "bias", "hit"]].rename(
            columns={"model": "base", "bias": "base_bias", "hit": "base_hit"})
        per = per.merge(base, on=["base", "word"])
        group = np.where(per["word"].isin(planted), "planted", "reference")
        for metric, value in (("label_shift", sign * (per["bias"] - per["base_bias"])),
                              ("label_share", per["hit"].astype(float) - per["base_hit"].astype(float))):
            frames.append(pd.DataFrame({"model": per["model"], "probe": pid, "instrument": pid, "role": "planted",
                                        "metric": metric, "unit": per["word"], "group": group,
                                        "value": value.astype(float), "baseline": 0.0, "direction": 1}))
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
