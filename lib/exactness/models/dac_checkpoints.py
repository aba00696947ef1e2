"""Loading a user's own DAC weights: a transformers-format directory, or the original codebase's `.pth`.

The original checkpoint is `{"state_dict": ..., "metadata": {"kwargs": {...architecture...}}}` with keys
like `encoder.block.{i}.block.{j}.block.{k}.weight_g` / `weight_v`. Keys are mapped to transformers names;
each weight-norm pair is either folded into `weight` (what the transformers conversion does) or kept as
weight norm (what the original computes). Anything missing, unexpected or mis-shaped is named before the
model is touched.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from transformers import DacConfig, DacModel

from exactness.models.dac import check_config

REQUIRED_KWARGS = ("encoder_dim", "encoder_rates", "latent_dim", "decoder_dim", "decoder_rates", "n_codebooks",
                   "codebook_size", "codebook_dim", "sample_rate")


class CheckpointError(ValueError):
    pass


def load_transformers_dir(path: str | Path) -> DacModel:
    path = Path(path)
    if not (path / "config.json").exists():
        raise CheckpointError(f"{path} is not a transformers model directory (no config.json)")
    model = DacModel.from_pretrained(path, local_files_only=True).eval()
    check_config(model.config)
    return model


def config_from_kwargs(kwargs: dict) -> DacConfig:
    missing = [k for k in REQUIRED_KWARGS if k not in kwargs]
    if missing:
        raise CheckpointError(f"metadata.kwargs lacks {missing}")
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


def load_original(path: str | Path, fold: bool = True) -> DacModel:
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a truncated or foreign file: say which file and why
        raise CheckpointError(f"{path} is not a readable torch checkpoint: {error}") from error
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint or "kwargs" not in checkpoint.get(
            "metadata", {}):
        raise CheckpointError(f"{path} lacks 'state_dict' or 'metadata.kwargs': not an original DAC checkpoint")
    config = config_from_kwargs(checkpoint["metadata"]["kwargs"])
    model = DacModel(config).eval()
    if not fold:
        model.apply_weight_norm()
    mapped = _mapped_state(checkpoint["state_dict"], len(config.downsampling_ratios), fold)
    _load_strict(model, mapped, path)
    return model


def _mapped_state(state: dict, n_blocks: int, fold: bool) -> dict[str, torch.Tensor]:
    mapped, unexpected, pairs = {}, [], {}
    for key, value in state.items():
        target = map_key(key, n_blocks)
        if target is None:
            unexpected.append(key)
        elif target.endswith((".weight_g", ".weight_v")):
            pairs.setdefault(target[: -len(".weight_g")], {})[target[-1]] = value
        else:
            mapped[target] = value
    if unexpected:
        raise CheckpointError(f"unexpected keys with no place in the model: {unexpected[:8]}"
                              + (f" and {len(unexpected) - 8} more" if len(unexpected) > 8 else ""))
    for layer, pair in pairs.items():
        if set(pair) != {"g", "v"}:
            raise CheckpointError(f"{layer}: weight_g and weight_v come in pairs; found only weight_{set(pair).pop()}")
        if fold:
            mapped[f"{layer}.weight"] = torch._weight_norm(pair["v"], pair["g"], 0)
        else:
            mapped[f"{layer}.parametrizations.weight.original0"] = pair["g"]
            mapped[f"{layer}.parametrizations.weight.original1"] = pair["v"]
    return mapped


def _load_strict(model: DacModel, mapped: dict, path: Path) -> None:
    expected = model.state_dict()
    missing = [k for k in expected if k not in mapped]
    extra = [k for k in mapped if k not in expected]
    shapes = [f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(expected[k].shape)}" for k, v in mapped.items()
              if k in expected and tuple(v.shape) != tuple(expected[k].shape)]
    problems = [text for text, found in ((f"missing keys {missing[:8]}", missing),
                                         (f"keys the model lacks {extra[:8]}", extra),
                                         (f"shape mismatches {shapes[:4]}", shapes)) if found]
    if problems:
        raise CheckpointError(f"{path}: " + "; ".join(problems))
    model.load_state_dict(mapped, strict=True)
