"""Exports kept on disk across runs and processes, keyed by everything that decides the graph.

An export of a tiny model costs 10-100 s; the same model, weights, inputs, shape mode and package versions
always give the same graph, so a second run exports nothing. The key is a SHA-256 over the class, its config,
every parameter and buffer (bytes, shapes, dtypes), every input, the shape mode, the exporter's options
(`onnx_graph.ExportOptions`: the optimizer on or off, the rules left out), the versions of torch,
transformers, onnx, onnxscript and onnxruntime, and the source files of the model's classes outside those
packages (your builder's): a changed weight, option, version or forward is a different entry, never a stale one.

An entry is two files written under temporary names and renamed into place, the graph first and its record
(`<key>.json`: its own key, the graph's SHA-256, its outputs and exposed intermediates, the export's duration,
and an HMAC of all of these) last: a reader sees an entry whole or not at all, and two runs exporting the same
graph at once both leave a valid entry. The HMAC's secret lies beside the cache folder, not in it
(`<folder>.key`, 0600, made on first use): an entry copied in from elsewhere, one moved under another key, or a
record edited by hand fails it. The graph's inputs and outputs are checked against the record and the inputs
of the run before use. An entry that fails any of this, or does not parse, is deleted and exported again, never
used. Nothing in the cache is executed: the graph is protobuf data and the record JSON.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import marshal
import os
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import onnx
import torch

from exactness import local_secret
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


def _model_code(model: torch.nn.Module) -> dict[str, str]:
    """Per module class of the model outside the versioned packages (your builder's, this project's DAC), the
    SHA-256 of the files its methods are written in (a helper the forward calls there included), or of the
    methods' compiled code where there is no file (a class defined in a notebook cell): an edited forward is
    another entry."""
    code = {}
    for kind in {type(module) for module in model.modules()}:
        if kind.__module__.split(".")[0] in VERSIONED:
            continue
        functions = [f for f in vars(kind).values() if hasattr(f, "__code__")]
        digest = hashlib.sha256()
        for name in sorted({f.__code__.co_filename for f in functions}):
            try:
                digest.update(Path(name).read_bytes())
            except OSError:
                digest.update(b"".join(marshal.dumps(f.__code__) for f in functions if f.__code__.co_filename == name))
        code[f"{kind.__module__}.{kind.__qualname__}"] = digest.hexdigest()
    return code


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
    model_code = _model_code(model)
    if model_code:  # only a model with classes of its own has any (the versions stand for the packages' code)
        header["model_code"] = model_code
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


class EntryMismatch(ValueError):
    """A cache entry that is not the one its key names: another key's, edited, or from another cache."""


def _signature(secret: bytes, record: dict) -> str:
    fields = {name: value for name, value in record.items() if name != "hmac"}
    return hmac.new(secret, json.dumps(fields, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def _check_graph(model: onnx.ModelProto, record: dict, input_names) -> None:
    """The graph's outputs are the record's, in its order, then its intermediates; the graph takes only inputs
    this run has: a record relabelling another graph's outputs would mislabel every table built from them."""
    outputs = [o.name for o in model.graph.output]
    recorded = list(record["outputs"])
    if outputs[:len(recorded)] != recorded:
        raise EntryMismatch(f"the graph's outputs {outputs[:len(recorded)]} are not the record's {recorded}")
    missing = sorted(set(dict(record["intermediates"]).values()) - set(outputs))
    if missing:
        raise EntryMismatch(f"the record's intermediates {missing[:3]} are not outputs of the graph")
    if input_names is not None:
        constants = {t.name for t in model.graph.initializer}
        unknown = sorted(i.name for i in model.graph.input if i.name not in constants and i.name not in input_names)
        if unknown:
            raise EntryMismatch(f"the graph takes inputs {unknown} that this model's inputs "
                                f"({sorted(input_names)}) do not have")


class ExportCache:
    """`export(model, inputs, dynamic)` from the cache, exporting (and storing) on a miss."""

    def __init__(self, folder: str | os.PathLike, secret: bytes | None = None):
        """`secret`: what authenticates the entries; by default the one kept beside the folder."""
        self.folder = Path(folder)
        self._secret = secret

    @property
    def secret(self) -> bytes:
        if self._secret is None:
            folder = self.folder.resolve()
            self._secret = local_secret.read_or_make(folder.with_name(folder.name + ".key"))
        return self._secret

    @classmethod
    def default(cls, project_root: str | os.PathLike) -> ExportCache:
        return cls(os.environ.get(CACHE_VARIABLE) or Path(project_root) / ".state" / "exports")

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.folder / f"{key}.onnx", self.folder / f"{key}.json"

    def read(self, key: str, input_names=None) -> tuple[onnx_graph.ExportedGraph | None, str]:
        """The entry, or (None, why it was unusable; "" when there is none). `input_names`: the inputs the graph
        will be fed (every input it takes must be one)."""
        graph_path, record_path = self._paths(key)
        if not record_path.exists():
            return None, ""
        try:
            secret = self.secret
        except OSError as error:  # no key can be read or kept (a read-only disk): no entry can be trusted
            return None, f"cache entry {key[:12]} not used: the cache's key cannot be read ({error}); exported again"
        try:
            record = json.loads(record_path.read_text())
            if not isinstance(record, dict):
                raise EntryMismatch("the record is not a JSON object")
            if not hmac.compare_digest(str(record.get("hmac", "")), _signature(secret, record)):
                raise EntryMismatch("the record is not authenticated by this cache's key (written by another "
                                    "cache or version, moved from another key, or edited)")
            if record.get("key") != key:
                raise EntryMismatch(f"the record is the entry of key {str(record.get('key'))[:12]}")
            data = graph_path.read_bytes()
            if hashlib.sha256(data).hexdigest() != record["sha256"]:
                raise EntryMismatch("the graph does not match its record's SHA-256")
            model = onnx.ModelProto.FromString(data)
            _check_graph(model, record, input_names)
            graph = onnx_graph.ExportedGraph(model, list(record["outputs"]), dict(record["intermediates"]),
                                             float(record["export_seconds"]))
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as damage:
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
        self.folder.mkdir(parents=True, exist_ok=True)  # before the key beside it is made: a folder that
        secret = self.secret  # cannot be made (a path that is no cache) leaves no key file either
        data = graph.model.SerializeToString()
        graph_path, record_path = self._paths(key)
        self._write(graph_path, data)
        record = {"key": key, "sha256": hashlib.sha256(data).hexdigest(), "outputs": graph.outputs,
                  "intermediates": graph.intermediates, "export_seconds": graph.export_seconds}
        record["hmac"] = _signature(secret, record)
        self._write(record_path, json.dumps(record).encode())

    def export(self, model: torch.nn.Module, inputs: dict[str, torch.Tensor], dynamic: bool,
               options: onnx_graph.ExportOptions = onnx_graph.DEFAULT_EXPORT) -> Lookup:
        key = export_key(model, inputs, dynamic, options)
        graph, rebuilt = self.read(key, set(inputs))
        if graph is not None:
            return Lookup(graph, True)
        if rebuilt:  # the numbers stay right (exported again); stderr says the cache was damaged: the terminal
            # of a script or test, the executed notebook of a run (its report leaves stderr out)
            print(f"export cache: {rebuilt}", file=sys.stderr, flush=True)
        graph = onnx_graph.export(model, inputs, dynamic=dynamic, options=options)
        try:
            self.store(key, graph)
        except OSError:
            pass  # a full or read-only disk costs the next run an export, never this run its graph
        return Lookup(graph, False, rebuilt)
