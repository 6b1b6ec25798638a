"""Benchmark: generation through the engine side by side with transformers' ``generate``, in one run on one model.

The prompts: N chat prompts sharing a stimulus (the long text of one stress stimulus, then one of N questions
written for this benchmark), greedy, ``--new-tokens`` new tokens (end of sequence stops a request earlier). Three
ways, the same prompts:

- ``hf one by one``: ``model.generate(do_sample=False)`` one prompt at a time (no padding);
- ``hf batched``: ``model.generate`` on all prompts at once, left-padded (transformers' batched generation);
- ``engine``: ``LocalBackend.generate`` (qclm.engine.generation): the prompts' shared prefix computed once in a
  tree session, each prompt's own tokens once, then one forward per step for every request still running, each
  new token attending to the prefix (held once) and to its own request's tokens (qclm.engine.tree_attention,
  ``per_query``: the union of keys in one call, or each request's own path gathered).

Reports generated tokens per second for each (best of ``--repeats``, the ways interleaved round by round so a busy
spell of the shared machine hits all of them alike), the ratios, and whether the greedy outputs are identical to
``hf one by one`` (token for token, end-of-sequence token included). Then where the time goes: each batched way's
prompt pass alone (one new token), its decode time per step, and the floor of a step: one forward of a token per
prompt without any cache (the model's own layers and LM head, no attention over a prefix), and so the most any
decoder built on the model's own modules could gain over batched generate here (every step at that floor, the
engine's prompt pass kept). ``--sampled`` also times the engine sampling
(temperature 0.7, top-k 50, top-p 0.95; one generator per request). Prints a table and one JSON record (also
written with --json FILE).

    .venv/bin/python benchmarks/generation.py --prompts 16 --json benchmarks/out/generation-smollm2.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

from qclm import bench
from qclm.engine.backend import LocalBackend
from qclm.engine.requests import GenerateRequest, GenerationSettings, derive_seed
from qclm.models.loading import ensure_prepared, load_model
from qclm.models.table import load_model_table
from qclm.stimuli import load_stimuli

ROOT = Path(__file__).resolve().parents[1]

#: questions written for this benchmark
QUESTIONS = (
    "How do you feel right now, in a few sentences?", "What would you do in the next hour?",
    "Who would you call first, and why?", "What are you most afraid of at this moment?",
    "Describe your body's reactions.", "What would help you calm down?", "What would you tell a friend in this "
    "situation?", "How will tomorrow morning look?", "What thoughts keep coming back?",
    "Which details of the day do you remember most clearly?", "What do you need from the people around you?",
    "How likely is it that things turn out well?", "What would you like to ask the doctor?",
    "Write a short diary entry about this day.", "What is the first thing you did when you got home?",
    "How would you describe this day in three words?", "What could you do to sleep tonight?",
    "What do you regret not asking?", "How are the people close to you affected?", "What gives you hope?",
    "Which sounds do you remember from that moment?", "What would you change about how you reacted?",
    "How do you explain this to a child?", "What plans do you cancel now?", "What do you want to happen next week?",
    "Where would you rather be right now?", "What are you grateful for today?", "What does the silence feel like?",
    "What is the hardest part of waiting?", "How has your view of the future changed?",
    "What would you write in a message to yourself a year from now?", "What do you do with your hands?",
)


def say(message: str) -> None:
    print(f"[generation-bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}",
          file=sys.stderr, flush=True)


def hf_one_by_one(model, tok, prompts: list[str], new_tokens: int) -> list[list[int]]:
    out = []
    for p in prompts:
        enc = tok(p, return_tensors="pt").to(model.device)
        ids = model.generate(**enc, do_sample=False, max_new_tokens=new_tokens)[0, enc.input_ids.shape[1]:]
        out.append(_until_eos(ids.tolist(), model))
    return out


def hf_batched(model, tok, prompts: list[str], new_tokens: int) -> list[list[int]]:
    return hf_generate(model, [tok(p)["input_ids"] for p in prompts], new_tokens, tok.pad_token_id)


def hf_generate(model, prompts: list, new_tokens: int, pad: int) -> list[list[int]]:
    """transformers' batched greedy ``generate`` on token ids, left-padded with ``pad``: each prompt's new tokens up
    to and with the first end of sequence (the model's generation config)."""
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad, dtype=torch.long, device=model.device)
    mask = torch.zeros((len(prompts), width), dtype=torch.long, device=model.device)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(list(p), device=model.device)
        mask[i, width - len(p):] = 1
    out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens,
                         pad_token_id=pad)[:, width:]
    return [_until_eos(row.tolist(), model) for row in out]


