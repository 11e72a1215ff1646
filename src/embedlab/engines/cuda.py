"""Whether the CUDA engine can train here, asked without importing torch or triton.

The engine itself — parameters, batches and the step on one GPU, in Triton kernels — is
:mod:`embedlab.engines.cuda_engine`. Availability: torch with CUDA, triton, and a CUDA device.
``EMBEDLAB_CUDA_INTERPRET=1`` runs the same kernels on the CPU through Triton's interpreter
(``TRITON_INTERPRET=1``): slow, for the tests of machines without a GPU, never chosen by
``--engine auto``.
"""

from __future__ import annotations

import functools
import importlib.util
import os

#: runs the CUDA engine's kernels on the CPU through Triton's interpreter (tests)
INTERPRET_ENV = "EMBEDLAB_CUDA_INTERPRET"


def interpreted() -> bool:
    """Whether the engine runs on the CPU through Triton's interpreter (``$EMBEDLAB_CUDA_INTERPRET``
    set)."""
    return os.environ.get(INTERPRET_ENV, "") not in ("", "0")


if interpreted():  # Triton reads this when it defines kernels, its own included: set it first
    os.environ.setdefault("TRITON_INTERPRET", "1")


@functools.cache
def _reason() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed"
    if interpreted():
        return None
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device was found"
    return None


def unavailable_reason() -> str | None:
    """None when the CUDA engine can train here, else why not (one line; cached)."""
    return _reason()


def install_hint(reason: str, cpu_engine: str = "native") -> str:
    """What fixes ``reason``; ``cpu_engine``: the CPU engine that trains the run instead."""
    if reason.startswith("torch"):
        return "install it with pip install 'embedlab[torch]' (a CUDA build of torch)"
    if reason.startswith("triton"):
        return "install it with pip install triton (CUDA builds of torch ship it)"
    from embedlab.errors import spell

    return f"train on a machine with an NVIDIA GPU, or pass {spell('--engine', cpu_engine)}"


def gpu_present() -> bool:
    """Whether an NVIDIA driver is loaded here: a cheap test before importing torch at all."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")


def device_name() -> str:
    """The GPU's model as CUDA names it (``cpu (Triton interpreter)`` when interpreted)."""
    if interpreted():
        return "cpu (Triton interpreter)"
    import torch

    return str(torch.cuda.get_device_name(0))

