"""Loading a user's own DAC weights: a transformers-format directory, or the original codebase's `.pth`.

The original checkpoint is `{"state_dict": ..., "metadata": {"kwargs": {...architecture...}}}` with keys
like `encoder.block.{i}.block.{j}.block.{k}.weight_g` / `weight_v`. Keys are mapped to transformers names;
each weight-norm pair is either folded into `weight` (what the transformers conversion does) or kept as
weight norm (what the original computes). Anything missing, unexpected or mis-shaped is named before the
model is touched: shapes before any tensor operation (a weight_g of the wrong shape once crashed the
interpreter inside `torch._weight_norm`), and a transformers directory strictly against the model's own keys
(`from_pretrained` fills a missing key with fresh random weights).
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

import torch
from safetensors.torch import load_file
from torch.nn.utils import parametrize
from transformers import DacConfig, DacModel

from exactness import compat
from exactness.models.dac import GAIN, VARIANT_CONFIGS, check_config, variant_of, weight_normed_layers

REQUIRED_KWARGS = ("encoder_dim", "encoder_rates", "latent_dim", "decoder_dim", "decoder_rates", "n_codebooks",
                   "codebook_size", "codebook_dim", "sample_rate")
ORIGINAL = "a PyTorch checkpoint (.pth) holding {'state_dict': {...}, 'metadata': {'kwargs': {...}}}"
NORMED = (".parametrizations.weight.original0", ".parametrizations.weight.original1")  # g, v


class CheckpointError(ValueError):
    pass


def config_from_kwargs(kwargs: dict) -> DacConfig:
    missing = [k for k in REQUIRED_KWARGS if k not in kwargs]
    if missing:
        raise CheckpointError(f"metadata.kwargs lacks {missing}")
    wrong = _kwarg_problems(kwargs)
    if wrong:  # else DacConfig's validator, `list(None)` or `log2(0)` speak for it
        raise CheckpointError("metadata.kwargs: " + "; ".join(wrong))
    if list(kwargs["decoder_rates"]) != list(kwargs["encoder_rates"])[::-1]:
        raise CheckpointError(f"decoder_rates {kwargs['decoder_rates']} are not encoder_rates "
                              f"{kwargs['encoder_rates']} reversed; transformers' DacModel cannot represent that")
    config = DacConfig(encoder_hidden_size=kwargs["encoder_dim"], downsampling_ratios=list(kwargs["encoder_rates"]),
                       decoder_hidden_size=kwargs["decoder_dim"], n_codebooks=kwargs["n_codebooks"],
                       codebook_size=kwargs["codebook_size"], codebook_dim=kwargs["codebook_dim"],
                       quantizer_dropout=float(kwargs.get("quantizer_dropout", 0.0)),
                       sampling_rate=kwargs["sample_rate"])
    if config.hidden_size != kwargs["latent_dim"]:
        raise CheckpointError(f"latent_dim {kwargs['latent_dim']} != encoder_dim * 2**len(encoder_rates) = "
                              f"{config.hidden_size}")
    check_config(config)
    return config


def _kwarg_problems(kwargs: dict) -> list[str]:
    def positive(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    problems = []
    for key in REQUIRED_KWARGS:
        value = kwargs[key]
        if key.endswith("_rates"):
            if not (isinstance(value, (list, tuple)) and value and all(map(positive, value))):
                problems.append(f"{key} is {value!r}, expected a list of positive ints")
        elif not positive(value):
            problems.append(f"{key} is {value!r} ({type(value).__name__}), expected a positive int")
    return problems


def map_key(key: str, n_blocks: int) -> str | None:
    """The transformers name of an original key (without its weight_g / weight_v / bias / alpha suffix
    handling), or None when the key has no place in the model."""
    units = ("snake1", "conv1", "snake2", "conv2")
    rules = [
        (r"encoder\.block\.0\.(.+)", lambda m: f"encoder.conv1.{m[1]}"),
        (r"encoder\.block\.(\d+)\.block\.([012])\.block\.([0123])\.(.+)",
         lambda m: f"encoder.block.{int(m[1]) - 1}.res_unit{int(m[2]) + 1}.{units[int(m[3])]}.{m[4]}"),
        (r"encoder\.block\.(\d+)\.block\.3\.alpha", lambda m: f"encoder.block.{int(m[1]) - 1}.snake1.alpha"),
        (r"encoder\.block\.(\d+)\.block\.4\.(.+)", lambda m: f"encoder.block.{int(m[1]) - 1}.conv1.{m[2]}"),
        (rf"encoder\.block\.{n_blocks + 1}\.alpha", lambda m: "encoder.snake1.alpha"),
        (rf"encoder\.block\.{n_blocks + 2}\.(.+)", lambda m: f"encoder.conv2.{m[1]}"),
        (r"(quantizer\.quantizers\.\d+\..+)", lambda m: m[1]),
        (r"decoder\.model\.0\.(.+)", lambda m: f"decoder.conv1.{m[1]}"),
        (r"decoder\.model\.(\d+)\.block\.0\.alpha", lambda m: f"decoder.block.{int(m[1]) - 1}.snake1.alpha"),
        (r"decoder\.model\.(\d+)\.block\.1\.(.+)", lambda m: f"decoder.block.{int(m[1]) - 1}.conv_t1.{m[2]}"),
        (r"decoder\.model\.(\d+)\.block\.([234])\.block\.([0123])\.(.+)",
         lambda m: f"decoder.block.{int(m[1]) - 1}.res_unit{int(m[2]) - 1}.{units[int(m[3])]}.{m[4]}"),
        (rf"decoder\.model\.{n_blocks + 1}\.alpha", lambda m: "decoder.snake1.alpha"),
        (rf"decoder\.model\.{n_blocks + 2}\.(.+)", lambda m: f"decoder.conv2.{m[1]}"),
    ]
    for pattern, target in rules:
        match = re.fullmatch(pattern, key)
        if match:
            return target(match)
    return None


def load_original(path: str | Path, fold: bool = True, variant: str | None = None) -> DacModel:
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}")
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file: load_original takes {ORIGINAL} "
                              "(a transformers model directory loads with load_transformers_dir)")
    checkpoint = _read_torch(path, ORIGINAL)
    metadata = checkpoint.get("metadata") if isinstance(checkpoint, dict) else None
    if not (isinstance(checkpoint, dict) and isinstance(checkpoint.get("state_dict"), dict)
            and isinstance(metadata, dict) and isinstance(metadata.get("kwargs"), dict)):
        raise CheckpointError(f"{path} lacks 'state_dict' or 'metadata.kwargs': not an original DAC checkpoint; "
                              f"it holds {_outline(checkpoint)}, expected {ORIGINAL}")
    config = config_from_kwargs(metadata["kwargs"])
    _check_variant(path, config, variant)
    model = DacModel(config).eval()
    # checked in the checkpoint's own layout, (g, v) per layer, whether or not it is folded afterwards
    model.apply_weight_norm()
    mapped, sources, unmapped = _mapped_state(checkpoint["state_dict"], len(config.downsampling_ratios))
    _check_state(model.state_dict(), mapped, path, sources, unmapped)
    if fold:
        for layer in weight_normed_layers(model):
            parametrize.remove_parametrizations(layer, "weight", leave_parametrized=True)
        mapped = _folded(mapped)
    model.load_state_dict(mapped, strict=True)
    return model


def load(path: str | Path, variant: str | None = None) -> DacModel:
    """A user's DAC as the propagation study runs it (`dac.build_variant`): a plain model. From an original
    checkpoint each weight-normed layer holds v as its weight and carries the checkpoint's own g (`dac.GAIN`), so
    that every run folds or recomputes the trained (g, v); a transformers directory holds folded weights, from which
    weight norm recomputes g = ||W||. Either comes in float32, the precision the study's runs start from. `variant`:
    the published configuration it must be (a run's clip and figures are that configuration's)."""
    path = Path(path)
    if path.is_dir():
        model = load_transformers_dir(path, variant).float()  # the runs are float32 and float64 by design
    else:
        model = load_original(path, fold=False, variant=variant)
        for layer in weight_normed_layers(model):
            g = layer.parametrizations.weight.original0.detach().clone()
            v = layer.parametrizations.weight.original1.detach().clone()
            parametrize.remove_parametrizations(layer, "weight", leave_parametrized=True)
            with torch.no_grad():
                layer.weight.copy_(v)
            setattr(layer, GAIN, g)
    return model.eval()


def _check_variant(path: Path, config: DacConfig, variant: str | None) -> None:
    """Refused as soon as the configuration is read, before any weight is built or checked."""
    found = variant_of(config)
    if variant is not None and found != variant:
        raise CheckpointError(f"{path} is {f'the {found} configuration' if found else 'no published configuration'}"
                              f", not variant {variant!r}: "
                              + (f"run it with -p variant {found}" if found else "the study runs "
                                 f"{', '.join(VARIANT_CONFIGS)} only (their clips and the investigation's figures)"))


def load_transformers_dir(path: str | Path, variant: str | None = None) -> DacModel:
    path = Path(path)
    if not (path / "config.json").exists():
        raise CheckpointError(f"{path} is not a transformers model directory (no config.json)")
    try:
        config = DacConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, TypeError) as error:  # TypeError: JSON that is not an object
        raise CheckpointError(_unreadable(path / "config.json", "a readable config", "a DacConfig as JSON",
                                          error)) from error
    check_config(config)
    _check_variant(path, config, variant)
    model = DacModel(config).eval()
    if isinstance(config.dtype, torch.dtype) and config.dtype.is_floating_point:
        model = model.to(config.dtype)  # as from_pretrained does: a float64 save loads as float64
    state = _transformers_state(path)
    _check_state(model.state_dict(), state, path)
    model.load_state_dict(state, strict=True)
    return model


def _transformers_state(path: Path) -> dict:
    """The tensors as saved (model.safetensors, its shards, or an older pytorch_model.bin), unrenamed, uncast."""
    index = path / "model.safetensors.index.json"
    names = _shard_names(index, path) if index.exists() else ["model.safetensors"]
    if not index.exists() and not (path / names[0]).exists() and (path / "pytorch_model.bin").exists():
        state = _read_torch(path / "pytorch_model.bin", "a state dict (name -> tensor)")
        if not isinstance(state, dict):
            raise CheckpointError(f"{path / 'pytorch_model.bin'} holds {_outline(state)}, expected a state dict")
        return state
    state = {}
    for name in names:
        if not (path / name).exists():
            raise CheckpointError(f"{path} has config.json but no {name}")
        try:
            state.update(load_file(path / name))
        except Exception as error:
            raise CheckpointError(_unreadable(path / name, "a readable safetensors file", "DacModel weights",
                                              error)) from error
    return state


def _shard_names(index: Path, folder: Path) -> list[str]:
    """The weight files a shard index names, each a relative path inside `folder`: an index is data from
    whoever made the directory, and an entry such as `../x` or `/etc/x` must never make us read elsewhere."""
    try:
        data = json.loads(index.read_text())
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
        raise CheckpointError(f"{index} is not JSON ({error}); expected an object with 'weight_map'") from error
    if not isinstance(data, dict):
        raise CheckpointError(f"{index} holds a {type(data).__name__}, expected an object with 'weight_map'")
    if "weight_map" not in data:
        raise CheckpointError(f"{index}: 'weight_map' is missing")
    weight_map = data["weight_map"]
    if not isinstance(weight_map, dict) or not weight_map:
        held = "an empty object" if weight_map == {} else f"a {type(weight_map).__name__}"
        raise CheckpointError(f"{index}: 'weight_map' is {held}, expected an object of tensor name -> file name")
    for tensor, name in weight_map.items():
        if not isinstance(name, str) or not name:
            raise CheckpointError(f"{index}: {tensor!r} maps to {name!r}, not a file name")
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or "\\" in name:
            raise CheckpointError(f"{index}: {tensor!r} names {name!r}, outside {folder}; the weight files of "
                                  "a model directory are inside it")
    return sorted(set(weight_map.values()))


def _read_torch(file: Path, expected: str) -> object:
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:  # a truncated or foreign file: say which file, what it holds and why
        raise CheckpointError(_unreadable(file, "a readable torch checkpoint", expected, error)) from error


def _unreadable(file: Path, kind: str, expected: str, error: Exception) -> str:
    """Why `file` is not `kind`: the reader's own reason is often just `""` or `101`, so add its size and
    first bytes (an empty file, a text file, an HTML error page saved as .pth tell themselves apart)."""
    if file.is_dir():
        return f"{file} is a folder, not a file; expected {expected}"
    size = file.stat().st_size
    if size == 0:
        return f"{file} is empty (0 bytes); expected {expected}"
    with file.open("rb") as handle:
        start = handle.read(24)
    return (f"{file} is not {kind} ({size} bytes starting {start!r}; the reader said "
            f"{type(error).__name__}: {error}); expected {expected}")


def _outline(value: object) -> str:
    """One level of what a file holds, e.g. `a dict {'state_dict': list, 'metadata': dict}`."""
    if not isinstance(value, dict):
        return f"a {type(value).__name__}"
    shown = ", ".join(f"{k!r}: {type(v).__name__}" for k, v in list(value.items())[:6])
    return f"a dict {{{shown}{', ...' if len(value) > 6 else ''}}}"


def _mapped_state(state: dict, n_blocks: int) -> tuple[dict, dict[str, str], list[str]]:
    """The state under transformers' weight-norm names, the original key of each, and the keys with no place."""
    mapped, sources, unmapped = {}, {}, []
    for key, value in state.items():
        target = map_key(str(key), n_blocks)
        if target is None:
            unmapped.append(str(key))
            continue
        if target.endswith((".weight_g", ".weight_v")):
            target = target[: -len(".weight_g")] + NORMED[target.endswith("_v")]
        mapped[target], sources[target] = value, str(key)
    return mapped, sources, unmapped