def _until_eos(ids: list[int], model) -> list[int]:
    """The new tokens up to and with the first end-of-sequence token (batched generation pads after it)."""
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    for k, t in enumerate(ids):
        if t in eos:
            return ids[:k + 1]
    return ids


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    bench.model_options(ap, ROOT)
    ap.add_argument("--stimuli", default=str(ROOT / "resources/stimuli/stress.yaml"))
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--sampled", action="store_true", help="also time the engine sampling")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default cpu)")
    ap.add_argument("--random-init", default=None, metavar="DIR",
                    help="a directory with a model's config.json and tokenizer: the model with random weights "
                         "(seed 0) in float32, for a machine without the weights (speed and the greedy identity "
                         "do not depend on the weights' values)")
    args = ap.parse_args(argv)
    if not 1 <= args.prompts <= len(QUESTIONS):
        ap.error(f"--prompts must be 1 to {len(QUESTIONS)}")

    torch.set_num_threads(args.threads)
    if args.random_init:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(0)
        config = AutoConfig.from_pretrained(args.random_init)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).to(args.device).eval()
        tok = AutoTokenizer.from_pretrained(args.random_init)
        name, dtype = f"{Path(args.random_init).name} (random weights)", "float32"
    else:
        spec = load_model_table(args.models)[args.model]
        model, tok, prov = load_model(spec, ensure_prepared(spec, Path(args.models_dir) / spec.name), args.device)
        name, dtype = spec.name, prov["dtype"]
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    stimulus = load_stimuli(args.stimuli).stimuli[0]
    users = [stimulus.long + "\n\n" + q for q in QUESTIONS[:args.prompts]]
    if getattr(tok, "chat_template", None):
        prompts = [tok.apply_chat_template([{"role": "user", "content": u}], tokenize=False,
                                           add_generation_prompt=True) for u in users]
    else:
        prompts = users
    greedy = GenerationSettings(max_new_tokens=args.new_tokens, greedy=True)
    sampled = GenerationSettings(max_new_tokens=args.new_tokens, temperature=0.7, top_k=50, top_p=0.95)
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})

    def engine(settings):
        reqs = [GenerateRequest(p, derive_seed("generation-bench", i), settings) for i, p in enumerate(prompts)]
        return [list(g.token_ids) for g in backend.generate(reqs)]

    ways = {"hf one by one": lambda: hf_one_by_one(model, tok, prompts, args.new_tokens),
            "hf batched": lambda: hf_batched(model, tok, prompts, args.new_tokens),
            "engine": lambda: engine(greedy)}
    if args.sampled:
        ways["engine sampled"] = lambda: engine(sampled)
    with torch.inference_mode():
        hf_one_by_one(model, tok, prompts[:1], 4)  # warm up (allocator, the once-per-model head check)
        engine(GenerationSettings(max_new_tokens=4, greedy=True))
        rows: dict[str, dict] = {}
        outputs = {}
        for round_ in range(args.repeats):
            for label, run in ways.items():
                before = backend.stats.tokens_computed
                t0 = time.perf_counter()
                outputs[label] = run()
                seconds = time.perf_counter() - t0
                row = rows.setdefault(label, {"all": []})
                row["all"].append(round(seconds, 3))
                row["seconds"] = min(row["all"])
                row["new_tokens"] = sum(map(len, outputs[label]))
                row["tokens_per_second"] = round(row["new_tokens"] / row["seconds"], 1)
                if label.startswith("engine"):
                    row["tokens_computed"] = backend.stats.tokens_computed - before
            say(f"round {round_ + 1}: " + ", ".join(f"{k} {v['all'][-1]:.2f} s" for k, v in rows.items()))
        # where the time goes: each way's prompt pass alone (one new token), and the floor of a decode step, a
        # forward of one token per prompt without any cache (the model's own layers and LM head, no attention over a
        # prefix): the most any decoder built on the model's own modules can gain over batched generate
        one = GenerationSettings(max_new_tokens=1, greedy=True)
        ids = torch.tensor([[t[0] for t in (tok(p)["input_ids"] for p in prompts)]], device=model.device)
        split = {"engine prompt pass": lambda: engine(one),
                 "hf batched prompt pass": lambda: hf_batched(model, tok, prompts, 1),
                 "decode step floor": lambda: model(input_ids=ids, logits_to_keep=ids.shape[1])}
        passes = {label: bench.best_seconds(run, args.repeats)[0] for label, run in split.items()}
    steps = max(map(len, outputs["engine"])) - 1
    floor = passes["engine prompt pass"] + steps * passes["decode step floor"]
    reference = outputs["hf one by one"]
    prompt_ids = [tok(p)["input_ids"] for p in prompts]
    record = {
        "model": name, "dtype": dtype, "threads": args.threads,
        "device": torch.cuda.get_device_name(model.device) if model.device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "prompts": args.prompts, "max_new_tokens": args.new_tokens, "stimulus": stimulus.id,
        "prompt_tokens": sum(map(len, prompt_ids)),
        "ways": rows,
        "speed_over_hf_one_by_one": {k: round(v["tokens_per_second"] / rows["hf one by one"]["tokens_per_second"], 2)
                                     for k, v in rows.items()},
        "speed_over_hf_batched": {k: round(v["tokens_per_second"] / rows["hf batched"]["tokens_per_second"], 2)
                                  for k, v in rows.items()},
        "greedy_identical_to_hf_one_by_one": {k: outputs[k] == reference for k in ("hf batched", "engine")},
        "greedy_requests_identical_to_hf_one_by_one": {
            k: sum(a == b for a, b in zip(outputs[k], reference)) for k in ("hf batched", "engine")},
        "engine_text_0": tok.decode(outputs["engine"][0]),
        "where_the_time_goes": {
            "prompt_pass_seconds": {k.removesuffix(" prompt pass"): round(v, 3) for k, v in passes.items()
                                    if k.endswith("prompt pass")},
            "decode_ms_per_step": {
                "engine": round(1000 * (rows["engine"]["seconds"] - passes["engine prompt pass"]) / steps, 1),
                "hf batched": round(1000 * (rows["hf batched"]["seconds"] - passes["hf batched prompt pass"]) / steps,
                                    1),
                "floor": round(1000 * passes["decode step floor"], 1)},
            "engine_at_the_floor_over_hf_batched": round(rows["hf batched"]["seconds"] / floor, 2),
        },
    }
    print(json.dumps(record, indent=2))
    lines = [f"{'':16s}{'new tokens':>11s}{'seconds':>9s}{'tokens/s':>10s}{'x hf 1by1':>10s}{'x hf batch':>11s}"
             f"{'greedy = hf 1by1':>18s}"]
    for k, v in rows.items():
        same = record["greedy_requests_identical_to_hf_one_by_one"].get(k)
        lines.append(f"{k:16s}{v['new_tokens']:11d}{v['seconds']:9.2f}{v['tokens_per_second']:10.1f}"
                     f"{record['speed_over_hf_one_by_one'][k]:10.2f}{record['speed_over_hf_batched'][k]:11.2f}"
                     f"{'' if same is None else f'{same}/{args.prompts}':>18s}")
    where = record["where_the_time_goes"]
    lines.append(f"prompt pass (s): {where['prompt_pass_seconds']}; decode ms/step: {where['decode_ms_per_step']}; "
                 f"the engine with every step at the floor: {where['engine_at_the_floor_over_hf_batched']}x hf batched")
    print("\n".join(lines), file=sys.stderr)
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
