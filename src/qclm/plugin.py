"""qclm's public plug-in API (docs/probes.md, "The plug-in API"): every name of qclm that a probe kind shipped as a
package of its own may import, in one module. A kind built on these names alone keeps working when qclm's internals
move; ``tests/test_plugin_api.py`` checks that the packages under ``plugins/`` and the test kind written as a user
writes one (``tests/yesno_probe.py``) import qclm through this module only.

What a kind finds here:

- the contract: :class:`ProbeKind`, what its methods receive and return (:class:`Instance`, :class:`Asking`,
  :class:`Labelled`, :class:`Answer`, :class:`ScoringCell`, :class:`CollectInput`, :class:`ProbeAnalysis`), the
  prompt builder its requests are built with (:class:`PromptBuilder`) and the schema of a material file's setting
  (:data:`FILE_SETTING`);
- the requests a backend answers (:class:`LoglikRequest`, :class:`ChoiceRequest`, :class:`ChainRequest` and
  :class:`ChainStep`, :class:`GenerateRequest` with :class:`GenerationSettings`, :class:`ClassifyRequest`) and the
  seeds derived from the run's (:func:`derive_seed`);
- bad input as one line ``FILE: LOCATION: PROBLEM`` (:class:`InputError`, :data:`Problem`), the readers every
  loader of qclm uses (:func:`read_yaml`, :func:`read_tsv`, :func:`read_text`) and the checks of a loaded document
  (:func:`document_problems`: its JSON Schema and every string in it);
- the experiment's unprimed condition (:data:`VANILLA`), the probes a config declares with their kinds
  (:func:`probe_kinds`, for a kind whose settings name other probes) and the shipped instruments' loaders
  (:func:`load_questionnaire`, :func:`load_instrument`);
- the analysis: what an output is (:class:`Output`, :data:`TABLE`, :data:`FIGURE`, :func:`state_trait`), the
  marks of a statistic a run cannot support (:func:`underpowered`, :func:`mark_underpowered`), a percentile
  bootstrap interval (:func:`percentile_ci`) and the note of a null read against its floor (:func:`null_note`);
- the calibration: what a material is (:class:`Material`, :class:`Planting`, :data:`REQUIRED`, :data:`ARMS`), the
  seeded draws every material shares (:func:`seeded`, :func:`balanced`, :func:`sham_index`), a planted chat
  exchange (:class:`Exchange`), a checkpoint's base model (:func:`base_of`) and the item units of a kind whose
  per-item table has the item-score shape (:func:`kind_item_units`).

The names whose modules load matplotlib or SciPy are imported on first use, so that importing a kind (the workflow
does, to build its DAG) stays quick. Nothing here imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from qclm.analysis.overview import null_note
from qclm.analysis.registry import FIGURE, TABLE, Output, state_trait
from qclm.corpus import Exchange
from qclm.engine.requests import (
    ChainRequest, ChainStep, ChoiceRequest, ClassifyRequest, GenerateRequest, GenerationSettings, LoglikRequest,
    derive_seed,
)
from qclm.errors import InputError, Problem
from qclm.experiment import VANILLA
from qclm.inputs import document_problems, read_text, read_tsv, read_yaml
from qclm.instruments import load_instrument
from qclm.models.checkpoints import base_of
from qclm.probes.base import (
    FILE_SETTING, Answer, Asking, CollectInput, Instance, Labelled, ProbeAnalysis, ProbeKind, ScoringCell,
)
from qclm.probes.calibration_material import ARMS, REQUIRED, Material, Planting, balanced, sham_index, seeded
from qclm.probes.registry import probe_kinds
from qclm.prompts import PromptBuilder
from qclm.questionnaire import load_questionnaire

if TYPE_CHECKING:
    from qclm.analysis.plotting import mark_underpowered, underpowered
    from qclm.analysis.stats import percentile_ci
    from qclm.probes.calibration_units import kind_item_units

#: the names imported on first use, name -> their module (they load matplotlib or SciPy)
LAZY = {"mark_underpowered": "qclm.analysis.plotting", "underpowered": "qclm.analysis.plotting",
        "percentile_ci": "qclm.analysis.stats", "kind_item_units": "qclm.probes.calibration_units"}


def __getattr__(name: str) -> Any:
    if name in LAZY:
        import importlib

        value = getattr(importlib.import_module(LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} (the plug-in API's names: "
                         f"{', '.join(__all__)})")


__all__ = [
    "ARMS", "Answer", "Asking", "ChainRequest", "ChainStep", "ChoiceRequest", "ClassifyRequest", "CollectInput",
    "Exchange", "FIGURE", "FILE_SETTING", "GenerateRequest", "GenerationSettings", "InputError", "Instance",
    "Labelled", "LoglikRequest", "Material", "Output", "Planting", "Problem", "ProbeAnalysis", "ProbeKind",
    "PromptBuilder", "REQUIRED", "ScoringCell", "TABLE", "VANILLA", "balanced", "base_of", "derive_seed",
    "document_problems", "kind_item_units", "load_instrument", "load_questionnaire", "mark_underpowered",
    "null_note", "percentile_ci", "probe_kinds", "read_text", "read_tsv", "read_yaml", "seeded", "sham_index",
    "state_trait", "underpowered",
]
