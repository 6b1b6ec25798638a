"""benchmarks/gpu.py, the GPU benchmark, at its toy size on the CPU: every shape (Llama-2's, Mistral's windows,
Gemma 2's soft-capping) and every workload runs, the engine agrees with transformers, and the paper models' table
comes out of its record. The 7B figures themselves need a GPU (docs/scaling.md)."""

from __future__ import annotations

import json

import pytest

from benchmarks import gpu


def test_the_gpu_benchmark_runs_tiny_on_the_cpu_and_agrees_with_transformers(tmp_path, smollm2_tokenizer_dir):
    out = tmp_path / "gpu.json"
    assert gpu.main(["--tiny", "--device", "cpu", "--tokenizer", str(smollm2_tokenizer_dir), "--limit-stimuli", "1",
                     "--csi-stimuli", "1", "--csi-chains", "8", "--prompts", "2,4", "--new-tokens", "8",
                     "--sample", "16", "--matmul", "256", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["dtype"] == "float32" and 0 < record["matmul_peak_tflops"]
    assert set(record["shapes"]) == {"llama-2-7b", "mistral-7b", "gemma-2-9b"}
    for name, shape in record["shapes"].items():
        likert, csi, generation = shape["likert"], shape["csi"], shape["generation-4"]
        assert shape["generation-2"]["prompts"] == 2 and generation["prompts"] == 4
        # the engine's numbers are transformers' own, request by request, within its self-check tolerance
        assert likert["max_abs_logprob_diff"] <= shape["self_check_tolerance"], name
        assert csi["max_abs_logprob_diff"] <= shape["self_check_tolerance"] and csi["same_choices"] == "1/1", name
        assert generation["greedy_identical_to_batched"] == "4/4", name
        assert generation["greedy_identical_to_one_at_a_time"] == "1/1", name
        # the two ways a decode step attends, each forced, give the same tokens as the default
        assert generation["ways_identical"] and set(generation["speed_over_batched_generate"]) == {
            "engine", "engine, union", "engine, own paths"}, name
        # the baseline ran on a sample and says so; the engine ran the whole workload
        by_request = likert["ways"]["request by request"]
        assert by_request["extrapolated"] and by_request["sampled"] == 16 < by_request["requests"], name
        assert likert["ways"]["engine"]["requests"] == by_request["requests"], name
        for workload in (likert, csi, generation):
            for label, row in workload["ways"].items():
                assert row["seconds"] > 0 and row["tokens"] > 0 and 0 < row["fraction_of_peak"], (name, label)
                assert row["peak_gib"] is None, (name, label)  # the CPU has no device memory to report
        assert generation["ways"]["engine"]["new_tokens"] == generation["ways"]["batched generate"]["new_tokens"]
        assert shape["generation-2"]["ways"]["engine"]["new_tokens"] < generation["ways"]["engine"]["new_tokens"]

    projected = tmp_path / "paper.json"
    assert gpu.main(["--project", str(out), "--gpus", "4", "--json", str(projected)]) == 0
    table = json.loads(projected.read_text())
    assert len(table["models"]) == 35
    assert {k: v["models"] for k, v in table["by_size"].items()} == {"<3B": 11, "3-8B": 14, ">=8B": 10}
    assert table["one_gpu_hours"] / 4 <= table["gpus_hours"] < table["one_gpu_hours"]
    # each model from the shape nearest in parameters, in proportion to its own, for two questionnaires
    for row in table["models"]:
        shape = record["shapes"][row["shape"]]
        assert all(abs(shape["params_b"] - row["params_b"]) <= abs(s["params_b"] - row["params_b"])
                   for s in record["shapes"].values())
        want = shape["likert"]["ways"]["engine"]["seconds"] * row["params_b"] / shape["params_b"] * 2
        assert abs(row["seconds"] - want) <= 0.05 + 1e-9 * want, row


@pytest.mark.parametrize("option", [["--prompts", "0"], ["--prompts", "16,x"], ["--workloads", "likert,nope"],
                                    ["--sample", "0"], ["--new-tokens", "-1"], ["--gpus", "0"], ["--dtype", "float8"],
                                    ["--device", "gpu"], ["--shapes", "llama-2-7b,llama-70b"]])
def test_the_gpu_benchmark_refuses_a_bad_option_before_any_work(option, capsys):
    with pytest.raises(SystemExit) as exit_:
        gpu.main(["--tiny", "--device", "cpu", *option])
    assert exit_.value.code == 2 and option[0] in capsys.readouterr().err


def test_a_gpu_benchmark_run_stopped_midway_keeps_what_it_measured(tmp_path, smollm2_tokenizer_dir, monkeypatch):
    """The record is written after each workload: a device call stopped at its time limit (here: the second workload
    fails) still brings back the first."""
    def stopped(*args, **kwargs):
        raise KeyboardInterrupt("the time limit")

    monkeypatch.setitem(gpu.RUNNERS, "generation", stopped)
    out = tmp_path / "gpu.json"
    with pytest.raises(KeyboardInterrupt):
        gpu.main(["--tiny", "--device", "cpu", "--tokenizer", str(smollm2_tokenizer_dir), "--shapes", "llama-2-7b",
                  "--workloads", "csi,generation", "--csi-stimuli", "1", "--csi-chains", "2", "--prompts", "2",
                  "--sample", "16", "--json", str(out)])
    shape = json.loads(out.read_text())["shapes"]["llama-2-7b"]
    assert shape["csi"]["same_choices"] == "1/1" and "generation-2" not in shape
