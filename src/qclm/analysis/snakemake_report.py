"""The report every run of the workflow ends with: ``RESULTS/report.html``, Snakemake's report of the run.

Snakemake writes a report only when asked (``snakemake --report FILE``, a second command). The Snakefile's
``onsuccess`` handler calls :func:`write` instead, so every way of running the whole workflow ends with it: ``make
run``, the README's plain ``snakemake --cores 2 --resources gpu=1`` and the SLURM profile (the handler runs in the
main Snakemake process, on the node that submitted the jobs). It runs ``snakemake --report`` in a process of its
own, on the very config the run used (written beside Snakemake's own files, ``.snakemake/qclm-report-config.yaml``),
and only where every output of the whole workflow is there: a run of part of it (a target, ``--until``) says so and
writes none. A report that cannot be written costs the run nothing: the line says why and what to type.

The config key ``report`` (default true; the schema's) turns it off: the tests' own workflow runs do, all but the
one whose report they open.

Light on purpose (no pandas): the Snakefile imports it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

#: the report's file name in the run's results directory
REPORT = "report.html"
#: the config the report is made from, beside Snakemake's own files in the working directory
CONFIG_COPY = Path(".snakemake") / "qclm-report-config.yaml"


def path(results: str | Path) -> Path:
    """The report of a run whose results directory is ``results``."""
    return Path(results) / REPORT


def command(snakefile: str | Path, config: str | Path, out: str | Path) -> list[str]:
    """``snakemake --report`` of the workflow in the working directory, on a config file."""
    return [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--configfile", str(config),
            "--replace-workflow-config", "--cores", "1", "--report", str(out)]


def write(snakefile: str | Path, config: dict, results: str | Path, targets: Iterable[str],
          log=print) -> Path | None:
    """Write ``RESULTS/report.html`` after a successful run of the whole workflow (the Snakefile's ``onsuccess``);
    returns its path, or None (a partial run, or a report Snakemake could not write: said through ``log``)."""
    import yaml

    out = path(results)
    missing = [t for t in targets if not os.path.exists(t)]
    if missing:
        log(f"{out}: not written: {len(missing)} of the workflow's outputs are not there (a run of part of it), "
            f"for one {missing[0]}; once they are, run the workflow again or type: snakemake --report {out}")
        return None
    CONFIG_COPY.parent.mkdir(exist_ok=True)
    CONFIG_COPY.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    cmd = command(snakefile, CONFIG_COPY, out)
    log(f"Writing the run's report: {out} (snakemake --report)")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        tail = " | ".join(line for line in run.stderr.strip().splitlines()[-5:])
        log(f"{out}: not written: snakemake --report ended with exit {run.returncode}: {tail} (to retry: "
            f"{' '.join(cmd)})")
        return None
    log(f"Report: {out}")
    return out
