"""A fine-tuned checkpoint's provenance, as the model loader and the scoring job read it (the marker an
intervention's fine-tuning writes beside the weights: :mod:`qclm.interventions.finetune`). It lives with the models
so that loading a model needs nothing from the interventions above it."""

from __future__ import annotations

import json
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
