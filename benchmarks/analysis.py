"""Benchmark: the Likert analysis's tables on a synthetic table, each timed, and the three per-model tables side by
side with and without one shared pass over the models' contrast data (``LikertContext.per_model_groups``; before,
each table made its own pass). Best of ``--repeats``; figures are not drawn (``qclm analyze`` logs their time).

    .venv/bin/python benchmarks/analysis.py                      # 35 models, 20 items, 24 stimuli per class
    .venv/bin/python benchmarks/analysis.py --models 12 --bootstrap 1000
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from qclm import bench
from qclm.analysis import permodel, registry, runner
from qclm.analysis.synthetic import synthetic_item_scores
from qclm.probes.likert.analysis.stage import read_context
from qclm.probes.likert.kind import LikertProbe


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, json_record=False)
    ap.add_argument("--models", type=int, default=35)
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--stimuli", type=int, default=24, help="stimuli per class (stress, neutral)")
    ap.add_argument("--bootstrap", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        scores = Path(tmp) / "items.parquet"
        synthetic_item_scores(n_models=args.models, n_items=args.items, n_stimuli=args.stimuli).to_parquet(scores)

        def context():
            return read_context(scores, bootstrap=args.bootstrap, seed=0, size_classes="3,8", silhouette=None,
                                variant_probs=None, heatmap_item=None, figures=False, contrasts=None,
                                min_models=10, min_stimuli=10, templates="first", instruments=None)

        print(f"{args.models} models, {args.items} items, {args.stimuli} stimuli per class, "
              f"{args.bootstrap} bootstraps; best of {args.repeats}, seconds")
        ctx = context()
        tables: dict = {}
        for output in registry.select(LikertProbe.analysis_outputs(), registry.TABLE):
            fn = runner.resolve(output)

            def compute(fn=fn, output=output):
                tables[output.name] = fn(ctx, *(tables[name] for name in output.uses))

            print(f"  {output.name:24s} {_best(compute, args.repeats):7.3f}")

        def separate():  # each table its own pass, as before
            permodel.shifts_table(ctx.items, ctx.zs, ctx.contrasts, args.bootstrap, 0)
            permodel.state_trait_table(ctx.items, ctx.contrasts, args.bootstrap, 0)
            permodel.interaction_table(ctx.items, ctx.contrasts)

        def shared():  # one pass, as the Likert context does
            groups = permodel.per_model_groups(ctx.items, ctx.contrasts)
            permodel.shifts_table(ctx.items, ctx.zs, ctx.contrasts, args.bootstrap, 0, groups=groups)
            permodel.state_trait_table(ctx.items, ctx.contrasts, args.bootstrap, 0, groups=groups)
            permodel.interaction_table(ctx.items, ctx.contrasts, groups=groups)

        t_sep, t_shared = _best(separate, args.repeats), _best(shared, args.repeats)
        print(f"per-model tables: {t_sep:.3f} one pass each, {t_shared:.3f} one shared pass "
              f"({t_sep / t_shared:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
