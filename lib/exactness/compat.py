"""Every private API of another package that exactness relies on, reached through one place.

A private name (`torch._weight_norm`, `_WeightNorm`, `torch.utils._python_dispatch`, a quantizer's
`_compute_perplexity`, jupyter_client's `_async_launch_kernel`) may move or change in any release. Each is
looked up here; when it is gone the error names the package, the installed and the verified version, and
what to do, instead of an AttributeError deep inside a study. Where the private API only serves a speed-up,
its caller falls back to the plain path and records why (see `exactness.runtimes.codevector_lookup`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

# The versions every private API below was read and verified against (pinned in pyproject.toml).
VERIFIED = {"torch": "2.13.0", "transformers": "5.23.0", "jupyter_client": "8.10.0"}


class CompatError(RuntimeError):
    pass


def installed(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def moved(package: str, what: str, fix: str) -> CompatError:
    """The error for a private API that is not where `VERIFIED[package]` had it."""
    return CompatError(f"{package} {installed(package)} has no {what} (exactness was verified with {package} "
                       f"{VERIFIED.get(package, '?')}); {fix}")


def private(package: str, module: str, name: str, fix: str) -> Any:
    """`module.name`, or a CompatError saying which package moved it and what to do."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise moved(package, f"{module}.{name}", fix) from None


_PIN = "install the verified version (`make install`) or update exactness.compat"


def torch_dispatch_mode() -> type:
    """The base class of the op recorders (replayed draws, discrete choices)."""
    return private("torch", "torch.utils._python_dispatch", "TorchDispatchMode", _PIN)


def weight_norm_parametrization() -> type:
    """The class torch registers for `parametrizations.weight_norm`, to find a model's weight norms."""
    return private("torch", "torch.nn.utils.parametrizations", "_WeightNorm", _PIN)


def fused_weight_norm():
    """torch's own weight-norm kernel, `w = g * v / ||v||`: the same arithmetic a weight-normed layer runs,
    which a formula written out in Python does not reproduce to the last bit."""
    return private("torch", "torch", "_weight_norm", _PIN)


def kernel_launch(manager_class: type):
    """jupyter_client's hook for launching a kernel process (`_async_launch_kernel`), which a run overrides
    to keep the kernel's own output in the run folder; None when it moved (the output then stays on the
    terminal, nothing else changes)."""
    return getattr(manager_class, "_async_launch_kernel", None)


def perplexity_of(quantizer) -> Any:
    """The quantizer's own perplexity method (transformers' `*GumbelVectorQuantizer._compute_perplexity`)."""
    method = getattr(quantizer, "_compute_perplexity", None)
    if method is None:
        raise moved("transformers", f"{type(quantizer).__name__}._compute_perplexity",
                    "the gathered codevector lookup is off; the quantizer's own forward runs")
    return method
