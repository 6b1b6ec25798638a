"""``qclm analyze``: the Likert kind's statistics, tables and figures from an existing item-score table
(:mod:`qclm.probes.likert.analysis.stage`; the workflow and ``qclm probe likert`` run the same analysis through the
kind's ``analyze``). Its defaults are the config schema's (``analysis`` and ``templates`` sections)."""

from __future__ import annotations

import argparse
import logging

from qclm import settings
from qclm.analysis import floors
from qclm.argtypes import check_output, conditions, non_negative_int, positive_int, sized
from qclm.errors import InputError
from qclm.experiment import parse_contrast_args
from qclm.logs import configure_logging
from qclm.probes.likert.sections import TEMPLATE_DEFAULTS

log = logging.getLogger("qclm.analysis")
#: the defaults of the options: the config schema's (one home)
DEFAULTS = settings.defaults(settings.ANALYSIS)
TEMPLATE_SELECT = TEMPLATE_DEFAULTS["select"]


def _size_classes(text: str) -> list[float]:
    """'3,8' -> [3.0, 8.0]: positive finite numbers, increasing (qclm.settings.parse_size_classes)."""
    try:
        return settings.parse_size_classes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _contrasts(text: str) -> list[tuple[str, str]] | None:
    """'vanilla:stress,...' -> pairs; '' -> None (the paper's, as the workflow passes it); text that names no
    contrast (',') is an error: it would analyse no contrast and say nothing."""
    if not text.strip():
        return None
    try:
        pairs = parse_contrast_args(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--contrasts: ")) from None
    if not pairs:
        raise argparse.ArgumentTypeError(f"no contrast in {text!r}: give FIRST:SECOND,... (or leave --contrasts "
                                         "out for the paper's)")
    return pairs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="statistics, tables and figures from an item-score table")
    p.add_argument("--scores", required=True, help="CSV or Parquet item-score table")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--bootstrap", type=sized("resamples"), default=DEFAULTS["bootstrap"],
                   help=f"bootstrap iterations (default {DEFAULTS['bootstrap']})")
    p.add_argument("--seed", type=non_negative_int, default=DEFAULTS["seed"], help=f"default {DEFAULTS['seed']}")
    size_classes = ",".join(f"{b:g}" for b in DEFAULTS["size_classes"])
    p.add_argument("--size-classes", type=_size_classes, default=size_classes,
                   help=f"size-class boundaries in billions of parameters, increasing (default {size_classes})")
    p.add_argument("--contrasts", type=_contrasts, default=None,
                   help="contrasts FIRST:SECOND,... (differences are first minus second; default: the paper's "
                   "vanilla:stress,vanilla:neutral,neutral:stress where their conditions are present)")
    p.add_argument("--stimulus-types", type=conditions, default=(),
                   help="conditions compared as types of one stimulus, A,B,... (two or more: stimulus_types.csv, "
                   "every two types and all at once; default: none)")
    p.add_argument("--min-models", type=positive_int, default=DEFAULTS["min_models"],
                   help="across-model analyses with fewer models are marked underpowered "
                   f"(default {DEFAULTS['min_models']})")
    p.add_argument("--min-stimuli", type=positive_int, default=DEFAULTS["min_stimuli"],
                   help=f"per-model analyses with fewer stimuli per condition are marked underpowered "
                   f"(default {DEFAULTS['min_stimuli']})")
    p.add_argument("--templates", default=TEMPLATE_SELECT,
                   help="wordings the questionnaire scores use: first (the default wording), all (their mean), or "
                   f"a template id (default {TEMPLATE_SELECT})")
    p.add_argument("--silhouette", default=None, help="optional per-item silhouette table from scoring")
    p.add_argument("--variant-probs", default=None,
                   help="optional variant probability table (heatmap figure; normalization_sensitivity, with the "
                        "config schema's equations settings)")
    p.add_argument("--heatmap-item", default=DEFAULTS["heatmap_item"],
                   help="item of the heatmap figure: ITEM or QUESTIONNAIRE:ITEM (default: first item)")
    p.add_argument("--instruments", default=None,
                   help="optional instrument table (questionnaire, construct, framing, control_of): expected signs "
                        "of the construct map, framing in the spectrum, control forms beside their originals")
    p.add_argument("--memorization", default=None,
                   help="optional memorization table (analysis/memorization.csv of the memorization probe): "
                        "instruments whose items a model has seen are flagged in instrument_validation")
    p.add_argument("--floors", default=floors.path({}),
                   help="the calibrated floors the first page sets the nulls against (qclm floors writes one; "
                        "default: the floors measured on the embedded models, resources/calibration/floors.csv)")
    p.add_argument("--no-figures", action="store_true")

    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``qclm analyze``; exit code 2 on bad input."""
    from qclm.probes.likert.analysis.stage import analyze

    configure_logging()
    try:
        check_output(args.out, "--out", directory=True)
        analyze(
            scores=args.scores,
            out=args.out,
            bootstrap=args.bootstrap,
            seed=args.seed,
            size_classes=args.size_classes,
            silhouette=getattr(args, "silhouette", None),
            variant_probs=getattr(args, "variant_probs", None),
            heatmap_item=getattr(args, "heatmap_item", None),
            figures=not getattr(args, "no_figures", False),
            contrasts=getattr(args, "contrasts", None),
            min_models=getattr(args, "min_models", DEFAULTS["min_models"]),
            min_stimuli=getattr(args, "min_stimuli", DEFAULTS["min_stimuli"]),
            templates=getattr(args, "templates", TEMPLATE_SELECT),
            instruments=getattr(args, "instruments", None),
            memorization=getattr(args, "memorization", None),
            floors=getattr(args, "floors", None),
            stimulus_types=getattr(args, "stimulus_types", ()),
        )
    except InputError as exc:
        log.error("%s", exc)
        return 2
    return 0
