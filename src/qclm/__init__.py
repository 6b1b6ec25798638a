"""qclm: questionnaire measurement of psychological constructs in causal language models.

Modules, following the stages of the method (docs/method.md):

- ``questionnaire``: item templates, construct terms, Likert intensifiers (section 1)
- ``stimuli``: stress and neutral narratives (section 2)
- ``models``: the model table, embedded GGUF models, safe loading
- ``engine``: scoring variants as token log-probabilities (section 3)
- ``scoring``: harmonic mean, two-way normalization, item and questionnaire scores (sections 3-5, 7)
- ``analysis``: z-scores, tests, variance decomposition, validation, figures (sections 6-8)
"""

__version__ = "0.1.0"


def version() -> str:
    """qclm's version, with the commit where qclm runs from a git checkout (``0.1.0+g1a2b3c4``; ``.dirty`` where its
    package or workflow differ from that commit): what ``qclm --version`` prints and every calibration floor records."""
    import subprocess
    from pathlib import Path

    here = Path(__file__).resolve().parent
    if not (here.parent.parent / "pyproject.toml").is_file():  # installed, not a checkout
        return __version__
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--", str(here.parent.parent / "src"),
                                str(here.parent.parent / "workflow")], capture_output=True, text=True, timeout=10,
                               check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{commit}{'.dirty' if dirty else ''}" if commit else __version__
