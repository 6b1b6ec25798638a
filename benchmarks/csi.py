"""Benchmark: the CSI probe's list mode (issue 18, point 6) on one embedded model, vanilla.

1. The whole workload, as the scoring job runs it: N words x R repetitions in shuffled lists of 30, every list one
   chain of forced choices, all in one backend call (``LocalBackend.choose_chain``): each list's prompt and its
   answers so far are a growing shared prefix, computed once. The issue's target: 1,000 words x 5 repetitions in
   under 10 minutes on this machine.
2. Side by side on the first K lists (the same run, interleaved rounds, best of ``--repeats``), the same choices
   two ways:

   - ``chain``: ``choose_chain`` on the K lists;
   - ``independent``: each position an independent prompt, a ``ChoiceRequest`` whose context is the list's prompt
     plus every answer so far (the chain's own answers, so the same questions) and the word, one ``choose`` call
     per position for the K lists (the answers so far are known only then; within a call the engine still shares
     the instruction between the lists, but each list's prompt and answers are computed again at every position).

   Prints the seconds of each, their ratio, the tokens each computed, and the largest difference between the two
   ways' log-probabilities (the same numbers: the check that the comparison is fair).

    PYTHONPATH=src .venv/bin/python benchmarks/csi.py --words 1000 --repetitions 5 --compare-lists 6 \\
        --json benchmarks/out/csi-smollm2.json

``--threads``: torch threads (default 1: on a shared 2-core machine two threads spin against other processes and
run several times slower). The machine's load average is printed with every line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from qclm import bench

ROOT = Path(__file__).resolve().parents[1]


def say(message: str) -> None:
    print(f"[csi-bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}", file=sys.stderr,
          flush=True)


def independent(backend, chains, results):
    """Every position of every chain as its own forced choice, position by position (the answers so far are the
    chain's own choices)."""
    from qclm.engine.requests import ChoiceRequest

    so_far = [c.context for c in chains]
    out = [[] for _ in chains]
    for s in range(max(len(c.steps) for c in chains)):
        active = [i for i, c in enumerate(chains) if s < len(c.steps)]
        reqs = [ChoiceRequest(so_far[i] + chains[i].steps[s].text, chains[i].steps[s].options, full=chains[i].full)
                for i in active]
        for i, res in zip(active, backend.choose(reqs)):
            out[i].append(res)
            step = chains[i].steps[s]
            so_far[i] += step.text + step.options[results[i].steps[s].argmax]  # the chain's answer
    return out


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    bench.model_options(ap, ROOT)
    ap.add_argument("--words", type=int, default=1000)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--list-size", type=int, default=30)
    ap.add_argument("--compare-lists", type=int, default=6, help="lists timed both ways side by side (0: none)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-full", action="store_true", help="only the side-by-side comparison")
    args = ap.parse_args(argv)

    import torch

    from qclm.contexts import Context
    from qclm.experiment import VANILLA
    from qclm.jobs.backends import load
    from qclm.probes.base import Asking
    from qclm.models.loading import ensure_prepared
    from qclm.models.table import resolve_model
    from qclm.probes.base import Instance
    from qclm.probes.csi.kind import CSIProbe

    torch.set_num_threads(args.threads)
    spec = resolve_model(args.model, args.models, None)
    loaded = load(spec, ensure_prepared(spec, Path(args.models_dir) / spec.name), {"method": "auto"})
    backend = loaded.backend
    settings = {**CSIProbe.defaults(), "words": str(ROOT / "resources/csi/words.tsv"), "control": None,
                "limit_words": args.words, "repetitions": args.repetitions, "list_size": args.list_size}
    kind = CSIProbe(Instance("csi", "csi", settings))
    chains = [r.request for r in kind.requests(Context(VANILLA), loaded.prompts, Asking())]
    steps = sum(len(c.steps) for c in chains)
    say(f"{spec.name}: {len(chains)} lists, {steps} answers; threads {args.threads}")
    backend.choose_chain(chains[:1])  # the engine's self-check (auto), once, outside the timings
    record = {"model": spec.name, "words": args.words, "repetitions": args.repetitions, "list_size": args.list_size,
              "lists": len(chains), "answers": steps, "threads": args.threads, "load_start": os.getloadavg()[0]}

    if not args.skip_full:
        before = backend.stats.tokens_computed
        t0 = time.perf_counter()
        backend.choose_chain(chains)
        seconds = time.perf_counter() - t0
        record.update(full_seconds=round(seconds, 1), full_tokens=backend.stats.tokens_computed - before,
                      full_answers_per_second=round(steps / seconds, 1))
        say(f"whole workload: {seconds:.1f} s ({steps / seconds:.1f} answers/s, "
            f"{record['full_tokens']} tokens computed); target 600 s")

    if args.compare_lists:
        subset = chains[:args.compare_lists]
        n = sum(len(c.steps) for c in subset)
        best = {"chain": np.inf, "independent": np.inf}
        tokens = {}
        for r in range(args.repeats):
            for way in ("chain", "independent"):
                before = backend.stats.tokens_computed
                t0 = time.perf_counter()
                if way == "chain":
                    chained = backend.choose_chain(subset)
                else:
                    alone = independent(backend, subset, chained)
                best[way] = min(best[way], time.perf_counter() - t0)
                tokens[way] = backend.stats.tokens_computed - before
                say(f"round {r + 1}, {way}: {best[way]:.1f} s (best so far), {tokens[way]} tokens")
        diff = max(float(np.max(np.abs(np.asarray(a.option_logprobs) - np.asarray(b.option_logprobs))))
                   for ch, al in zip(chained, alone) for a, b in zip(ch.steps, al))
        same = all(a.argmax == b.argmax for ch, al in zip(chained, alone) for a, b in zip(ch.steps, al))
        ratio = best["independent"] / best["chain"]
        record.update(compare_lists=len(subset), compare_answers=n, chain_seconds=round(best["chain"], 2),
                      independent_seconds=round(best["independent"], 2), ratio=round(ratio, 2),
                      chain_tokens=tokens["chain"], independent_tokens=tokens["independent"],
                      max_logprob_diff=diff, same_choices=same)
        print(f"\n{spec.name}, {len(subset)} lists of {args.list_size} ({n} answers), threads {args.threads}:")
        print(f"{'way':<14}{'seconds':>10}{'tokens':>10}")
        for way in ("chain", "independent"):
            print(f"{way:<14}{best[way]:>10.2f}{tokens[way]:>10}")
        print(f"independent / chain: {ratio:.2f}x; same choices: {same}; max |log-prob difference|: {diff:.2e}")
    if "full_seconds" in record:
        print(f"whole workload ({args.words} words x {args.repetitions} repetitions, {len(chains)} lists): "
              f"{record['full_seconds']} s" + (f"; independent prompts at the measured ratio: about "
                                               f"{record['full_seconds'] * record['ratio']:.0f} s"
                                               if "ratio" in record else ""))
    record["load_end"] = os.getloadavg()[0]
    print(json.dumps(record))
    bench.write_json(args.json, record, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
