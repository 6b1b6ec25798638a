"""The config's problems of ``calibration:`` that the schema cannot say (re-exported by :mod:`qclm.calibration`):
read after the plants (:mod:`qclm.calibration.plants`) and with the materials' own checks
(:mod:`qclm.calibration.corpora`), so neither of those imports the other back."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

from qclm.calibration.corpora import material_problems
from qclm.calibration.plants import (
    PLANT_KEYS, PREFIX, SECTION, group_location, material_of, materials, run_groups, section,
)
from qclm.errors import Problem
from qclm.probes.calibration_material import REQUIRED


def problems(config: dict, cf: str, models: dict, found: list[Problem]) -> list[Problem]:
    """What the schema cannot say about ``calibration:``: each plant's probes exist and are of a kind its material
    plants, its material's keys (required ones given, none of another material), its material loads and fits the
    corpus, the filler and the held-out texts are there, the training settings are an intervention's, and no
    intervention of ``interventions:`` takes a calibration name. The materials' own checks are
    :func:`qclm.calibration.corpora.material_problems`."""
    from qclm import interventions, probes
    from qclm.inputs import document_problems

    if not isinstance(config.get(SECTION), dict) or any(loc.startswith(f"field {SECTION}") for _, loc, _ in found):
        return []
    out: list[Problem] = []
    cal = section(config)
    where = f"field {SECTION}"
    training = {k: v for k, v in cal["training"].items()}
    for f, loc, msg in interventions.entry_problems({**training, "corpus": "x"}, cf, f"{where}.training"):
        out.append((f, loc, msg))
    for key in ("corpus", "control", "checkpoints", "epochs"):
        if key in (config[SECTION].get("training") or {}):
            out.append((cf, f"{where}.training.{key}", "not a calibration setting: the calibration writes its own "
                        "corpora and shams, and checkpoints every run after the epochs of calibration.epochs"))
    for name in (config.get(interventions.SECTION) or {}):
        if str(name).startswith(f"{PREFIX}_"):
            out.append((cf, f"field {interventions.SECTION}.{name}", f"names starting with {PREFIX}_ are the "
                        "calibration's (its corpora and checkpoints): rename the intervention"))
    declared = {ident: kind for ident, kind, _, _ in probes.declared(config)}
    listed = materials(config)
    for name, entry in (config[SECTION].get("plants") or {}).items():
        at = f"{where}.plants.{name}"
        try:
            material, kinds = material_of(listed, entry["material"])
        except ValueError as err:
            out.append((cf, f"{at}.material", str(err)))
            continue
        for key in entry:
            if key not in PLANT_KEYS and key not in material.keys:
                out.append((cf, f"{at}.{key}", f"not a key of material {material.name} (its keys: "
                            f"{', '.join(material.keys) or 'none'})"))
        for key, default in material.keys.items():
            if default is REQUIRED and key not in entry:
                out.append((cf, f"{at}.{key}", f"missing: material {material.name} needs it"))
        own = {k: v for k, v in entry.items() if k in material.keys}
        schema = {"type": "object", "properties": dict(material.schema)}
        out.extend((f, loc.replace("field ", f"{at}.", 1), msg)
                   for f, loc, msg in document_problems(own, schema, cf, {}))
        for field in ("probes", "unrelated"):
            for n, ident in enumerate(entry.get(field) or ()):
                kind = declared.get(ident)
                if kind is None:
                    out.append((cf, f"{at}.{field}, entry {n + 1}", f"'{ident}' is not a probe instance of this "
                                f"config ({', '.join(declared) or 'none'})"))
                elif kind not in kinds:
                    out.append((cf, f"{at}.{field}, entry {n + 1}", f"'{ident}' is a {kind} probe; material "
                                f"{material.name} plants a signal for {' and '.join(kinds)} probes"))
                elif field == "unrelated" and ident in entry["probes"]:
                    out.append((cf, f"{at}.unrelated, entry {n + 1}", f"'{ident}' is one of the plant's own probes: "
                                "an unrelated instrument is one the plant must not move"))
    if out:
        return out
    names = list(models)
    for name, entry in (config[SECTION].get("plants") or {}).items():
        for n, pattern in enumerate(entry.get("models") or ()):
            if names and not any(fnmatchcase(model, pattern) for model in names):
                out.append((cf, f"{where}.plants.{name}.models, entry {n + 1}", f"'{pattern}' matches no row of the "
                            f"model table ({', '.join(names)}): the plant would be fine-tuned into no model"))
        files = [(key, str(entry[key])) for key in material_of(listed, entry["material"])[0].files if entry.get(key)]
        for i, (key, value) in enumerate(files):
            for other, same in files[:i]:
                if Path(value).expanduser().resolve() == Path(same).expanduser().resolve():
                    out.append((cf, f"{where}.plants.{name}.{key}", f"{value} is also its {other}: the arms (or a "
                                "held-out set and the texts it holds out) would be the same texts"))
    if out:
        return out
    for group, members in run_groups(config).items():
        given = {p.models for p in members}
        if len(given) > 1:
            out.append((cf, group_location(where, group, members), "plants that "
                        "share their runs are fine-tuned into the same models: give them the same models (or none)"))
    if out:
        return out
    for key in ("filler", "heldout_neutral", "sham_statements"):
        path = Path(cal[key]).expanduser()
        if not path.is_file():
            return [(cf, f"{where}.{key}", f"{cal[key]}: does not exist" if not path.exists()
                     else f"{cal[key]}: is a directory, not a corpus file")]
    for key in ("filler", "sham_statements"):
        if Path(cal[key]).expanduser().resolve() == Path(cal["heldout_neutral"]).expanduser().resolve():
            out.append((cf, f"{where}.heldout_neutral", f"{cal['heldout_neutral']} is also the {key}: the held-out "
                        "neutral texts (the cost of the fine-tuning) must be texts no run trains on"))
    if out:
        return out
    out.extend(material_problems(config, cf))
    return out
