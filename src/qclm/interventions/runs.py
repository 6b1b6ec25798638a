"""The config's interventions (:class:`Intervention`: an entry of ``interventions:`` with its schema defaults),
the runs they make (the derived models, one per checkpoint: :func:`derived_models`), which models they can take
(:func:`model_problems`, :func:`method_for`) and where their checkpoints go (:func:`job_dir`). Light (no torch): the
workflow builds its DAG from it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qclm import settings
from qclm.models.checkpoints import derived_name
from qclm.models.table import ModelSpec

#: the config section
SECTION = "interventions"
#: what one fine-tuning job writes beside its checkpoints: every checkpoint and its provenance
JOB_MARKER = "qclm_intervention.json"
#: the manipulation check's NLLs a fine-tuning job writes before its marker, where it is given text sets (the
#: calibration's runs: docs/calibration.md)
CHECK_FILE = "check.json"


def _schema() -> dict:
    return settings.config_schema()["properties"][SECTION]["additionalProperties"]


#: fine-tuning methods (``method``); ``auto`` is full fine-tuning up to ``full_max_b`` billion parameters, LoRA above
METHODS = tuple(_schema()["properties"]["method"]["enum"])
#: what the loss is taken over (``loss``): every token, or a chat exchange's answer alone
LOSSES = tuple(_schema()["properties"]["loss"]["enum"])


def defaults() -> dict[str, Any]:
    """The schema's defaults of an intervention's settings (the one home of them)."""
    return settings.defaults_of(_schema())


@dataclass(frozen=True)
class Intervention:
    """One entry of ``interventions:`` with the defaults filled in."""

    name: str
    settings: dict

    @property
    def corpus(self) -> str:
        return self.settings["corpus"]

    @property
    def control(self) -> bool:
        return bool(self.settings.get("control"))

    @property
    def epochs(self) -> int:
        return int(self.settings["epochs"])

    @property
    def checkpoints(self) -> list[int]:
        """The epochs after which a checkpoint is saved and scored (default: the last)."""
        return sorted(self.settings.get("checkpoints") or [self.epochs])

    def checkpoint_problem(self) -> str | None:
        """Why ``checkpoints`` cannot be saved, or None: each is an epoch that runs."""
        late = [e for e in self.checkpoints if e > self.epochs]
        if late:
            return (f"epoch {', '.join(map(str, late))} is past epochs ({self.epochs}): a checkpoint is saved after "
                    "one of the epochs that run")
        return None

    def training(self) -> dict[str, Any]:
        """The settings that change the fine-tuned weights (the checkpoints' provenance)."""
        return {k: v for k, v in sorted(self.settings.items()) if k not in ("control", "checkpoints")}

    def training_settings(self) -> dict[str, Any]:
        """What a fine-tuning job needs (its params): the training settings and the epochs it saves."""
        return {**self.training(), "checkpoints": self.checkpoints}


def entry_problems(entry: Any, file: str, where: str = "") -> list:
    """One intervention's settings against the schema (unknown keys, types, ranges), located at ``where``
    (``field interventions.NAME`` in a config; empty on the command line, where each key is its option)."""
    from qclm.inputs import schema_problems

    out = []
    for f, loc, msg in schema_problems(entry, _schema(), file, {}):
        key = loc.removeprefix("field ").split(".")[0] if loc.startswith("field ") else ""
        out.append((f, f"{where}.{key}" if where else f"--{key.replace('_', '-')}", msg) if key else (f, loc, msg))
    return out


def interventions(config: dict) -> dict[str, Intervention]:
    """The config's interventions (none: an empty dict), defaults filled in."""
    section = config.get(SECTION) or {}
    base = defaults()
    return {name: Intervention(name, {**base, **entry}) for name, entry in section.items()}


def method_for(spec: ModelSpec, intervention: Intervention) -> str:
    """``full`` or ``lora`` for this model: the intervention's ``method``, or where it is ``auto`` LoRA for a
    quantized row (QLoRA: the adapters train on the quantized weights) or one above ``full_max_b`` billion
    parameters, full fine-tuning otherwise."""
    method = intervention.settings["method"]
    if method != "auto":
        return method
    large = spec.params_b > float(intervention.settings["full_max_b"])
    return "lora" if spec.quantization or large else "full"


def model_problems(spec: ModelSpec, what: str, methods: tuple[str, ...] = ("auto",)) -> list[tuple[str, str]]:
    """(column of the model table, problem) for each reason fine-tuning cannot take this model (``what``: who
    fine-tunes it, for the message; ``methods``: the fine-tuning methods it asks for): a quantized model in full
    (its adapters train on the quantized weights, QLoRA: method lora or auto) and an NLI classifier (``head: nli``:
    no language-model head to train). The one check of ``qclm validate`` (interventions, calibration) and ``qclm
    finetune``, before any model loads; a quantized row on the CPU is refused as for scoring (bitsandbytes needs
    CUDA)."""
    out = []
    if spec.quantization and "full" in methods:
        out.append(("quantization", f"{spec.quantization}: method full, asked by {what}, cannot train a quantized "
                    "model's weights: its LoRA adapters train on the quantized weights (QLoRA); set method to lora "
                    "or auto, or leave quantization empty"))
    if spec.head:
        out.append(("head", f"{spec.head}: a sequence classifier has no language-model head to fine-tune with the "
                    f"causal-LM loss of {what}; fine-tune a causal LM"))
    return out


def job_dir(results: str | Path, model: str, intervention: str) -> Path:
    """Where one model's fine-tuning on one intervention writes its checkpoints (``e{epoch}/``) and marker."""
    return Path(results) / "checkpoints" / f"{model}@{intervention}"


def checkpoint_dir(results: str | Path, model: str, intervention: str, epoch: int) -> Path:
    return job_dir(results, model, intervention) / f"e{epoch}"


@dataclass(frozen=True)
class Derived:
    """A checkpoint scored as a model of its own."""

    spec: ModelSpec
    base: str
    intervention: str
    epoch: int
    #: the fine-tuning job's marker: the scoring job of this model waits for it
    marker: str
    #: the probe instances that score it (None: every probe; a calibration plant's checkpoint: its plant's probes)
    probes: tuple[str, ...] | None = None


def derived_models(models: dict[str, ModelSpec], config: dict, results: str | Path) -> dict[str, Derived]:
    """Every checkpoint of every model x intervention as a model-table row of its own: the base row with the
    checkpoint directory as its source (loaded as a local model once it exists) and the derived name."""
    out: dict[str, Derived] = {}
    for spec in models.values():
        for iv in interventions(config).values():
            marker = str(job_dir(results, spec.name, iv.name) / JOB_MARKER)
            for epoch in iv.checkpoints:
                name = derived_name(spec.name, iv.name, epoch)
                source = str(checkpoint_dir(results, spec.name, iv.name, epoch))
                if not source.startswith(("/", ".", "~")):
                    source = f"./{source}"  # a path, never read as a hub id
                row = replace(spec, name=name, source=source, revision="", line=0)
                out[name] = Derived(row, spec.name, iv.name, epoch, marker)
    return out
