"""Benchmark: the engine side by side with lm-evaluation-harness and the naive batched scorer.

Runs, in one process on the same model and the same variants (every variant of one questionnaire
under one stress stimulus, e.g. 960 for STAI-S):

- lm-evaluation-harness ``HFLM.loglikelihood`` at batch 16 on the same (context, continuation)
  strings, when ``lm_eval`` is importable (run this script with .venv-peers/bin/python; see the
  README: lm-eval is not one of the project's requirements);
- the naive scorer (every variant a full padded sequence, batch 16, ``FullSequenceScorer``);
- the engine end to end as a user runs it: ``tokenize_requests`` + ``make_scorer("auto")`` (the
  prefix tree, its self-check against full sequences included; model load excluded);
- the engine's scoring alone (``PrefixTreeScorer.score``), its FLOP rate, and the float32 matmul
  peak measured in the same run (square 2048/4096 products and the model's own linear shapes at
  the engine's pack size: the highest rate any of them reached is the peak);
- optionally tables: ``--packs`` (tokens per pack), ``--blocks`` (query block of the tree
  attention), ``--attention`` (tree and dense), ``--head-blocks`` (vocabulary block bytes of the
  LM head), ``--baseline-ref REF`` (the engine of git commit REF, e.g. 776ebee, before this work),
  and ``--reference-subset N`` (one sequence at a time, extrapolated).

Engine timings are the best of ``--repeats`` runs (the spread is printed too): the machine is
shared, and the load average is recorded at every step. Prints one JSON record (also written with
--json FILE) and a short table.

    .venv-peers/bin/python benchmarks/engine.py --json benchmarks/out/smollm2.json
    .venv-peers/bin/python benchmarks/engine.py --model gemma3-270m --json benchmarks/out/gemma3.json
    .venv/bin/python benchmarks/engine.py --no-naive --packs 256,512,1024,2048,4096 --blocks 32,64,128 \\
        --attention --baseline-ref 776ebee
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from qclm import bench
from qclm.engine import head as qengine
from qclm.engine import FullSequenceScorer, PrefixTreeScorer, make_scorer, tokenize_requests
from qclm.models.loading import ensure_prepared, load_model
from qclm.models.table import load_model_table
from qclm.contexts import ContextSettings
from qclm.probes.likert.kind import Wordings, item_contexts
from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli

ROOT = Path(__file__).resolve().parents[1]


def load() -> float:
    return round(os.getloadavg()[0], 2)


def say(message: str) -> None:
    print(f"[engine-bench {time.strftime('%H:%M:%S')} load {load()}] {message}", file=sys.stderr, flush=True)


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


def linear_shapes_gflops(model, rows: int, repeats: int = 5) -> dict:
    """float32 GFLOP/s of the model's own linear layers (one decoder layer's distinct weight
    shapes, and the LM head's first 8192 rows) on ``rows`` tokens: the shapes the engine runs."""
    layer = model.base_model.layers[0]
    shapes = sorted({tuple(m.weight.shape) for m in layer.modules() if isinstance(m, torch.nn.Linear)})
    head = model.get_output_embeddings().weight
    shapes.append((min(8192, head.shape[0]), head.shape[1]))
    out = {}
    for n_out, n_in in shapes:
        x, w = torch.randn(rows, n_in), torch.randn(n_out, n_in)
        torch.nn.functional.linear(x, w)
        t, _ = bench.best_seconds(lambda x=x, w=w: torch.nn.functional.linear(x, w), repeats)
        out[f"{rows}x{n_in}x{n_out}"] = round(2 * rows * n_in * n_out / t / 1e9, 1)
    return out


def non_embedding_parameters(model) -> int:
    total = sum(p.numel() for p in model.parameters())
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    return total - emb.numel() - (0 if head.data_ptr() == emb.data_ptr() else head.numel())


def engine_flops(model, stats) -> tuple[int, int]:
    """(2 x non-embedding parameters x tokens computed + the LM head at distinct scored positions,
    the same plus attention over the query-key pairs the tree mask allows: 4 x heads x head_dim
    per pair and layer)."""
    cfg = model.config.get_text_config()
    head = 2 * cfg.hidden_size * model.get_output_embeddings().weight.shape[0] * stats.head_positions
    dense = 2 * non_embedding_parameters(model) * stats.tokens_computed + head
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    attention = 4 * cfg.num_hidden_layers * cfg.num_attention_heads * head_dim * stats.attended_pairs
    return int(dense), int(dense + attention)


