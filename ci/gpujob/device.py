"""Device selection, determinism, and clocks that wait for the device.

``CUBLAS_WORKSPACE_CONFIG`` must be in the environment before the first cuBLAS call (it is
read when cuBLAS creates its handle), so ``setup_determinism`` sets it before anything touches
CUDA; ``ci/gpu_job.sh`` exports it too, and the resumed process inherits it.
"""

from __future__ import annotations

import os
import time

import torch

from dynbsz.errors import ConfigError

#: cuBLAS needs a fixed workspace configuration for deterministic GEMMs (CUDA >= 10.2).
CUBLAS_WORKSPACE = ":4096:8"


def select_device(spec: str = "auto") -> torch.device:
    """``auto``: the first CUDA device if there is one, else the CPU; or ``cpu``, ``cuda``, ``cuda:N``."""
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got {spec!r}")
    if spec == "auto":
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(spec)
    except RuntimeError:
        raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got {spec!r}") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise ConfigError(f"--device {spec!r}: only cpu and cuda devices are supported")
    if not torch.cuda.is_available():
        raise ConfigError(f"--device {spec!r}: CUDA is not available here (torch {torch.__version__}); "
                          "use --device cpu or --device auto")
    index = 0 if device.index is None else device.index
    if index >= torch.cuda.device_count():
        raise ConfigError(f"--device {spec!r}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    return torch.device("cuda", index)


def setup_determinism(device: torch.device, threads: int | None) -> None:
    """Deterministic kernels everywhere; same intra-op thread count in every process of a run."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    if device.type == "cuda" and os.environ["CUBLAS_WORKSPACE_CONFIG"] not in (":4096:8", ":16:8"):
        raise ConfigError(f"CUBLAS_WORKSPACE_CONFIG={os.environ['CUBLAS_WORKSPACE_CONFIG']!r} does not make cuBLAS "
                          "deterministic; unset it or use :4096:8 or :16:8")
    # warn_only=False: an op without a deterministic implementation raises instead of silently
    # breaking the resume comparison. (In strict mode SDPA picks deterministic backward kernels.)
    torch.use_deterministic_algorithms(True, warn_only=False)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if device.type == "cuda":
        # TF32 would still be deterministic, but keep float32 matmuls exact float32 on both sides.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if threads is not None:
        torch.set_num_threads(threads)


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so a host clock reading covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def now(device: torch.device) -> float:
    """``perf_counter`` after the device has finished everything queued so far."""
    synchronize(device)
    return time.perf_counter()


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__})"


def uses_pinned_memory(device: torch.device) -> bool:
    """Pinned host memory only helps (and only exists) with a CUDA device to copy to."""
    return device.type == "cuda"
