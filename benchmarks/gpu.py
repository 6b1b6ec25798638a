"""Benchmark: the engine at the shapes labs study, on one GPU, beside transformers as others run it.

Models: the published shapes of Llama-2-7B, Mistral-7B-v0.1 and Gemma-2-9B (benchmarks/shapes/*.json, written for
this benchmark; no weights, no hub), filled with random weights (seed 0) in ``--dtype`` (bf16 on a GPU). Speed and
the agreement of two ways of computing the same numbers do not depend on the weights' values. ``--tiny`` keeps each
architecture at a toy size (2 layers, hidden 64): the same script on the CPU, in the tests, so that it cannot rot.

Workloads, from the repository's own inputs, tokenized by ``--tokenizer`` (SmolLM2's; the ids taken modulo the
shape's vocabulary, so the lengths are a real tokenizer's):

- ``likert``: the default Likert cells of one questionnaire, as the scoring job asks them: ``--questionnaire`` of
  config/config.yaml under every condition and stimulus, every template (log-likelihood requests).
- ``csi``: forced-choice CSI lists (config/implicit.yaml's ``csi``: a chain of forced choices per word list) under
  vanilla and the first ``--csi-stimuli`` stress stimuli.
- ``generation``: 16, 32 and 64 prompts (``--prompts``) sharing a stimulus (the first stress stimulus, then a
  question; the questions of benchmarks/generation.py, twice over), greedy, ``--new-tokens`` new tokens each.

Ways:

- ``engine``: the shared-prefix engine (``PrefixTreeScorer``, qclm.engine.chains ``run_chains``,
  qclm.engine.generation ``run_generation``), the whole workload.
- ``request by request``: transformers, one forward per request over its whole sequence (what the authors' scorer
  and lm-evaluation-harness's loglikelihood per request do: ``FullSequenceScorer`` at batch 1; a chain's steps
  each as its own requests), on ``--sample`` requests (or chains) drawn with seed 0; its time for the whole
  workload is the sample's times the workload's size over the sample's, and marked ``extrapolated``.
- ``batched generate``: transformers' ``model.generate`` on all prompts at once, left-padded (generation only;
  beside it the engine with each way a decode step can attend, qclm.engine.tree_attention, forced).

For each: seconds, tokens computed per second (generation: new tokens), peak device memory (CUDA only), the
floating-point work done (2 x non-embedding parameters per token computed, the LM head where it runs, and the
engine's attention over the query-key pairs its masks allow; the baselines' attention is left out, so their rates
are lower bounds) and its fraction of this device's peak in ``--dtype`` (measured in the same run: the best of large
square matmuls),
and agreement: the engine's log-probabilities against request by request (largest difference, beside the
engine's own self-check tolerance for the dtype), and greedy outputs identical to batched generate's and to one
prompt at a time on ``--sample`` prompts.

``--json FILE`` is written again after each workload, so that a run stopped at a time limit keeps what it measured.
``--project RECORD`` reads a record this benchmark wrote and prints the paper's 35 models' wall time (docs/scaling.md).

    python benchmarks/gpu.py --device cuda --json benchmarks/out/gpu-h200.json   # one GPU, under 8 minutes
    .venv/bin/python benchmarks/gpu.py --tiny --device cpu --dtype float32       # the same, tiny, on the CPU
    .venv/bin/python benchmarks/gpu.py --project benchmarks/out/gpu-h200.json
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: benchmarks/ is a package beside src/
    sys.path.insert(0, str(ROOT))

from benchmarks.engine import engine_flops, non_embedding_parameters  # noqa: E402
from benchmarks.generation import QUESTIONS, hf_generate  # noqa: E402
from qclm import argtypes, bench, cache  # noqa: E402
from qclm.models.loading import resolve_device  # noqa: E402
from qclm.models.table import DTYPES  # noqa: E402

SHAPES = ROOT / "benchmarks" / "shapes"
#: the toy size of --tiny (each shape keeps its architecture, its ratio of query to key/value heads, its windows
#: and soft-capping)
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "head_dim": 16, "vocab_size": 4096, "sliding_window": 32, "query_pre_attn_scalar": 16}
WORKLOADS = ("likert", "csi", "generation")


def say(message: str) -> None:
    print(f"[gpu-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def shape_config(name: str, tiny: bool):
    """The transformers config of a shape in benchmarks/shapes (``tiny``: at the toy size)."""
    from transformers import AutoConfig

    fields = json.loads((SHAPES / f"{name}.json").read_text())
    fields.pop("_comment", None)
    model_type = fields.pop("model_type")
    if tiny:
        ratio = fields["num_attention_heads"] // fields["num_key_value_heads"]
        fields.update({k: v for k, v in TINY.items() if k in fields or k in ("head_dim",)})
        fields["num_key_value_heads"] = max(1, TINY["num_attention_heads"] // ratio)
    return AutoConfig.for_model(model_type, **fields)


def random_model(config, dtype: torch.dtype, device: str):
    """The shape with random weights (seed 0), made on ``device`` directly (a 9B model in seconds on a GPU)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.generation_config.pad_token_id = config.eos_token_id
    return model.eval()


