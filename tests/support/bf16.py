"""The one skip for tests that force bf16 on the CPU: ``needs_cpu_bf16``.

It asks torch's kernels themselves (core.device.bf16_refusal probes a bf16 weight pack and an
autocast matmul) rather than guessing from CPU flags: an AVX2-only CPU (or ONEDNN_MAX_CPU_ISA=AVX2)
cannot pack bf16 weights, and such a test skips there with torch's reason in its own words.
Evaluated at collection, so a test's own monkeypatching of bf16_supported does not hide it."""
from __future__ import annotations

import pytest
import torch

from core.device import bf16_refusal

CPU_BF16_REFUSAL = bf16_refusal(torch.device("cpu"))

needs_cpu_bf16 = pytest.mark.skipif(CPU_BF16_REFUSAL is not None,
                                    reason=f"needs bf16 on the CPU: {CPU_BF16_REFUSAL}")