def max_diff(a, b) -> float:
    return float(max(np.max(np.abs(x - y)) for x, y in zip(a, b)))


def baseline_engine(ref: str):
    """The engine module of git commit ``ref`` (before this work), imported from a temporary file."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:src/qclm/engine/scorers.py"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"engine_{ref}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"engine_{ref}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run_lm_eval(model, tok, contexts, continuations, batch_size: int) -> tuple[np.ndarray, list[bool], float]:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size)
    reqs = [Instance(request_type="loglikelihood", doc={}, arguments=(c, k), idx=i)
            for i, (c, k) in enumerate(zip(contexts, continuations))]
    t0 = time.perf_counter()
    out = lm.loglikelihood(reqs, disable_tqdm=True)
    return np.array([ll for ll, _ in out]), [g for _, g in out], time.perf_counter() - t0


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                flags = Path("/proc/cpuinfo").read_text()
                return line.split(":", 1)[1].strip() + (" AVX-512" if "avx512f" in flags else " AVX2")
    except OSError:
        pass
    return platform.processor()


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    bench.model_options(ap, ROOT)
    ap.add_argument("--questionnaire", default=str(ROOT / "resources/questionnaires/stai_s.yaml"))
    ap.add_argument("--stimuli", default=str(ROOT / "resources/stimuli/stress.yaml"))
    ap.add_argument("--stimulus-index", type=int, default=0)
    ap.add_argument("--version", default="long", choices=["long", "brief"])
    ap.add_argument("--batch-size", type=int, default=16, help="naive scorer and lm-eval batch size")
    ap.add_argument("--repeats", type=int, default=3, help="engine runs per setting (best and spread reported)")
    ap.add_argument("--lm-eval", default="auto", choices=["auto", "on", "off"],
                    help="lm-evaluation-harness HFLM side by side (auto: when lm_eval is importable)")
    ap.add_argument("--no-naive", action="store_true", help="skip the naive batched scorer")
    ap.add_argument("--reference-subset", type=int, default=0,
                    help="also time one-sequence-at-a-time scoring on this many variants")
    ap.add_argument("--packs", default="", help="comma-separated pack sizes (tokens) to time")
    ap.add_argument("--blocks", default="", help="comma-separated query block sizes of the tree attention to time")
    ap.add_argument("--attention", action="store_true", help="time the dense attention path too")
    ap.add_argument("--head-blocks", default="", help="comma-separated LM-head block sizes (MiB) to time")
    ap.add_argument("--baseline-ref", default="", help="also time the engine of this git commit (e.g. 776ebee)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    spec = load_model_table(args.models)[args.model]
    prepared = ensure_prepared(spec, Path(args.models_dir) / spec.name)
    model, tok, prov = load_model(spec, prepared, "cpu")
    q = load_questionnaire(args.questionnaire)
    stimuli = load_stimuli(args.stimuli, "stress")
    ctx = item_contexts(q, "stress", stimuli, ContextSettings(version=args.version),
                        Wordings("first"))[args.stimulus_index]
    contexts, continuations = ctx.texts, [v.continuation for v in ctx.variants]
    loads = {"start": load()}

    def end_to_end():
        t0 = time.perf_counter()
        reqs = tokenize_requests(tok, contexts, continuations)
        tokenize_s = time.perf_counter() - t0
        scorer = make_scorer(model, "auto")
        lp = scorer.score(reqs)
        return reqs, lp, scorer, tokenize_s

    # warm up (allocator, kernels, the once-per-model head check) on a few variants
    reqs = tokenize_requests(tok, contexts, continuations)
    FullSequenceScorer(model, args.batch_size).score(reqs[:16])
    PrefixTreeScorer(model).score(reqs[:16])

    say("engine end to end (tokenize_requests + make_scorer('auto'))")
    e2e_times, tokenize_times = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        reqs, e2e_lp, auto, tokenize_s = end_to_end()
        e2e_times.append(time.perf_counter() - t0)
        tokenize_times.append(tokenize_s)
    say("engine scoring alone (PrefixTreeScorer)")
    engine = None

    def engine_run():
        nonlocal engine
        engine = PrefixTreeScorer(model)
        return engine.score(reqs)

    engine_lp = engine_run()
    engine_s, engine_times = bench.best_seconds(engine_run, args.repeats)
    loads["engine"] = load()

    say("float32 matmul peak")
    pack_rows = min(engine.stats.tokens_computed, engine._auto_pack_tokens(0, torch.device("cpu")))
    square = {n: round(matmul_peak_gflops(n), 1) for n in (2048, 4096)}
    shapes = linear_shapes_gflops(model, pack_rows)
    peak = max(list(square.values()) + list(shapes.values()))
    flops, flops_attention = engine_flops(model, engine.stats)
    record = {
        "model": spec.name,
        "questionnaire": q.id,
        "stimulus_id": ctx.stimulus_id,
        "stimulus_tokens": min(len(r.context) for r in reqs),
        "n_variants": len(reqs),
        "engine_tokens": engine.stats.tokens_computed,
        "engine_seconds": round(engine_s, 3),
        "engine_seconds_all": [round(t, 3) for t in engine_times],
        "engine_e2e_seconds": round(min(e2e_times), 3),
        "engine_e2e_seconds_all": [round(t, 3) for t in e2e_times],
        "tokenize_seconds": round(min(tokenize_times), 3),
        "self_check_tokens": auto.stats.check_tokens,
        "engine_method": auto.stats.method,
        "engine_flops": flops,
        "engine_flops_with_attention": flops_attention,
        "engine_gflops_per_s": round(flops / engine_s / 1e9, 1),
        "engine_e2e_gflops_per_s": round(flops / min(e2e_times) / 1e9, 1),
        "matmul_peak_gflops": round(peak, 1),
        "matmul_square_gflops": square,
        "matmul_model_shapes_gflops": shapes,
        "fraction_of_peak": round(flops / engine_s / 1e9 / peak, 3),
        "fraction_of_peak_with_attention": round(flops_attention / engine_s / 1e9 / peak, 3),
        "fraction_of_peak_e2e": round(flops / min(e2e_times) / 1e9 / peak, 3),
        "engine_head_positions": engine.stats.head_positions,
        "engine_forward_calls": engine.stats.forward_calls,
        "engine_attended_pairs": engine.stats.attended_pairs,
        "max_abs_logprob_diff_e2e_vs_engine": max_diff(e2e_lp, engine_lp),
        "dtype": prov["dtype"],
        "threads": args.threads,
        "torch": torch.__version__,
        "cpu": cpu_name(),
    }

    if not args.no_naive:
        say("naive batched scorer")
        naive = FullSequenceScorer(model, args.batch_size)
        t0 = time.perf_counter()
        naive_lp = naive.score(reqs)
        naive_s = time.perf_counter() - t0
        loads["naive"] = load()
        record.update({
            "naive_tokens": naive.stats.tokens_computed,
            "naive_seconds": round(naive_s, 3),
            "speedup": round(naive_s / engine_s, 2),
            "speedup_e2e": round(naive_s / min(e2e_times), 2),
            "max_abs_logprob_diff": max_diff(naive_lp, engine_lp),
        })

    use_lm_eval = args.lm_eval == "on" or (args.lm_eval == "auto" and importlib.util.find_spec("lm_eval"))
    if use_lm_eval:
        import lm_eval

        say("lm-evaluation-harness HFLM loglikelihood")
        ll, greedy, lm_s = run_lm_eval(model, tok, contexts, continuations, args.batch_size)
        loads["lm_eval"] = load()
        _, flags = make_scorer(model, "auto").score_with_greedy(reqs)
        sums = np.array([float(lp.astype(np.float64).sum()) for lp in e2e_lp])
        record.update({
            "lm_eval_version": getattr(lm_eval, "__version__", ""),
            "lm_eval_seconds": round(lm_s, 2),
            "lm_eval_over_engine_e2e": round(lm_s / min(e2e_times), 1),
            "lm_eval_over_engine_e2e_median": round(lm_s / statistics.median(e2e_times), 1),
            "max_abs_logprob_diff_vs_lm_eval": float(np.max(np.abs(ll - sums))),
            "is_greedy_agrees_with_lm_eval": bool(all(bool(np.all(f)) == g for f, g in zip(flags, greedy))),
        })
    else:
        record["lm_eval_seconds"] = None
        say("lm_eval not importable: run with .venv-peers/bin/python for the side-by-side (see README)")

    if args.reference_subset:
        sub = reqs[: args.reference_subset]
        ref = FullSequenceScorer(model, batch_size=1)
        t0 = time.perf_counter()
        ref.score(sub)
        per_variant = (time.perf_counter() - t0) / len(sub)
        record["reference_seconds_per_variant"] = round(per_variant, 4)
        record["reference_seconds_extrapolated"] = round(per_variant * len(reqs), 1)
        record["speedup_vs_reference"] = round(per_variant * len(reqs) / engine_s, 1)

    # the tables: every setting once per round, rounds interleaved (a busy spell of the shared
    # machine then hits all settings alike); best of the rounds, all times kept
    settings: dict[str, object] = {}
    if args.baseline_ref:
        old = baseline_engine(args.baseline_ref)
        settings[f"baseline {args.baseline_ref} pack auto"] = lambda: old.PrefixTreeScorer(model)
        settings[f"baseline {args.baseline_ref} pack 512"] = lambda: old.PrefixTreeScorer(model, pack_tokens=512)
    if args.attention:
        settings["attention dense"] = lambda: PrefixTreeScorer(model, attention="dense")
        settings["attention tree"] = lambda: PrefixTreeScorer(model)
    for block in filter(None, args.blocks.split(",")):
        settings[f"block {block}"] = lambda b=int(block): PrefixTreeScorer(model, block=b)
    for pack in filter(None, args.packs.split(",")):
        settings[f"pack {pack}"] = lambda p=int(pack): PrefixTreeScorer(model, pack_tokens=p)
        if args.attention:
            settings[f"pack {pack} dense"] = lambda p=int(pack): PrefixTreeScorer(model, pack_tokens=p,
                                                                                  attention="dense")
    head_blocks = {f"head block {mib} MiB": int(float(mib) * 2**20)
                   for mib in filter(None, args.head_blocks.split(","))}
    default_head = qengine.HEAD_BLOCK_BYTES
    for label, size in head_blocks.items():
        settings[label] = lambda: PrefixTreeScorer(model)
    tables: dict[str, dict] = {}
    for label, make in settings.items():  # warm up each
        qengine.HEAD_BLOCK_BYTES = head_blocks.get(label, default_head)
        make().score(reqs[:16])
    for round_ in range(args.repeats if settings else 0):
        for label, make in settings.items():
            qengine.HEAD_BLOCK_BYTES = head_blocks.get(label, default_head)
            scorer = make()
            t0 = time.perf_counter()
            got = scorer.score(reqs)
            seconds = time.perf_counter() - t0
            row = tables.setdefault(label, {"all": [], "loads": []})
            row["all"].append(round(seconds, 3))
            row["loads"].append(load())
            row.update({"seconds": min(row["all"]), "forward_calls": scorer.stats.forward_calls,
                        "tokens": scorer.stats.tokens_computed, "max_abs_diff_vs_engine": max_diff(got, engine_lp)})
        say(f"round {round_ + 1}: " + ", ".join(f"{k} {v['all'][-1]:.2f}" for k, v in tables.items()))
    qengine.HEAD_BLOCK_BYTES = default_head
    if tables:
        record["tables"] = tables
        width = max(map(len, tables))
        print("\n".join(f"{k:{width}s} {v['seconds']:8.2f} s  (rounds: {v['all']})" for k, v in tables.items()),
              file=sys.stderr)
    loads["end"] = load()
    record["load_average"] = loads

    print(json.dumps(record, indent=2))
    lines = [f"{'':34s}{'seconds':>10s}{'x engine e2e':>14s}"]
    for label, key in (("lm-eval HFLM (batch 16)", "lm_eval_seconds"), ("naive batched (batch 16)", "naive_seconds"),
                       ("engine end to end", "engine_e2e_seconds"), ("engine scoring only", "engine_seconds")):
        if record.get(key) is not None:
            lines.append(f"{label:34s}{record[key]:10.2f}{record[key] / record['engine_e2e_seconds']:14.1f}")
    print("\n".join(lines), file=sys.stderr)
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
