"""Facts of the machine and software a run used, and the float behaviour that decides exactness there."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

PACKAGES = ("torch", "onnxruntime", "onnx", "onnxscript", "transformers", "numpy", "pandas", "papermill")
# Vector extensions that change which kernels torch and ORT pick, and so their rounding.
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                "amx_tile", "amx_bf16", "asimd", "sve")


def software_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def cpu_facts() -> dict[str, object]:
    model, flags = platform.processor() or platform.machine(), set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "Model") and value.strip():
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
    return {
        "cpu_model": model,
        "architecture": platform.machine(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "vector_extensions": [flag for flag in VECTOR_FLAGS if flag in flags],
    }


def thread_counts() -> dict[str, int]:
    import onnxruntime as ort
    import torch

    options = ort.SessionOptions()
    return {
        "torch_intra_op_threads": torch.get_num_threads(),
        "torch_inter_op_threads": torch.get_num_interop_threads(),
        # 0 means "ORT decides": one thread per physical core.
        "ort_intra_op_threads_setting": options.intra_op_num_threads,
        "ort_inter_op_threads_setting": options.inter_op_num_threads,
    }


def torch_cpu_capability() -> str:
    import torch

    return torch.backends.cpu.get_cpu_capability()


def git_state(root: Path) -> dict[str, object]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit, "git_dirty": dirty}


def denormal_behaviour() -> dict[str, bool]:
    """Whether each runtime keeps float32 subnormals (True) or flushes them to zero (False)."""
    import torch

    tiny = np.float32(1e-38)  # normal; halving it gives a subnormal
    return {
        "numpy_keeps_subnormals": bool(np.float32(tiny * np.float32(0.5)) != 0),
        "torch_keeps_subnormals": bool((torch.tensor([1e-38], dtype=torch.float32) * 0.5).item() != 0),
        "ort_keeps_subnormals": _ort_keeps_subnormals(),
    }


def _ort_keeps_subnormals() -> bool:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "half"], ["y"])],
        "subnormal_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [helper.make_tensor("half", TensorProto.FLOAT, [1], [0.5])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.array([1e-38], dtype=np.float32)})
    return bool(y[0] != 0)


def ort_settings() -> dict[str, object]:
    import onnxruntime as ort

    return {
        "ort_available_providers": ort.get_available_providers(),
        "ort_default_graph_optimization_level": str(ort.SessionOptions().graph_optimization_level),
    }


def float_spacing(magnitudes=(1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3)):
    """One row per magnitude: the gap to the next representable value (1 ulp) in each dtype."""
    import pandas as pd
    import torch

    rows = []
    for magnitude in magnitudes:
        row = {"magnitude": magnitude}
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            x = torch.tensor(magnitude, dtype=dtype)
            row[str(dtype).removeprefix("torch.")] = (torch.nextafter(x, torch.tensor(np.inf, dtype=dtype)) - x).item()
        row["float32_relative"] = row["float32"] / magnitude
        rows.append(row)
    return pd.DataFrame(rows)


@functools.cache
def thread_counts_apart() -> dict[str, int]:
    """`thread_counts()` read in a process of its own (started as a kernel starts, so it counts what a kernel
    gets): the caller never loads torch and ONNX Runtime, which would keep about 200 MB in the `exactness`
    command for the whole run, counted in every study's peak memory. Read once per process (a torch import,
    about 3 s): every run of a batch shares it. Treat the result as read-only."""
    code = "import json; from exactness.workbook.machine import thread_counts; print(json.dumps(thread_counts()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"reading the thread counts failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_facts(root: Path) -> dict[str, object]:
    """What a manifest records about where a run happened."""
    return {"versions": software_versions(), **cpu_facts(), "threads": dict(thread_counts_apart()), **git_state(root)}


# CPU kernel sets a worker process can be started with: environment variables read when torch loads. The eager
# forward's float kernels depend on them (torch's ATen dispatch, oneDNN's convolutions and matmuls); ONNX
# Runtime exposes no such switch (its MLAS kernels pick the widest set at run time), so it runs the same kernels
# under every set. "native" changes nothing: the machine's own widest kernels.
KERNEL_SETS: dict[str, dict[str, str]] = {
    "native": {},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
# The vector extensions a kernel set needs on this CPU.
KERNEL_SET_NEEDS: dict[str, tuple[str, ...]] = {"native": (), "avx512": ("avx512f", "avx512bw"),
                                                "avx2": ("avx2", "fma"), "default": ("sse4_2",)}


def available_kernel_sets(extensions=None) -> list[str]:
    """The kernel sets this CPU (or one with these vector extensions) can run, widest first."""
    have = set(cpu_facts()["vector_extensions"] if extensions is None else extensions)
    return [name for name, needs in KERNEL_SET_NEEDS.items() if set(needs) <= have]
