"""Where a calibration's floors come from, in a form that can be checked (docs/calibration.md, "Provenance"; no
torch): every row of ``calibration_floor.csv`` and of a floors file records the digest of its runs' training corpora
(:func:`group_digest`: every run's texts and manipulation-check sets, as the fine-tuning read them), the digest of
the part of the config the analysis reads (:func:`config_digest`) and qclm's version (:func:`qclm.version`).
``qclm floors --check`` rebuilds the corpora of each source config with the current code (no training:
:func:`rebuilt_digest`) and refuses a floor whose corpora the code no longer writes, or whose config has changed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from qclm.calibration.plants import corpus_config, jobs, run_groups

#: the length of a digest as the tables print it (hex characters of a SHA-256)
DIGEST_CHARS = 16


def _digest(data) -> str:
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def analysis_config(config: dict) -> dict:
    """The part of a config the calibration's analysis reads (its rule's params; what :func:`config_digest`
    digests): the calibration, the probes and their shorthands, the analysis settings, the conditions and the
    equations."""
    from qclm import probes

    keys = ("calibration", *probes.shorthands(), "probes", "analysis", "conditions", "equations")
    return {key: config[key] for key in keys if key in config}


def config_digest(config: dict) -> str:
    """The digest of :func:`analysis_config` (a config whose analysis reads the same settings has the same)."""
    return _digest(analysis_config(config))


def group_runs(config: dict, group: str) -> list[str]:
    """The intervention names of a group of runs (every arm seed and sham)."""
    return sorted(name for name, job in jobs(config, "").items() if job.group == group)


def group_digest(records: dict[str, dict]) -> str:
    """The digest of a group's runs: intervention name -> :func:`qclm.calibration.corpora.record`."""
    return _digest({name: records[name] for name in sorted(records)})


def files_digest(config: dict, paths: dict[str, tuple[str | Path, str | Path]]) -> dict[str, str]:
    """Each group's digest from the files its runs were fine-tuned on (``paths``: intervention name -> its corpus
    and check files); a group some of whose files are missing gets none."""
    from qclm.calibration.corpora import read_record

    out = {}
    for group in run_groups(config):
        names = group_runs(config, group)
        if all(name in paths and all(Path(p).is_file() for p in paths[name]) for name in names):
            out[group] = group_digest({name: read_record(*paths[name]) for name in names})
    return out


def rebuilt_digest(config: dict, group: str) -> str:
    """A group's digest from the corpora the current code writes for it, each from the part of the config its
    corpus depends on, as the workflow writes it (:func:`qclm.calibration.corpus_config`)."""
    from qclm.calibration.corpora import record

    out = {}
    for name in group_runs(config, group):
        own = corpus_config(config, name)
        out[name] = record(jobs(own, "")[name], own)
    return group_digest(out)
