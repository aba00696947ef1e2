"""Every private API of another package that exactness relies on, reached through one place.

A private name (`torch._weight_norm`, `_WeightNorm`, `torch.utils._python_dispatch`, a quantizer's
`_compute_perplexity`, jupyter_client's `_async_launch_kernel`, ipykernel's IOPub pipe, nbclient's handler of
one output message) may move or change in
any release. Each is looked up here; when it is gone the error names the package, the installed and the
verified version, and what to do, instead of an AttributeError deep inside a study. Where the private API only
serves a speed-up, its caller falls back to the plain path and records why (see `exactness.runtimes.codevector_lookup`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

# The versions every private API below was read and verified against (pinned in pyproject.toml).
VERIFIED = {"torch": "2.13.0", "transformers": "5.23.0", "jupyter_client": "8.10.0", "ipykernel": "7.4.0",
            "onnxscript": "0.7.2", "papermill": "2.7.0", "nbclient": "0.11.0"}


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


def onnxscript_rewriter():
    """onnxscript's rewriter module, whose `_DEFAULT_REWRITE_RULES` its optimizer reads when it runs (and builds
    its `RewritePass` from): replaced for an export without some rules, to name the rule that makes a defect."""
    module = importlib.import_module("onnxscript.rewriter")
    for name in ("_DEFAULT_REWRITE_RULES", "RewritePass"):
        if not hasattr(module, name):
            raise moved("onnxscript", f"onnxscript.rewriter.{name}", _PIN)
    return module


def rule_pattern(rule) -> str:
    """The pattern an onnxscript rewrite rule matches, as onnxscript prints it ("" where the rule keeps none)."""
    return str(getattr(rule, "_target_pattern", "") or "")


def torch_dispatch_mode() -> type:
    """The base class of the op recorders (replayed draws, discrete choices)."""
    return private("torch", "torch.utils._python_dispatch", "TorchDispatchMode", _PIN)


def tree_map() -> Any:
    """torch's pytree map (`torch.utils._pytree.tree_map`): every tensor of an op's nested arguments."""
    return private("torch", "torch.utils._pytree", "tree_map", _PIN)


def weight_norm_parametrization() -> type:
    """The class torch registers for `parametrizations.weight_norm`, to find a model's weight norms."""
    return private("torch", "torch.nn.utils.parametrizations", "_WeightNorm", _PIN)


def fused_weight_norm():
    """torch's own weight-norm kernel, `w = g * v / ||v||`: the same arithmetic a weight-normed layer runs,
    which a formula written out in Python does not reproduce to the last bit."""
    return private("torch", "torch", "_weight_norm", _PIN)


def papermill_client() -> type:
    """papermill's notebook client, whose `output` (nbclient's handler of one output message, undocumented) a
    run overrides to cap what a cell keeps (`exactness.workbook.cell_output`)."""
    client = private("papermill", "papermill.clientwrap", "PapermillNotebookClient", _PIN)
    if not callable(getattr(client, "output", None)):
        raise moved("nbclient", "nbclient.NotebookClient.output", _PIN)
    return client


def kernel_launch(manager_class: type):
    """jupyter_client's hook for launching a kernel process (`_async_launch_kernel`), which a run overrides
    to keep the kernel's own output in the run folder; None when it moved (the output then stays on the
    terminal, nothing else changes)."""
    return getattr(manager_class, "_async_launch_kernel", None)


def kernel_command_without_tcp(command: list[str], pipe: str) -> list[str]:
    """A kernel spec's `python ... -m ipykernel_launcher ARGS` as the same kernel started through
    `launch_kernel_without_tcp(pipe)`: IOPub's pipe on the unix socket `pipe` (ipykernel binds it to a
    random TCP port of 127.0.0.1, where any local process can push output into the run), and `-P`, so that
    the kernel's working directory, a run folder, is not on sys.path (`-m` searches it first: a file there
    named like a module would run). Another kind of command is returned unchanged."""
    if "-m" not in command or command[command.index("-m") + 1:command.index("-m") + 2] != ["ipykernel_launcher"]:
        return list(command)
    at = command.index("-m")
    launch = f"from exactness.compat import launch_kernel_without_tcp; launch_kernel_without_tcp({pipe!r})"
    return [command[0], "-P", *command[1:at], "-c", launch, *command[at + 2:]]


def launch_kernel_without_tcp(pipe: str) -> None:
    """Start an ipykernel whose IOPub pipe listens on `pipe` (`ipc://...`) instead of TCP. The pipe carries
    output of processes forked from the kernel; ipykernel's private `IOPubThread._setup_pipe_in/_out` bind
    and connect it, and are replaced here with the same code on another address."""
    import os

    import zmq
    from zmq.eventloop.zmqstream import ZMQStream

    thread = private("ipykernel", "ipykernel.iostream", "IOPubThread", _PIN)
    for name in ("_setup_pipe_in", "_setup_pipe_out", "_handle_pipe_msg"):
        if not hasattr(thread, name):
            raise moved("ipykernel", f"ipykernel.iostream.IOPubThread.{name}", _PIN)

    def setup_pipe_in(self):
        self._pipe_uuid = os.urandom(16)  # as ipykernel: authenticates the forked processes' messages
        pipe_in = self.socket.context.socket(zmq.PULL)
        pipe_in.linger = 0
        pipe_in.bind(pipe)
        self._pipe_in = ZMQStream(pipe_in, self.io_loop)
        self._pipe_in.on_recv(self._handle_pipe_msg)

    def setup_pipe_out(self):
        context = zmq.Context()  # a new context after fork, as ipykernel's
        pipe_out = context.socket(zmq.PUSH)
        pipe_out.linger = 3000
        pipe_out.connect(pipe)
        return context, pipe_out

    thread._setup_pipe_in, thread._setup_pipe_out = setup_pipe_in, setup_pipe_out
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


def perplexity_of(quantizer) -> Any:
    """The quantizer's own perplexity method (transformers' `*GumbelVectorQuantizer._compute_perplexity`)."""
    method = getattr(quantizer, "_compute_perplexity", None)
    if method is None:
        raise moved("transformers", f"{type(quantizer).__name__}._compute_perplexity",
                    "the gathered codevector lookup is off; the quantizer's own forward runs")
    return method