# -- the workloads, tokenized -----------------------------------------------------------------------------------
def instance_token_requests(config_file: str, probe: str, conditions, tokenizer, limit_stimuli: int | None = None):
    """Every request of one probe instance of a shipped config under ``conditions``, as the scoring job asks
    them, by request type: {type name: [request]}; and the config's engine settings (its token boundary)."""
    from qclm import settings
    from qclm.commands.render import config_target, instance_requests

    target = config_target(config_file, "smollm2-135m-instruct", probe)
    if limit_stimuli is not None:
        target = replace(target, config={**target.config, "limit_stimuli": limit_stimuli})
    out: dict[str, list] = {}
    for condition in conditions:
        for _, labelled in instance_requests(target, condition, tokenizer)[1]:
            for lab in labelled:
                out.setdefault(type(lab.request).__name__, []).append(lab.request)
    return out, settings.section(target.config, settings.ENGINE)


def workloads(tokenizer, args) -> dict[str, object]:
    """The workloads asked for (``--workloads``), in token ids of ``tokenizer`` (module docstring)."""
    from qclm.engine.chains import tokenize_chains
    from qclm.engine.requests import tokenize_requests
    from qclm.stimuli import load_stimuli

    def likert():
        asked, engine = instance_token_requests(str(ROOT / "config/config.yaml"), args.questionnaire,
                                                ("vanilla", "stress", "neutral"), tokenizer, args.limit_stimuli)
        return tokenize_requests(tokenizer, [r.context for r in asked["LoglikRequest"]],
                                 [r.continuation for r in asked["LoglikRequest"]], engine["boundary"])

    def csi():
        asked, _ = instance_token_requests(str(ROOT / "config/implicit.yaml"), "csi", ("vanilla", "stress"),
                                           tokenizer, args.csi_stimuli)
        return tokenize_chains(tokenizer, asked["ChainRequest"][:args.csi_chains])

    def generation():
        stimulus = load_stimuli(ROOT / "resources/stimuli/stress.yaml").stimuli[0]
        questions = [q if k == 0 else f"{q} Answer in one paragraph." for k in range(2) for q in QUESTIONS]
        return [tuple(tokenizer(stimulus.long + "\n\n" + q)["input_ids"]) for q in questions[:max(args.counts)]]

    builders = {"likert": likert, "csi": csi, "generation": generation}
    return {name: builders[name]() for name in args.workloads}


def prompt_counts(text: str) -> list[int]:
    return [int(n) for n in text.split(",")]


def into_vocabulary(load: dict, vocab: int) -> dict:
    """The workloads' token ids taken modulo ``vocab`` (the shape's vocabulary)."""
    from qclm.engine.chains import TokenChain
    from qclm.engine.requests import Request

    def ids(seq) -> tuple[int, ...]:
        return tuple(int(t) % vocab for t in seq)

    convert = {"likert": lambda r: Request(ids(r.context), ids(r.continuation)),
               "csi": lambda c: TokenChain(ids(c.context), tuple((ids(t), tuple(ids(o) for o in opts))
                                                                 for t, opts in c.steps), c.raw),
               "generation": ids}
    return {name: [convert[name](x) for x in items] for name, items in load.items()}


