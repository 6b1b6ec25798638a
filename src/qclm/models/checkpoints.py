"""A fine-tuned checkpoint's provenance, as the model loader and the scoring job read it (the marker an
intervention's fine-tuning writes beside the weights: :mod:`qclm.interventions.finetune`). It lives with the models
so that loading a model needs nothing from the interventions above it."""

from __future__ import annotations

import json
import re
from pathlib import Path

#: each checkpoint's provenance (base model, corpus hash, training settings, losses), in its directory
CHECKPOINT_MARKER = "qclm_finetuned.json"

#: what determines a checkpoint's weights (its provenance without timings and versions): the scoring provenance
#: of a checkpoint names them, and its scoring cells' cache key includes them
CHECKPOINT_IDENTITY = ("base_model", "base_gguf_sha256", "intervention", "corpus", "settings", "method", "epoch")


def checkpoint_provenance(source: str | Path) -> dict | None:
    """What made a checkpoint (:data:`CHECKPOINT_IDENTITY` of its :data:`CHECKPOINT_MARKER`: base model, corpus
    hash, training settings), or None for a directory that is no checkpoint of an intervention."""
    marker = Path(source).expanduser() / CHECKPOINT_MARKER
    if not marker.is_file():
        return None
    found = json.loads(marker.read_text(encoding="utf-8"))
    return {k: found.get(k) for k in CHECKPOINT_IDENTITY}


#: a derived model's name (a checkpoint scored as a model of its own): the base model's, the intervention's, the
#: epoch
DERIVED = re.compile(r"^(?P<base>.+)@(?P<intervention>[A-Za-z0-9][A-Za-z0-9_]*)-e(?P<epoch>[0-9]+)$")


def derived_name(model: str, intervention: str, epoch: int) -> str:
    return f"{model}@{intervention}-e{epoch}"


def parse_derived(name: str) -> tuple[str, str, int] | None:
    """(base model, intervention, epoch) of a derived model's name, or None for a model of the table."""
    match = DERIVED.match(name)
    return (match["base"], match["intervention"], int(match["epoch"])) if match else None


def base_of(model: str) -> str:
    """A checkpoint's base model (a model of the table is its own)."""
    parsed = parse_derived(str(model))
    return parsed[0] if parsed else str(model)


def without_derived(frame):
    """A table's rows of the model table's own models (derived models' rows dropped), and the names dropped: the
    across-model analyses count models, and a checkpoint is not another model (the intervention analysis reads
    the checkpoints beside their base model). A checkpoint whose base model is not in the table (``qclm probe
    --model DIR`` on a checkpoint alone) stays: it is the one model there is to analyse."""
    if frame is None or "model" not in frame:
        return frame, []
    names = set(frame["model"].astype(str).unique())
    derived = sorted(m for m in names if (parsed := parse_derived(m)) and parsed[0] in names)
    return (frame[~frame["model"].isin(derived)] if derived else frame), derived
