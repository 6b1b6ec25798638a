"""What ``dtype: auto`` loads (config/README.md, dtype column): float32 where the float32 weights fit
the GPU with the working margin (the reference implementation loads without a dtype, i.e. float32),
else bfloat16 or float16; float32 off the GPU; explicit dtypes as given. No GPU needed."""

import logging
from types import SimpleNamespace

import pytest
import torch

from qclm.models.loading import AUTO_FLOAT32_MARGIN, AUTO_FLOAT32_RESERVE_BYTES, FLOAT32_BYTES, choose_auto_dtype, resolve_dtype

GIB = 2**30


def _need(params_b: float) -> float:
    return params_b * 1e9 * FLOAT32_BYTES * (1 + AUTO_FLOAT32_MARGIN) + AUTO_FLOAT32_RESERVE_BYTES


def test_off_the_gpu_auto_is_float32_whatever_the_size():
    assert choose_auto_dtype(70.0, None, True)[0] == "float32"
    assert choose_auto_dtype(None, None, False)[0] == "float32"


@pytest.mark.parametrize("params_b", [0.135, 8.03, 15.7])
def test_float32_exactly_when_weights_and_margin_fit(params_b):
    need = _need(params_b)
    assert choose_auto_dtype(params_b, int(need) + 1, True)[0] == "float32"
    dtype, reason = choose_auto_dtype(params_b, int(need) - 1, True)
    assert dtype == "bfloat16" and "exceed" in reason
    assert choose_auto_dtype(params_b, int(need) - 1, False)[0] == "float16"


def test_the_rule_on_gpu_sizes():
    # 15.7B (DeepSeek-V2-Lite): 58.5 GiB of float32 weights + 25% + 2 GiB = 75.1 GiB
    assert choose_auto_dtype(15.7, 80 * GIB, True)[0] == "float32"
    assert choose_auto_dtype(15.7, 40 * GIB, True)[0] == "bfloat16"
    assert choose_auto_dtype(8.03, 24 * GIB, True)[0] == "bfloat16"
    assert choose_auto_dtype(3.82, 24 * GIB, True)[0] == "float32"
    dtype, reason = choose_auto_dtype(15.7, 80 * GIB, True)
    assert reason == "float32 weights 58.5 GiB + 25% + 2 GiB = 75.1 GiB fit the GPU's 80.0 GiB"


def test_unknown_size_on_the_gpu_is_half_precision():
    assert choose_auto_dtype(None, 80 * GIB, True)[0] == "bfloat16"
    assert choose_auto_dtype(float("nan"), 80 * GIB, False)[0] == "float16"


def test_resolve_dtype_explicit_and_cpu():
    assert resolve_dtype("auto", "cpu", 15.7) is torch.float32
    assert resolve_dtype("bfloat16", "cpu", 0.1) is torch.bfloat16
    assert resolve_dtype("float32", "cuda", 70.0) is torch.float32  # explicit: no memory check


def test_resolve_dtype_auto_on_a_gpu_reads_its_total_memory_and_logs_why(monkeypatch, caplog):
    seen = []

    def props(device):
        seen.append(device)
        return SimpleNamespace(total_memory=24 * GIB)

    monkeypatch.setattr(torch.cuda, "get_device_properties", props)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    with caplog.at_level(logging.INFO, logger="qclm.models"):
        assert resolve_dtype("auto", "cuda:1", 3.82, model="phi-3-mini") is torch.float32
        assert resolve_dtype("auto", "cuda:1", 8.03, model="llama-3.1-8b") is torch.bfloat16
        assert resolve_dtype("auto", "cuda:1", 0.5, quantized=True, model="q") is torch.bfloat16
    assert seen == ["cuda:1", "cuda:1"]  # a quantized model computes in half precision, no memory check
    assert "model phi-3-mini: dtype auto -> float32 (float32 weights 14.2 GiB + 25% + 2 GiB" in caplog.text
    assert "model llama-3.1-8b: dtype auto -> bfloat16 (float32 weights 29.9 GiB" in caplog.text
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_dtype("auto", "cuda", 8.03) is torch.float16