def _folded(mapped: dict) -> dict:
    """Each (g, v) pair as one `weight`, computed in the checkpoint's dtype (the wider of the two, as the
    kernel takes only one) before the model casts it."""
    folded = {}
    for key, value in mapped.items():
        if key.endswith(NORMED[0]):
            layer = key[: -len(NORMED[0])]
            v = mapped[layer + NORMED[1]]
            dtype = torch.promote_types(value.dtype, v.dtype)
            folded[f"{layer}.weight"] = compat.fused_weight_norm()(v.to(dtype), value.to(dtype), 0)
        elif not key.endswith(NORMED[1]):
            folded[key] = value
    return folded


def _check_state(expected: dict, found: dict, path: Path, sources: dict | None = None,
                 unmapped: list[str] = ()) -> None:
    """Every key, type and shape of `found` against the model's `expected`, before any tensor is touched;
    one error naming all that differ (by the checkpoint's own key where it has one)."""
    name = (sources or {}).get
    missing = [k for k in expected if k not in found]
    unexpected = list(unmapped) + [name(k, k) for k in found if k not in expected]
    alone = [name(k, k) for k in found if k.endswith(NORMED) and
             (k[: -len(NORMED[0])] + NORMED[k.endswith(NORMED[0])]) not in found]
    kinds, shapes = [], []
    for key, value in found.items():
        if key not in expected:
            continue
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            held = value.dtype if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"
            kinds.append(f"{name(key, key)} holds {held}, expected a floating-point tensor")
        elif value.shape != expected[key].shape:
            shapes.append(f"{name(key, key)}: checkpoint {tuple(value.shape)}, model {tuple(expected[key].shape)}")
    problems = [f"{label} {_first(items, 8)}" for label, items in (
        ("weight_g and weight_v come in pairs; found only one of", alone), ("missing keys", missing),
        ("unexpected keys", unexpected), ("shape mismatches", shapes)) if items] + kinds[:8]
    if not problems:
        problems = [f"{label} {_first(items, 8)}" for label, items in (
            ("non-finite values (NaN or inf) in", _non_finite(found, name)),
            ("weight_v with an all-zero output channel (weight norm would divide by zero: every output NaN) in",
             _zero_directions(found, name)),) if items]
    if problems:
        raise CheckpointError(f"{path}: " + "; ".join(problems))


def _non_finite(found: dict, name) -> list[str]:
    """The tensors (checked only after keys, types and shapes passed) holding a NaN or an infinity: one in
    a weight_v or weight_g makes every output sample NaN, folded or not, without any error."""
    return [name(key, key) for key, value in found.items() if not bool(torch.isfinite(value).all())]


def _zero_directions(found: dict, name) -> list[str]:
    """The weight_v tensors (found only after keys, types and shapes passed) with an output channel of
    zero norm: w = g * v / ||v|| is NaN there, silently, in fold and no-fold alike."""
    zero = []
    for key, value in found.items():
        if key.endswith(NORMED[1]) and value.numel():
            norms = value.detach().reshape(value.shape[0], -1).double().norm(dim=1)
            if bool((norms == 0).any()):
                zero.append(name(key, key))
    return zero


def _first(items: list[str], n: int) -> str:
    return f"{items[:n]}" + (f" and {len(items) - n} more" if len(items) > n else "")