# -- measuring --------------------------------------------------------------------------------------------------
def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Timed:
    """Seconds and peak device memory of one way (``with Timed(device) as t: ...``)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.seconds = 0.0
        self.peak_gib: float | None = None

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        synchronize(self.device)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        synchronize(self.device)
        self.seconds = time.perf_counter() - self.t0
        if self.device.type == "cuda":
            self.peak_gib = round(torch.cuda.max_memory_allocated(self.device) / 2**30, 2)


def matmul_peak_tflops(device: torch.device, dtype: torch.dtype, n: int) -> float:
    """The best rate of n x n matmuls in ``dtype`` on ``device`` now: the peak the engine's rate is a fraction of."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(10):
        with Timed(device) as t:
            for _ in range(4):
                a @ b
        best = min(best, t.seconds / 4)
    return 2 * n**3 / best / 1e12


def generate_flops(model, tokens: int, head_positions: int) -> int:
    """Batched ``generate``'s work: 2 x non-embedding parameters per token computed (padding included), the LM head
    at each new token (its attention left out, as the baselines' is: their fractions of the peak are lower bounds)."""
    head = model.get_output_embeddings().weight.numel()
    return 2 * non_embedding_parameters(model) * tokens + 2 * head * head_positions


def way(seconds: float, tokens: int, flops: int, peak: float, peak_gib, **extra) -> dict:
    return {"seconds": round(seconds, 3), "tokens": tokens, "tokens_per_second": round(tokens / seconds, 1),
            "tflops": round(flops / seconds / 1e12, 3), "fraction_of_peak": round(flops / seconds / 1e12 / peak, 3),
            "peak_gib": peak_gib, **extra}


def warm(scorer, run):
    """``scorer`` after ``run(scorer)`` (kernels, allocations, the LM head's once-per-model check), its counts
    reset: what is timed next is the workload alone."""
    with torch.inference_mode():
        run(scorer)
    return counted_afresh(scorer)


def counted_afresh(scorer):
    """``scorer`` with its counts (``Stats``) back at zero."""
    scorer.stats = type(scorer.stats)(method=scorer.stats.method)
    return scorer


def extrapolated(model, stats, timed: Timed, size: int, sampled: int, peak: float, **extra) -> dict:
    """A baseline timed on ``sampled`` of a workload's ``size`` requests (or chains), scaled to all of them."""
    scale = size / sampled
    return way(timed.seconds * scale, round(stats.tokens_computed * scale),
               round(engine_flops(model, stats)[1] * scale), peak, timed.peak_gib, sampled=sampled,
               extrapolated=sampled < size, **extra)


def run_likert(model, requests, args, device, peak) -> dict:
    from qclm.engine import FullSequenceScorer, PrefixTreeScorer

    engine = warm(PrefixTreeScorer(model), lambda e: e.score(requests[:8]))
    with Timed(device) as t:
        got, _ = engine.score_with_greedy(requests)
    rows = {"engine": way(t.seconds, engine.stats.tokens_computed, engine_flops(model, engine.stats)[1], peak,
                          t.peak_gib, requests=len(requests))}
    sample = sorted(random.Random(0).sample(range(len(requests)), min(args.sample, len(requests))))
    reference = warm(FullSequenceScorer(model, batch_size=1), lambda e: e.score(requests[:1]))
    with Timed(device) as t:
        want = reference.score([requests[i] for i in sample])
    rows["request by request"] = extrapolated(model, reference.stats, t, len(requests), len(sample), peak,
                                              requests=len(requests))
    return {"ways": rows, "max_abs_logprob_diff": max(float(np.max(np.abs(got[i] - w))) for i, w in zip(sample, want))}


