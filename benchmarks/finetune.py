"""Benchmark: fine-tuning for the interventions and the calibration (issue 20, point 5; issue 35), full fine-tuning
and LoRA, each in random batches and in batches grouped by length (``group_by_length``), side by side on one model
and one corpus, the way the `finetune` rule runs them (qclm.interventions.finetune: the same loader, loss,
optimizer and checkpoint writing).

Per variant, interleaved round by round (best of ``--repeats``): seconds per epoch, the whole job (loading,
``--epochs`` epochs, one checkpoint), trainable parameters and the final mean loss; the ratios (full over LoRA,
random over grouped batches); and whether a second full fine-tuning with the same seed wrote the same tensors (the
determinism the tests check on a tiny model, here on the real one).

    PYTHONPATH=src .venv/bin/python benchmarks/finetune.py --model smollm2-135m-instruct \\
        --corpus resources/corpora/depressive.yaml --epochs 1 --json benchmarks/out/finetune-smollm2.json
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from qclm import bench

ROOT = Path(__file__).resolve().parents[1]


#: (method, group_by_length) of every variant, in the order each round runs them
VARIANTS = (("full", False), ("full", True), ("lora", False), ("lora", True))


def say(message: str) -> None:
    print(f"[finetune-bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}", file=sys.stderr,
          flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    bench.model_options(ap, ROOT)
    ap.add_argument("--corpus", default="resources/corpora/depressive.yaml")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    import torch
    from safetensors.torch import load_file

    from qclm import interventions as iv
    from qclm.corpus import load_corpus
    from qclm.interventions.finetune import finetune
    from qclm.models.loading import ensure_prepared
    from qclm.models.table import load_model_table

    torch.set_num_threads(args.threads)
    spec = load_model_table(args.models)[args.model]
    prepared = ensure_prepared(spec, Path(args.models_dir) / spec.name)
    corpus = load_corpus(args.corpus)
    rows: dict[str, dict] = {}
    saved: dict[str, list[Path]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeats):
            for method, grouped in VARIANTS:
                item = iv.Intervention(corpus.name, {**iv.defaults(), "corpus": args.corpus, "epochs": args.epochs,
                                                     "method": method, "group_by_length": grouped})
                method = f"{method}+grouped" if grouped else method
                out = Path(tmp) / f"{method}-{round_}"
                t0 = time.perf_counter()
                saved.setdefault(method, []).append(finetune(spec, prepared, corpus, item, out, "cpu")[-1])
                seconds = time.perf_counter() - t0
                job = json.loads((out / iv.JOB_MARKER).read_text())
                per_epoch = min(h["seconds"] for h in job["history"])
                row = rows.setdefault(method, {"job_seconds": [], "epoch_seconds": []})
                row["job_seconds"].append(round(seconds, 2))
                row["epoch_seconds"].append(per_epoch)
                row["loss"] = job["history"][-1]["loss"]
                row["trainable"] = json.loads((saved[method][-1] / iv.CHECKPOINT_MARKER).read_text())[
                    "trainable_parameters"]
                say(f"round {round_ + 1}, {method}: job {seconds:.1f} s, best epoch {per_epoch:.1f} s, "
                    f"loss {row['loss']:.4f}")
        same = None
        if len(saved["full"]) > 1:
            a, b = load_file(saved["full"][0] / "model.safetensors"), load_file(saved["full"][1] / "model.safetensors")
            same = all(bool((a[k] == b[k]).all()) for k in a)
    for row in rows.values():
        row["best_epoch_seconds"] = min(row["epoch_seconds"])
        row["best_job_seconds"] = min(row["job_seconds"])
    record = {"model": spec.name, "corpus": corpus.name, "texts": len(corpus.texts), "epochs": args.epochs,
              "threads": args.threads, "torch": torch.__version__, "load_at_end": round(os.getloadavg()[0], 2),
              "methods": rows,
              "epoch_full_over_lora": round(rows["full"]["best_epoch_seconds"] / rows["lora"]["best_epoch_seconds"], 2),
              **{f"epoch_{m}_random_over_grouped": round(rows[m]["best_epoch_seconds"]
                                                         / rows[f"{m}+grouped"]["best_epoch_seconds"], 2)
                 for m in ("full", "lora")},
              "same_seed_identical_full": same}
    print(json.dumps(record, indent=2))
    print(f"{'':14s}{'trainable':>12s}{'epoch s':>9s}{'job s':>8s}{'loss':>8s}", file=sys.stderr)
    for method, row in rows.items():
        print(f"{method:14s}{row['trainable']:12d}{row['best_epoch_seconds']:9.1f}{row['best_job_seconds']:8.1f}"
              f"{row['loss']:8.4f}", file=sys.stderr)
    print(f"full / LoRA per epoch: {record['epoch_full_over_lora']}x; random / grouped batches per epoch: full "
          f"{record['epoch_full_random_over_grouped']}x, LoRA {record['epoch_lora_random_over_grouped']}x; same seed, "
          f"same tensors (full): {same}", file=sys.stderr)
    bench.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
