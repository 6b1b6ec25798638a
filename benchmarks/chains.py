"""Benchmark: chains of forced choices (the Core-Sentiment-Inventory probe's list mode) through a tree session,
side by side with scoring each position as an independent prompt, in one run on the same model.

N lists (the same 30 words in N orders), each a chat prompt with the instruction (shared by all lists) and its
list; the answer is built line by line, "word: label", each label the forced choice among three at that point,
the chosen one appended before the next word. Two ways, the same choices:

- ``chain``: ``run_chains`` (qclm.engine.chains): every list is a path in one tree session; the shared instruction
  is computed once, each list's prompt once, each step adds only its new tokens (one forward per step for all
  lists);
- ``independent``: ``chains_by_requests`` with the engine's ``PrefixTreeScorer``: every position is its own
  request (the list's prompt + the answers so far + "word:", option), one scoring call per position (the answers
  so far are known only then); the instruction is shared within a call, each list's prompt and answers are
  computed again at every position;
- ``--naive``: the same with full sequences (``FullSequenceScorer``), every option its own padded sequence.

Timings are the best of ``--repeats`` runs, the settings interleaved round by round (a busy spell of the shared
machine hits all of them alike). Prints a table and one JSON record (also written with --json FILE).

    .venv/bin/python benchmarks/chains.py --lists 8 --json benchmarks/out/chains-smollm2.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from qclm import bench
from qclm.engine import FullSequenceScorer, PrefixTreeScorer
from qclm.engine.chains import chains_by_requests, run_chains, tokenize_chains
from qclm.engine.requests import ChainRequest, ChainStep
from qclm.models.loading import ensure_prepared, load_model
from qclm.models.table import load_model_table

ROOT = Path(__file__).resolve().parents[1]

#: 30 everyday words, written for this benchmark
WORDS = ("apple", "storm", "friend", "debt", "music", "funeral", "holiday", "exam", "garden", "traffic",
         "birthday", "illness", "sunrise", "argument", "coffee", "deadline", "puppy", "accident", "library",
         "hospital", "wedding", "taxes", "beach", "injury", "chocolate", "divorce", "laughter", "noise", "gift",
         "failure")
LABELS = (" positive", " negative", " neutral")
INSTRUCTION = ("For each word below, say whether it feels positive, negative or neutral to you. Answer with one "
               "line per word, in the order given, written as 'word: label'.\n\nWords: ")


def say(message: str) -> None:
    print(f"[chains-bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}", file=sys.stderr,
          flush=True)


def requests(tok, n_lists: int, n_words: int) -> list[ChainRequest]:
    out = []
    rng = np.random.default_rng(0)
    for k in range(n_lists):
        words = list(WORDS[:n_words]) if k == 0 else list(rng.permutation(WORDS[:n_words]))
        user = INSTRUCTION + ", ".join(words)
        if getattr(tok, "chat_template", None):
            prompt = tok.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                             add_generation_prompt=True)
        else:
            prompt = user + "\n\nAnswers:\n"
        steps = tuple(ChainStep(("" if s == 0 else "\n") + w + ":", LABELS) for s, w in enumerate(words))
        out.append(ChainRequest(prompt, steps))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    bench.model_options(ap, ROOT)
    ap.add_argument("--lists", type=int, default=8)
    ap.add_argument("--words", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--naive", action="store_true", help="also full sequences, every option its own sequence")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    spec = load_model_table(args.models)[args.model]
    model, tok, prov = load_model(spec, ensure_prepared(spec, Path(args.models_dir) / spec.name), "cpu")
    chains = tokenize_chains(tok, requests(tok, args.lists, args.words))
    settings = {"chain": lambda s: run_chains(s, chains),
                "independent": lambda s: chains_by_requests(s, chains)}
    makers = {"chain": lambda: PrefixTreeScorer(model), "independent": lambda: PrefixTreeScorer(model)}
    if args.naive:
        settings["naive"] = lambda s: chains_by_requests(s, chains)
        makers["naive"] = lambda: FullSequenceScorer(model, 16)
    run_chains(PrefixTreeScorer(model), chains[:1])  # warm up (allocator, the once-per-model head check)
    rows: dict[str, dict] = {}
    results = {}
    for round_ in range(args.repeats):
        for label, run in settings.items():
            scorer = makers[label]()
            t0 = time.perf_counter()
            results[label] = run(scorer)
            seconds = time.perf_counter() - t0
            row = rows.setdefault(label, {"all": []})
            row["all"].append(round(seconds, 3))
            row.update({"seconds": min(row["all"]), "tokens": scorer.stats.tokens_computed,
                        "forward_calls": scorer.stats.forward_calls})
        say(f"round {round_ + 1}: " + ", ".join(f"{k} {v['all'][-1]:.2f} s" for k, v in rows.items()))

    def flat(res):
        return np.concatenate([np.concatenate([np.concatenate(s.token_logprobs) for s in c]) for c in res])

    choices = {k: [[s.argmax for s in c] for c in v] for k, v in results.items()}
    prompt_tokens = [len(c.context) for c in chains]
    record = {
        "model": spec.name, "dtype": prov["dtype"], "threads": args.threads, "torch": torch.__version__,
        "lists": args.lists, "words": args.words, "options": len(LABELS),
        "prompt_tokens_min_max": [min(prompt_tokens), max(prompt_tokens)],
        "answer_tokens_per_list": sum(len(t) + len(o[0]) for t, o in chains[0].steps),
        "settings": rows,
        "speedup_tokens": {k: round(v["tokens"] / rows["chain"]["tokens"], 1) for k, v in rows.items()},
        "speedup_seconds": {k: round(v["seconds"] / rows["chain"]["seconds"], 1) for k, v in rows.items()},
        "same_choices": {k: v == choices["chain"] for k, v in choices.items()},
        "max_abs_logprob_diff_vs_chain": {k: float(np.max(np.abs(flat(v) - flat(results["chain"]))))
                                          for k, v in results.items() if choices[k] == choices["chain"]},
        "label_shares_chain": [round(float(np.mean([a == j for c in choices["chain"] for a in c])), 3)
                               for j in range(len(LABELS))],
    }
    print(json.dumps(record, indent=2))
    lines = [f"{'':14s}{'tokens':>10s}{'x chain':>9s}{'seconds':>10s}{'x chain':>9s}{'forwards':>10s}"]
    for k, v in rows.items():
        lines.append(f"{k:14s}{v['tokens']:10d}{record['speedup_tokens'][k]:9.1f}{v['seconds']:10.2f}"
                     f"{record['speedup_seconds'][k]:9.1f}{v['forward_calls']:10d}")
    print("\n".join(lines), file=sys.stderr)
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