def run_csi(model, chains, args, device, peak) -> dict:
    from qclm.engine import FullSequenceScorer, PrefixTreeScorer
    from qclm.engine.chains import chains_by_requests, run_chains

    engine = warm(PrefixTreeScorer(model), lambda e: run_chains(e, chains[:1]))
    with Timed(device) as t:
        got = run_chains(engine, chains)
    rows = {"engine": way(t.seconds, engine.stats.tokens_computed, engine_flops(model, engine.stats)[1], peak,
                          t.peak_gib, chains=len(chains), choices=sum(len(c.steps) for c in chains))}
    sample = sorted(random.Random(0).sample(range(len(chains)), min(max(1, args.sample // 16), len(chains))))
    reference = warm(FullSequenceScorer(model, batch_size=1), lambda e: chains_by_requests(e, chains[:1]))
    with Timed(device) as t:
        want = chains_by_requests(reference, [chains[i] for i in sample])
    rows["request by request"] = extrapolated(model, reference.stats, t, len(chains), len(sample), peak,
                                              chains=len(chains))
    diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for i, w in zip(sample, want) for g, r in zip(got[i], w)
               for a, b in zip(g.token_logprobs, r.token_logprobs))
    same = sum([s.argmax for s in got[i]] == [s.argmax for s in w] for i, w in zip(sample, want))
    return {"ways": rows, "max_abs_logprob_diff": diff, "same_choices": f"{same}/{len(sample)}"}


def run_generation(model, prompts, args, device, peak) -> dict:
    """The engine's greedy generation, with its default choice of a decode step's attention and with each way
    forced (qclm.engine.tree_attention: the union of keys, or each request's own path), beside batched generate;
    greedy outputs compared with batched generate's and with one prompt at a time on a few."""
    from qclm.engine import PrefixTreeScorer, tree_attention
    from qclm.engine.generation import eos_ids, run_generation as engine_generation
    from qclm.engine.requests import GenerationSettings

    stops = eos_ids(model, None)  # what generate stops at too (the model's generation config)
    eos = min(stops)  # and pads with
    settings = [GenerationSettings(max_new_tokens=args.new_tokens, greedy=True)] * len(prompts)

    def ours(engine, some=prompts) -> list[list[int]]:
        return [g.token_ids for g in engine_generation(engine, some, settings[:len(some)], [0] * len(some), stops,
                                                       lambda ids: "")]

    rows, outputs = {}, {}
    default = tree_attention.UNION_RATIO
    with torch.inference_mode():
        engine = warm(PrefixTreeScorer(model), lambda e: ours(e, prompts[:2]))
        hf_generate(model, prompts[:2], 2, eos)
        for label, ratio in (("engine", default), ("engine, union", 10**9), ("engine, own paths", 0)):
            tree_attention.UNION_RATIO = ratio
            try:
                with Timed(device) as t:
                    outputs[label] = ours(engine)
            finally:
                tree_attention.UNION_RATIO = default
            new = sum(map(len, outputs[label]))
            rows[label] = way(t.seconds, new, engine_flops(model, engine.stats)[1], peak, t.peak_gib,
                              new_tokens=new, prompt_tokens=sum(map(len, prompts)))
            counted_afresh(engine)
        with Timed(device) as t:
            batched = hf_generate(model, prompts, args.new_tokens, eos)
        width, steps = max(map(len, prompts)), max(map(len, batched))
        rows["batched generate"] = way(t.seconds, sum(map(len, batched)),
                                       generate_flops(model, len(prompts) * (width + steps - 1), len(prompts) * steps),
                                       peak, t.peak_gib, new_tokens=sum(map(len, batched)))
        one = [hf_generate(model, [prompts[i]], args.new_tokens, eos)[0]
               for i in range(min(args.sample // 16 or 1, len(prompts)))]
    for row in rows.values():  # new tokens per second, the figure generation is judged by
        row["tokens_per_second"] = round(row["new_tokens"] / row["seconds"], 1)
    got = outputs["engine"]
    return {"ways": rows, "prompts": len(prompts),
            "speed_over_batched_generate": {
                label: round(rows["batched generate"]["seconds"] / rows[label]["seconds"], 2) for label in outputs},
            "greedy_identical_to_batched": f"{sum(a == b for a, b in zip(got, batched))}/{len(prompts)}",
            "greedy_identical_to_one_at_a_time": f"{sum(a == b for a, b in zip(got, one))}/{len(one)}",
            "ways_identical": all(o == got for o in outputs.values())}


RUNNERS = {"likert": run_likert, "csi": run_csi, "generation": run_generation}


def measure(args) -> dict:
    from transformers import AutoTokenizer

    from qclm.engine.scorers import self_check_tolerance

    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    say("building the workloads from the repository's inputs")
    load = workloads(tokenizer, args)
    peak = matmul_peak_tflops(device, dtype, args.matmul)
    say(f"{args.dtype} matmul peak {peak:.1f} TFLOP/s")
    record = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "dtype": args.dtype, "torch": torch.__version__, "tiny": args.tiny, "matmul_peak_tflops": round(peak, 2),
              "workloads": {"likert": f"{args.questionnaire} of config/config.yaml, vanilla, stress, neutral"
                                      + (f", {args.limit_stimuli} stimuli each" if args.limit_stimuli else ""),
                            "csi": f"config/implicit.yaml csi, vanilla and {args.csi_stimuli} stress stimuli"
                                   + (f", the first {args.csi_chains} lists" if args.csi_chains else ""),
                            "generation": f"{args.prompts} prompts, {args.new_tokens} new tokens, greedy"},
              "shapes": {}}
    for name in args.shapes.split(","):
        config = shape_config(name, args.tiny)
        model = random_model(config, dtype, args.device)
        params = sum(p.numel() for p in model.parameters())
        shape = record["shapes"][name] = {"params_b": round(params / 1e9, 3),
                                          "self_check_tolerance": self_check_tolerance(model)}
        mine = into_vocabulary(load, config.vocab_size)
        for workload in args.workloads:
            for n in (args.counts if workload == "generation" else [None]):
                label = workload if n is None else f"{workload}-{n}"
                say(f"{name}: {label}")
                shape[label] = RUNNERS[workload](model, mine[workload][:n], args, device, peak)
                bench.write_json(args.json, record)  # so far: a run stopped at its time limit keeps what it measured
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return record


def table(record: dict) -> str:
    lines = [f"{record['device']}, {record['dtype']}, matmul peak {record['matmul_peak_tflops']} TFLOP/s",
             f"{'shape':12s}{'workload':15s}{'way':20s}{'seconds':>10s}{'tokens/s':>11s}{'TFLOP/s':>9s}"
             f"{'of peak':>9s}{'peak GiB':>9s}"]
    for name, shape in record["shapes"].items():
        for workload, result in shape.items():
            for label, row in (result.get("ways", {}) if isinstance(result, dict) else {}).items():
                mark = " (extrapolated)" if row.get("extrapolated") else ""
                lines.append(f"{name:12s}{workload:15s}{label:20s}{row['seconds']:10.2f}{row['tokens_per_second']:11.1f}"
                             f"{row['tflops']:9.2f}{row['fraction_of_peak']:9.3f}{str(row['peak_gib']):>9s}{mark}")
    return "\n".join(lines)


# -- the paper's 35 models from a record ------------------------------------------------------------------------
def project(record: dict, models_table: Path, gpus: int, questionnaires: int) -> dict:
    """Each paper model's scoring time: the Likert workload's engine seconds (one questionnaire, every condition
    and stimulus) on the measured shape nearest in parameters, scaled by the model's parameters over the shape's
    (the work is proportional to them), times ``questionnaires``; the total on one GPU, and on ``gpus`` GPUs as a
    SLURM run places them (longest first, each on the GPU free first). Weight loading is not included."""
    from qclm import settings
    from qclm.analysis.stats import size_class, size_class_labels
    from qclm.models.table import load_model_table

    shapes = {n: s for n, s in record["shapes"].items() if "likert" in s}
    rows = []
    for spec in load_model_table(models_table).values():
        params = float(spec.params_b)
        name = min(shapes, key=lambda n: abs(shapes[n]["params_b"] - params))
        per = shapes[name]["likert"]["ways"]["engine"]["seconds"] * params / shapes[name]["params_b"] * questionnaires
        rows.append({"model": spec.name, "params_b": params, "shape": name, "seconds": round(per, 1)})
    bounds = settings.defaults(settings.ANALYSIS)["size_classes"]
    classes = size_class(np.array([r["params_b"] for r in rows]), bounds)
    by_size = {label: {"models": int((classes == label).sum()),
                       "seconds_per_model": sorted(r["seconds"] for r, c in zip(rows, classes) if c == label),
                       "hours": round(sum(r["seconds"] for r, c in zip(rows, classes) if c == label) / 3600, 2)}
               for label in size_class_labels(bounds)}
    free = [0.0] * gpus
    for row in sorted(rows, key=lambda r: -r["seconds"]):
        k = free.index(min(free))
        free[k] += row["seconds"]
    return {"models": rows, "by_size": by_size, "one_gpu_hours": round(sum(r["seconds"] for r in rows) / 3600, 2),
            "gpus": gpus, "gpus_hours": round(max(free) / 3600, 2), "questionnaires": questionnaires,
            "from": f"{record['device']}, {record['dtype']}"}


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--shapes", default="llama-2-7b,mistral-7b,gemma-2-9b")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--tiny", action="store_true", help="each shape at a toy size (the CPU test)")
    ap.add_argument("--device", type=argtypes.device, default="auto", help="default: cuda where there is one")
    ap.add_argument("--dtype", choices=[d for d in DTYPES if d != "auto"], default=None,
                    help="default: bfloat16 on a GPU, float32 on the CPU")
    ap.add_argument("--tokenizer", default=str(cache.models_dir() / "smollm2-135m-instruct"),
                    help="a directory with a tokenizer (default: the prepared SmolLM2's)")
    ap.add_argument("--questionnaire", default="stai_s")
    ap.add_argument("--limit-stimuli", type=argtypes.positive_int, default=None,
                    help="stimuli per class in the Likert cells")
    ap.add_argument("--csi-stimuli", type=argtypes.positive_int, default=2)
    ap.add_argument("--csi-chains", type=argtypes.positive_int, default=None, help="the first N word lists only")
    ap.add_argument("--prompts", default="16,32,64", help="prompt counts of the generation workload")
    ap.add_argument("--new-tokens", type=argtypes.positive_int, default=128)
    ap.add_argument("--sample", type=argtypes.positive_int, default=64,
                    help="requests scored request by request (chains: 1/16)")
    ap.add_argument("--matmul", type=argtypes.positive_int, default=None,
                    help="size of the square matmuls of the measured peak (default 8192 on a GPU, 1024 on the CPU)")
    ap.add_argument("--project", default=None, metavar="RECORD", help="the paper's models from a record; no run")
    ap.add_argument("--models", default=str(ROOT / "config/models_paper.tsv"))
    ap.add_argument("--gpus", type=argtypes.positive_int, default=8)
    ap.add_argument("--questionnaires", type=argtypes.positive_int, default=2,
                    help="Likert questionnaires per model (the default run: 2)")
    args = ap.parse_args(argv)
    if args.project:
        out = project(json.loads(Path(args.project).read_text()), Path(args.models), args.gpus, args.questionnaires)
        print(json.dumps(out, indent=2))
        bench.write_json(args.json, out)
        return 0
    try:
        args.counts = prompt_counts(args.prompts)
    except ValueError:
        args.counts = []
    if not args.counts or not all(1 <= n <= 2 * len(QUESTIONS) for n in args.counts):
        ap.error(f"--prompts: counts from 1 to {2 * len(QUESTIONS)}, joined by commas, not {args.prompts!r}")
    known = sorted(p.stem for p in SHAPES.glob("*.json"))
    if not set(args.shapes.split(",")) <= set(known):
        ap.error(f"--shapes: some of {', '.join(known)} (benchmarks/shapes), joined by commas, not {args.shapes!r}")
    args.workloads = args.workloads.split(",")
    if not set(args.workloads) <= set(WORKLOADS):
        ap.error(f"--workloads: some of {', '.join(WORKLOADS)}, joined by commas, not {','.join(args.workloads)!r}")
    args.device = resolve_device(args.device)
    on_gpu = args.device.startswith("cuda")
    args.dtype = args.dtype or ("bfloat16" if on_gpu else "float32")
    args.matmul = args.matmul or (8192 if on_gpu else 1024)
    record = measure(args)
    print(json.dumps(record, indent=2))
    print(table(record), file=sys.stderr)
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
