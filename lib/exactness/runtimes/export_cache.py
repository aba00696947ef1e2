"""Exports kept on disk across runs and processes, keyed by everything that decides the graph.

An export of a tiny model costs 10-100 s; the same model, weights, inputs, shape mode and package versions
always give the same graph, so a second run exports nothing. The key is a SHA-256 over the class, its config,
every parameter and buffer (bytes, shapes, dtypes), every input, the shape mode, the exporter's options
(`onnx_graph.ExportOptions`: the optimizer on or off, the rules left out) and the versions of torch,
transformers, onnx, onnxscript and onnxruntime: a changed weight, option or version is a different entry, never
a stale one.

An entry is two files written under temporary names and renamed into place, the graph first and its record
(`<key>.json`: the graph's SHA-256, its outputs and exposed intermediates, the export's duration) last: a
reader sees an entry whole or not at all, and two runs exporting the same graph at once both leave a valid
entry. An entry whose graph does not match its record, or that does not parse, is deleted and exported
again, never used. Nothing in the cache is executed: the graph is protobuf data and the record JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import onnx
import torch

from exactness.runtimes import onnx_graph

# Set it to keep the cache elsewhere (a shared disk, a scratch folder).
CACHE_VARIABLE = "EXACTNESS_EXPORT_CACHE"
VERSIONED = ("torch", "transformers", "onnx", "onnxscript", "onnxruntime")


def _versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in VERSIONED}


def _feed(hasher, name: str, tensor: torch.Tensor) -> None:
    value = tensor.detach().contiguous().cpu()
    hasher.update(f"{name}|{value.dtype}|{tuple(value.shape)}|".encode())
    hasher.update(value.reshape(-1).view(torch.uint8).numpy().tobytes() if value.numel() else b"")


def _our_export_code() -> str:
    """How this project calls the exporter and what it does to the graph after (`onnx_graph`): part of the key."""
    return hashlib.sha256(Path(onnx_graph.__file__).read_bytes()).hexdigest()


def _feed_value(hasher, name: str, value) -> None:
    if isinstance(value, torch.Tensor):
        _feed(hasher, name, value)
    elif isinstance(value, dict):
        for key, item in sorted(value.items()):
            _feed_value(hasher, f"{name}.{key}", item)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _feed_value(hasher, f"{name}.{index}", item)
    else:
        hasher.update(f"{name}={value!r}".encode())


def export_key(model: torch.nn.Module, inputs: dict[str, torch.Tensor], dynamic: bool,
               options: onnx_graph.ExportOptions = onnx_graph.DEFAULT_EXPORT) -> str:
    """What the exporter is asked for (`options`: the optimizer on or off, the rules left out) is part of the key:
    a graph exported without a rule is another entry, never the default graph."""
    hasher = hashlib.sha256()
    config = getattr(model, "config", None)
    header = {"class": f"{type(model).__module__}.{type(model).__qualname__}", "dynamic": bool(dynamic),
              "config": config.to_json_string(use_diff=False) if hasattr(config, "to_json_string") else "",
              # not in the config's JSON, yet it picks the attention code the exporter traces
              "attention": str(getattr(config, "_attn_implementation", "")), "training": bool(model.training),
              "options": options.as_key(), "versions": _versions(), "code": _our_export_code()}
    hasher.update(json.dumps(header, sort_keys=True).encode())
    for name, tensor in sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items()):
        _feed(hasher, f"state.{name}", tensor)
    for name, value in sorted(inputs.items()):
        _feed_value(hasher, f"input.{name}", value)  # nested tensors by their bytes, never by a printed repr
    return hasher.hexdigest()


@dataclass(frozen=True)
class Lookup:
    graph: onnx_graph.ExportedGraph
    cached: bool  # True: read from the cache; False: exported now (and stored)
    rebuilt: str = ""  # why a damaged entry was thrown away, "" when none was


class ExportCache:
    """`export(model, inputs, dynamic)` from the cache, exporting (and storing) on a miss."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    @classmethod
    def default(cls, project_root: str | os.PathLike) -> ExportCache:
        return cls(os.environ.get(CACHE_VARIABLE) or Path(project_root) / ".state" / "exports")

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.folder / f"{key}.onnx", self.folder / f"{key}.json"

    def read(self, key: str) -> tuple[onnx_graph.ExportedGraph | None, str]:
        """The entry, or (None, why it was unusable; "" when there is none)."""
        graph_path, record_path = self._paths(key)
        if not record_path.exists():
            return None, ""
        try:
            record = json.loads(record_path.read_text())
            data = graph_path.read_bytes()
            if hashlib.sha256(data).hexdigest() != record["sha256"]:
                raise ValueError("the graph does not match its record's SHA-256")
            model = onnx.ModelProto.FromString(data)
            graph = onnx_graph.ExportedGraph(model, list(record["outputs"]), dict(record["intermediates"]),
                                             float(record["export_seconds"]))
        except (OSError, ValueError, KeyError, TypeError) as damage:
            for path in (record_path, graph_path):
                path.unlink(missing_ok=True)
            return None, f"cache entry {key[:12]} was damaged ({type(damage).__name__}: {damage}); exported again"
        return graph, ""

    def _write(self, path: Path, data: bytes) -> None:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=self.folder)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def store(self, key: str, graph: onnx_graph.ExportedGraph) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = graph.model.SerializeToString()
        graph_path, record_path = self._paths(key)
        self._write(graph_path, data)
        record = {"sha256": hashlib.sha256(data).hexdigest(), "outputs": graph.outputs,
                  "intermediates": graph.intermediates, "export_seconds": graph.export_seconds}
        self._write(record_path, json.dumps(record).encode())

    def export(self, model: torch.nn.Module, inputs: dict[str, torch.Tensor], dynamic: bool,
               options: onnx_graph.ExportOptions = onnx_graph.DEFAULT_EXPORT) -> Lookup:
        key = export_key(model, inputs, dynamic, options)
        graph, rebuilt = self.read(key)
        if graph is not None:
            return Lookup(graph, True)
        graph = onnx_graph.export(model, inputs, dynamic=dynamic, options=options)
        try:
            self.store(key, graph)
        except OSError:
            pass  # a full or read-only disk costs the next run an export, never this run its graph
        return Lookup(graph, False, rebuilt)
