"""Benchmark: the shared-prefix engine against the naive batched full-sequence scorer.

Runs, in one process on the same model and the same variants (every variant of one questionnaire
under one stress stimulus), the naive scorer (every variant a full padded sequence, batched), the
engine (prefix-tree: the stimulus once, each item prefix once, intensifier tokens per variant),
and optionally the reference-style scorer (one sequence at a time) on a subset; measures the
float32 matmul peak in the same run; prints one JSON record (and writes it with --json FILE).

    .venv/bin/python benchmarks/engine.py                          # SmolLM2, STAI-S, stress01
    .venv/bin/python benchmarks/engine.py --model gemma3-270m --reference-subset 48 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from qclm.engine import FullSequenceScorer, PrefixTreeScorer, tokenize_requests
from qclm.models import load_model, load_model_table, prepare_model
from qclm.protocol import Protocol, condition_contexts
from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli

ROOT = Path(__file__).resolve().parents[1]


def matmul_peak_gflops(n: int = 2048, repeats: int = 10) -> float:
    """Best float32 GFLOP/s of an n x n matmul on this machine, right now."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def non_embedding_parameters(model) -> int:
    total = sum(p.numel() for p in model.parameters())
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    return total - emb.numel() - (0 if head.data_ptr() == emb.data_ptr() else head.numel())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-instruct", help="a name in --models")
    ap.add_argument("--models", default=str(ROOT / "config/models.tsv"))
    ap.add_argument("--models-dir", default=str(ROOT / "resources/models"))
    ap.add_argument("--questionnaire", default=str(ROOT / "resources/questionnaires/stai_s.yaml"))
    ap.add_argument("--stimuli", default=str(ROOT / "resources/stimuli/stress.yaml"))
    ap.add_argument("--stimulus-index", type=int, default=0)
    ap.add_argument("--version", default="long", choices=["long", "brief"])
    ap.add_argument("--batch-size", type=int, default=16, help="naive scorer batch size")
    ap.add_argument("--reference-subset", type=int, default=0,
                    help="also time one-sequence-at-a-time scoring on this many variants")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the record to this file")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    spec = load_model_table(args.models)[args.model]
    prepared = Path(args.models_dir) / spec.name
    if spec.needs_preparation and not (prepared / "qclm_prepared.json").exists():
        prepare_model(spec, prepared)
    model, tok, prov = load_model(spec, prepared, "cpu")
    q = load_questionnaire(args.questionnaire)
    stimuli = load_stimuli(args.stimuli, "stress")
    ctx = condition_contexts(q, "stress", stimuli, Protocol(version=args.version))[args.stimulus_index]
    reqs = tokenize_requests(tok, ctx.texts, [v.continuation for v in ctx.variants])

    # warm up both paths (allocator, kernels) on a few variants
    FullSequenceScorer(model, args.batch_size).score(reqs[:16])
    PrefixTreeScorer(model).score(reqs[:16])

    naive = FullSequenceScorer(model, args.batch_size)
    t0 = time.perf_counter()
    naive_lp = naive.score(reqs)
    naive_s = time.perf_counter() - t0

    engine = PrefixTreeScorer(model)
    t0 = time.perf_counter()
    engine_lp = engine.score(reqs)
    engine_s = time.perf_counter() - t0

    peak = matmul_peak_gflops()
    cfg = model.config.get_text_config()
    head_flops = 2 * cfg.hidden_size * model.get_output_embeddings().weight.shape[0] * engine.stats.head_positions
    flops = 2 * non_embedding_parameters(model) * engine.stats.tokens_computed + head_flops
    record = {
        "model": spec.name,
        "questionnaire": q.id,
        "stimulus_id": ctx.stimulus_id,
        "stimulus_tokens": min(len(r.context) for r in reqs),
        "n_variants": len(reqs),
        "naive_tokens": naive.stats.tokens_computed,
        "engine_tokens": engine.stats.tokens_computed,
        "naive_seconds": round(naive_s, 3),
        "engine_seconds": round(engine_s, 3),
        "speedup": round(naive_s / engine_s, 2),
        "max_abs_logprob_diff": float(max(np.max(np.abs(a - b)) for a, b in zip(naive_lp, engine_lp))),
        "engine_flops": int(flops),
        "engine_gflops_per_s": round(flops / engine_s / 1e9, 1),
        "matmul_peak_gflops": round(peak, 1),
        "fraction_of_peak": round(flops / engine_s / 1e9 / peak, 3),
        "engine_head_positions": engine.stats.head_positions,
        "engine_forward_calls": engine.stats.forward_calls,
        "dtype": prov["dtype"],
        "threads": args.threads,
        "torch": torch.__version__,
    }
    if args.reference_subset:
        sub = reqs[: args.reference_subset]
        ref = FullSequenceScorer(model, batch_size=1)
        t0 = time.perf_counter()
        ref.score(sub)
        per_variant = (time.perf_counter() - t0) / len(sub)
        record["reference_seconds_per_variant"] = round(per_variant, 4)
        record["reference_seconds_extrapolated"] = round(per_variant * len(reqs), 1)
        record["speedup_vs_reference"] = round(per_variant * len(reqs) / engine_s, 1)
    print(json.dumps(record, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
