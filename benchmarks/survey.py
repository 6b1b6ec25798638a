"""Benchmark: the survey probe's generations (issue 19, point 8) three ways, side by side in one run on one model.

The requests are the survey kind's own (qclm.probes.survey: the first ``--items`` items of an instrument, every
prompt variant, both option orders, ``--seeds`` seeds; R.U.Psycho's sampling settings, 64 new tokens), under
vanilla, in the model's chat format:

- ``engine, one call``: ``LocalBackend.generate`` on all of them at once, as the scoring job calls it (the prompts'
  shared prefix, the chat header and the instruction, computed once; one forward per step for every request
  still running);
- ``engine, per response``: the same engine, one ``generate`` call per request (the same draws: the text must be
  identical, which the benchmark checks);
- ``transformers, per response``: ``model.generate(do_sample=True)`` with the same temperature, top-k, top-p and
  token limit, one prompt at a time, seeded with ``torch.manual_seed`` (other draws, so other text and lengths:
  compare tokens per second).

Prints new tokens, seconds, tokens per second and each way's speed over ``engine, per response`` and over
``transformers, per response`` (best of ``--repeats``, the ways interleaved round by round so a busy spell of the
shared machine hits all of them alike), and one JSON record (also written with --json FILE). ``--threads 1,2``
runs every way at each thread count (torch.set_num_threads), the first count's being the reference of the ratios.

    .venv/bin/python benchmarks/survey.py --items 2 --threads 1,2 --json benchmarks/out/survey-smollm2.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

from qclm import bench
from qclm.contexts import Context, ContextSettings
from qclm.engine.backend import LocalBackend
from qclm.experiment import VANILLA
from qclm.models.loading import ensure_prepared, load_model
from qclm.models.table import load_model_table
from qclm.probes.base import Asking, Instance
from qclm.probes.survey.kind import SurveyProbe, generation_settings
from qclm.prompts import PromptBuilder, PromptFormat

ROOT = Path(__file__).resolve().parents[1]


def say(message: str) -> None:
    print(f"[survey-bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}", file=sys.stderr,
          flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    bench.model_options(ap, ROOT, "config/models_survey.tsv", help="a chat-format row of --models")
    ap.add_argument("--instrument", default=str(ROOT / "resources/questionnaires/gad7.yaml"))
    ap.add_argument("--items", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", default="2", help="CPU thread counts, comma-separated (each way runs at each)")
    args = ap.parse_args(argv)

    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    spec = load_model_table(args.models)[args.model]
    model, tok, prov = load_model(spec, ensure_prepared(spec, Path(args.models_dir) / spec.name), "cpu")
    prompts = PromptBuilder(tok, PromptFormat.from_settings(spec.prompt_format, {}))
    settings = {**SurveyProbe.defaults(), "instrument": args.instrument, "seeds": list(range(args.seeds))}
    probe = SurveyProbe(Instance("survey", "survey", settings))
    labelled = probe.requests(Context(VANILLA), prompts,
                              Asking(spec.name, run=ContextSettings(limit_items=args.items)))
    requests = [r.request for r in labelled if r.key["request"] == "generate"]
    gen = generation_settings(settings)
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    eos = model.generation_config.eos_token_id

    def engine_one_call():
        return [list(g.token_ids) for g in backend.generate(requests)]

    def engine_per_response():
        return [list(backend.generate([r])[0].token_ids) for r in requests]

    def transformers_per_response():
        out = []
        for r in requests:
            torch.manual_seed(r.seed)
            enc = tok(r.context, return_tensors="pt")
            ids = model.generate(**enc, do_sample=True, temperature=gen["temperature"], top_k=gen["top_k"],
                                 top_p=gen["top_p"], max_new_tokens=gen["max_new_tokens"],
                                 pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else eos)
            out.append(ids[0, enc.input_ids.shape[1]:].tolist())
        return out

    base = {"engine, one call": engine_one_call, "engine, per response": engine_per_response,
            "transformers, per response": transformers_per_response}

    def at(n, run):
        def run_at():
            torch.set_num_threads(n)
            return run()
        return run_at

    ways = {(k if len(threads) == 1 else f"{k} @{n}"): at(n, run) for n in threads for k, run in base.items()}
    first = "" if len(threads) == 1 else f" @{threads[0]}"
    rows: dict[str, dict] = {}
    outputs: dict[str, list] = {}
    with torch.inference_mode():
        torch.set_num_threads(threads[0])
        backend.generate(requests[:1])  # warm up (allocator, the once-per-model head check)
        for round_ in range(args.repeats):
            for label, run in ways.items():
                t0 = time.perf_counter()
                outputs[label] = run()
                seconds = time.perf_counter() - t0
                row = rows.setdefault(label, {"all": []})
                row["all"].append(round(seconds, 2))
                row["seconds"] = min(row["all"])
                row["new_tokens"] = sum(map(len, outputs[label]))
                row["tokens_per_second"] = round(row["new_tokens"] / row["seconds"], 2)
            say(f"round {round_ + 1}: " + ", ".join(f"{k} {v['all'][-1]:.1f} s" for k, v in rows.items()))
    record = {
        "model": spec.name, "prompt_format": spec.prompt_format, "dtype": prov["dtype"], "threads": threads,
        "torch": torch.__version__, "instrument": probe.instrument.id, "items": args.items, "requests": len(requests),
        "generation": gen, "load_at_end": round(os.getloadavg()[0], 2), "ways": rows,
        "speed_over_engine_per_response": {k: round(v["tokens_per_second"]
                                                    / rows[f"engine, per response{first}"]["tokens_per_second"], 2)
                                           for k, v in rows.items()},
        "speed_over_transformers_per_response": {k: round(
            v["tokens_per_second"] / rows[f"transformers, per response{first}"]["tokens_per_second"], 2)
                                                 for k, v in rows.items()},
        "engine_text_identical_one_call_vs_per_response": all(
            outputs[k] == outputs[f"engine, one call{first}"] for k in outputs if k.startswith("engine")),
    }
    print(json.dumps(record, indent=2))
    lines = [f"{'':32s}{'new tokens':>11s}{'seconds':>9s}{'tokens/s':>10s}{'x engine 1/resp':>16s}{'x hf 1/resp':>12s}"]
    for k, v in rows.items():
        lines.append(f"{k:32s}{v['new_tokens']:11d}{v['seconds']:9.1f}{v['tokens_per_second']:10.2f}"
                     f"{record['speed_over_engine_per_response'][k]:16.2f}"
                     f"{record['speed_over_transformers_per_response'][k]:12.2f}")
    lines.append(f"engine text identical (one call vs per response, every thread count): "
                 f"{record['engine_text_identical_one_call_vs_per_response']}")
    print("\n".join(lines), file=sys.stderr)
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
