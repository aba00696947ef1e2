"""DAC (transformers `DacModel`) variants: the three published configurations, random initialisations,
and the same weights run four ways (weight norm recomputed, folded in float32, folded in float64, float64).

No weights can be downloaded here, so a model is a configuration plus a named initialisation and a seed.
The "checkpoint" every variant shares is the weight-norm pair (g, v) = (||W||, W) of one random template:
the original codebase recomputes W = g v / ||v|| at every forward; transformers folds it once at conversion.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np
import torch
from torch.nn.utils import parametrize
from transformers import DacConfig, DacModel

from exactness import compat

VARIANT_CONFIGS = {
    "16khz": {"downsampling_ratios": [2, 4, 5, 8], "n_codebooks": 12, "sampling_rate": 16000},
    "24khz": {"downsampling_ratios": [2, 4, 5, 8], "n_codebooks": 32, "sampling_rate": 24000},
    "44khz": {"downsampling_ratios": [2, 4, 8, 8], "n_codebooks": 9, "sampling_rate": 44100},
    # a small model with the same structure, for tests and smoke runs
    "tiny": {"downsampling_ratios": [2, 4], "n_codebooks": 4, "sampling_rate": 8000, "encoder_hidden_size": 8,
             "decoder_hidden_size": 32, "codebook_size": 64},
}
VARIANTS = ("weight_norm", "folded_fp32", "folded_fp64", "float64")
# A plain model's weight-normed layer may carry its checkpoint's own g under this attribute, its weight holding v:
# a trained (g, v) has ||v|| != g, which a random template's (g = ||W||, v = W) never shows (`dac_checkpoints.load`)
GAIN = "exactness_gain"


class DacConfigError(ValueError):
    pass


def config(variant: str) -> DacConfig:
    if variant not in VARIANT_CONFIGS:
        raise DacConfigError(f"unknown DAC variant {variant!r}; known: {', '.join(VARIANT_CONFIGS)}")
    built = DacConfig(**VARIANT_CONFIGS[variant])
    check_config(built)
    return built


def check_config(config: DacConfig, feature_extractor=None) -> None:
    """Catch the seed's 512-vs-320 bug: a hop length that is not the product of the ratios (setting the
    ratios after construction leaves `hop_length` and `upsampling_ratios` stale), or a feature extractor
    whose hop length disagrees with the model."""
    product = int(np.prod(config.downsampling_ratios))
    problems = []
    if config.hop_length != product:
        problems.append(f"hop_length {config.hop_length} != product of downsampling_ratios "
                        f"{list(config.downsampling_ratios)} = {product}")
    if list(config.upsampling_ratios) != list(config.downsampling_ratios)[::-1]:
        problems.append(f"upsampling_ratios {list(config.upsampling_ratios)} are not the downsampling ratios reversed")
    if feature_extractor is not None and feature_extractor.hop_length != product:
        problems.append(f"feature extractor hop_length {feature_extractor.hop_length} != model hop {product}")
    if problems:
        raise DacConfigError("; ".join(problems))


def config_checks() -> list[dict[str, str]]:
    """The published variants, and the seed's bug (ratios set after construction), through `check_config`."""

    def stale() -> DacConfig:
        built = DacConfig()
        built.downsampling_ratios = [2, 4, 5, 8]  # set after construction: hop_length stays 512
        return built

    cases = [(name, lambda name=name: config(name)) for name in ("16khz", "24khz", "44khz")]
    cases.append(("ratios [2,4,5,8] set after construction", stale))
    rows = []
    for case, build in cases:
        try:
            check_config(build())
            rows.append({"case": case, "result": "consistent"})
        except DacConfigError as error:
            rows.append({"case": case, "result": str(error)})
    return rows


def _default(model: DacModel, generator: torch.Generator) -> None:
    """transformers' own initialisation (already applied at construction)."""


def _variance_preserving(model: DacModel, generator: torch.Generator) -> None:
    """He-style normal weights (std = 1 / sqrt(fan_in)) so activations keep their scale through the convs."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Conv1d, torch.nn.ConvTranspose1d)):
                weight = module.weight
                fan_in = (weight.shape[1] if isinstance(module, torch.nn.Conv1d) else weight.shape[0]) * weight.shape[2]
                weight.copy_(torch.randn(weight.shape, generator=generator) / math.sqrt(fan_in))
            elif isinstance(module, torch.nn.Embedding):
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator))


INITS: dict[str, Callable[[DacModel, torch.Generator], None]] = {
    "default": _default, "variance_preserving": _variance_preserving}


def template(variant: str, seed: int, init: str = "default") -> DacModel:
    """Plain (unparametrized) model: every variant is built from a copy of this, never from each other."""
    if init not in INITS:
        raise DacConfigError(f"unknown init {init!r}; known: {', '.join(INITS)} (add your own to dac.INITS)")
    torch.manual_seed(seed)
    model = DacModel(config(variant)).eval()
    INITS[init](model, torch.Generator().manual_seed(seed))
    return model


def variant_of(found: DacConfig) -> str | None:
    """The published configuration (`VARIANT_CONFIGS`) `found` is, or None: compared on what shapes the model."""
    def shape(c: DacConfig) -> tuple:
        return (c.encoder_hidden_size, list(c.downsampling_ratios), c.decoder_hidden_size, c.n_codebooks,
                c.codebook_size, c.codebook_dim, c.sampling_rate, c.hidden_size)

    return next((name for name in VARIANT_CONFIGS if shape(found) == shape(config(name))), None)


def skeleton(variant: str) -> DacModel:
    """A configuration's architecture without weights (on PyTorch's meta device: built in under a second, where
    a template takes seconds to initialise 76 million weights at 44.1 kHz), for what depends on the layers'
    sizes only, such as `dac_chunks.describe`. Running it raises."""
    with torch.device("meta"):
        return DacModel(config(variant)).eval()


def weight_normed_layers(model: DacModel) -> list[torch.nn.Module]:
    """The layers the original codebase wraps in weight norm (transformers' `apply_weight_norm` list)."""
    layers = [model.encoder.conv1, model.encoder.conv2, model.decoder.conv1, model.decoder.conv2]
    for q in model.quantizer.quantizers:
        layers += [q.in_proj, q.out_proj]
    for block in model.encoder.block:
        layers += [block.conv1] + [getattr(block, f"res_unit{i}").conv1 for i in (1, 2, 3)]
        layers += [getattr(block, f"res_unit{i}").conv2 for i in (1, 2, 3)]
    for block in model.decoder.block:
        layers += [block.conv_t1] + [getattr(block, f"res_unit{i}").conv1 for i in (1, 2, 3)]
        layers += [getattr(block, f"res_unit{i}").conv2 for i in (1, 2, 3)]
    return layers


class _Fold(torch.nn.Module):
    """A weight computed from (g, v) whenever its layer runs: `torch._weight_norm(v, g, 0)` in `fold_dtype`, cast
    to `dtype`. The same call that folds once (`remove_parametrizations(leave_parametrized=True)` evaluates
    exactly this), so the weights are the folded ones bit for bit, without a second copy of them."""

    def __init__(self, g: torch.Tensor, fold_dtype: torch.dtype, dtype: torch.dtype):
        super().__init__()
        self.g, self.fold_dtype, self.dtype = g, fold_dtype, dtype

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return compat.fused_weight_norm()(v.to(self.fold_dtype), self.g, 0).to(self.dtype)


def _materialized(plain: DacModel, variant: str) -> DacModel:
    """Each run with its own copy of the weights: folds stored once, float64 weights stored in float64."""
    model = copy.deepcopy(plain)
    if variant == "float64":
        model = model.double()
    for layer in weight_normed_layers(model):
        torch.nn.utils.parametrizations.weight_norm(layer)  # g = ||W||, v = W, in the model's dtype
        _keep_gain(layer)
    if variant in ("folded_fp32", "folded_fp64"):
        for layer in weight_normed_layers(model):
            if variant == "folded_fp64":
                g = layer.parametrizations.weight.original0.detach().double()
                v = layer.parametrizations.weight.original1.detach().double()
                folded = compat.fused_weight_norm()(v, g, 0).float()
                parametrize.remove_parametrizations(layer, "weight", leave_parametrized=True)
                with torch.no_grad():
                    layer.weight.copy_(folded)
            else:
                parametrize.remove_parametrizations(layer, "weight", leave_parametrized=True)
    return model.eval()


def _shared(plain: DacModel, variant: str) -> DacModel:
    """The same run, its weight-normed layers reading v from the template's own weights (v = W): the four runs
    of one checkpoint hold one copy of the large weights between them. Everything else (biases, Snake alphas,
    codebooks) is copied, in float64 for the float64 run."""
    shared = {id(layer.weight): layer.weight for layer in weight_normed_layers(plain)}
    model = copy.deepcopy(plain, memo=dict(shared))
    with torch.no_grad():
        if variant == "float64":
            for module in model.modules():
                for name, value in module._parameters.items():
                    if value is not None and id(value) not in shared:
                        module._parameters[name] = torch.nn.Parameter(value.detach().double(), value.requires_grad)
        for layer in weight_normed_layers(model):
            v = layer.weight
            if variant == "weight_norm":
                torch.nn.utils.parametrizations.weight_norm(layer)  # the original: recomputed at every forward
                _keep_gain(layer)
                continue
            # g as the materialized run computes it: the norm of W in the run's dtype (float32 for the folds), or
            # the checkpoint's own, cast to it
            g = getattr(layer, GAIN, None)
            if g is None:
                g = torch.norm_except_dim(v.double() if variant == "float64" else v, 2, 0)
            g = g.double() if variant == "float64" else g
            fold_dtype = torch.float32 if variant == "folded_fp32" else torch.float64
            dtype = torch.float64 if variant == "float64" else torch.float32
            parametrize.register_parametrization(layer, "weight", _Fold(g.to(fold_dtype), fold_dtype, dtype),
                                                 unsafe=True)
    return model.eval()


def _keep_gain(layer: torch.nn.Module) -> None:
    """A weight-normed layer's g set to its checkpoint's own (`GAIN`), in the layer's dtype; else left ||v||."""
    gain = getattr(layer, GAIN, None)
    if gain is not None:
        with torch.no_grad():
            layer.parametrizations.weight.original0.copy_(gain)


def build_variant(plain: DacModel, variant: str, shared: bool = False) -> DacModel:
    """One way of running the same (g, v) checkpoint; `plain` is left untouched. By default each run stores its
    own weights (a plain module: what an export sees). `shared=True` keeps one copy for all runs: they read the
    template's weights and compute their folds when a layer runs (the same numbers; tested), for the DAC
    studies' long clips. Never change `plain`'s weights while a shared run of it is alive."""
    if variant not in VARIANTS:
        raise DacConfigError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    return _shared(plain, variant) if shared else _materialized(plain, variant)


def forward_state(model: DacModel):
    """Every tensor a forward reads, in module order: (module path, name, value), a weight-normed layer's weight as
    its forward computes it (one layer's at a time)."""
    for path, module in model.named_modules():
        if ".parametrizations" in f".{path}":  # (g, v) and the fold: read through the layer's computed weight
            continue
        names = [*module._parameters, *module._buffers]
        if parametrize.is_parametrized(module):
            names += list(module.parametrizations)
        for name in names:
            yield path, name, getattr(module, name)


def _same_computation(a: DacModel, b: DacModel) -> bool:
    """Two runs whose forwards read the same tensors, bit for bit and dtype for dtype: the same modules on the
    same inputs, so the same outputs (torch's CPU kernels are deterministic for equal inputs)."""
    with torch.no_grad():
        for (path_a, name_a, x), (path_b, name_b, y) in zip(forward_state(a), forward_state(b), strict=True):
            if (path_a, name_a) != (path_b, name_b):
                return False
            if x is None or y is None:
                if x is not y:
                    return False
            elif not (x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)):
                return False
    return True


def twin_runs(models: dict) -> dict[str, str]:
    """{run: earlier run it repeats}: a run whose every weight (as computed), bias and buffer equals an earlier
    run's bit for bit is that run's computation, so it is run once. On this CPU the float32 fold is weight norm's
    own call on the same (g, v), so `folded_fp32` is `weight_norm`'s twin; where a fold rounds differently the run
    is its own (checked, not assumed: one pass over the weights)."""
    twins: dict[str, str] = {}
    for index, variant in enumerate(models):
        for earlier in list(models)[:index]:
            if earlier not in twins and _same_computation(models[earlier], models[variant]):
                twins[variant] = earlier
                break
    return twins


def weight_paths(model: DacModel) -> list[tuple[str, torch.nn.Module]]:
    """(module path, layer) of every weight-normed layer, in `weight_normed_layers` order."""
    names = {id(m): n for n, m in model.named_modules()}
    return [(names[id(layer)], layer) for layer in weight_normed_layers(model)]


def effective_weights(model: DacModel) -> dict[str, torch.Tensor]:
    """The weight each weight-normed layer uses in a forward, by module path (all of them at once: for small
    models; `weight_paths` walks them one at a time)."""
    with torch.no_grad():
        return {name: layer.weight.detach().clone() for name, layer in weight_paths(model)}


def audio(variant: str, seconds: float, seed: int, batch: int = 1) -> torch.Tensor:
    """A deterministic test signal: a few partials plus noise, in [-1, 1], shape (batch, 1, samples)."""
    rate = config(variant).sampling_rate
    n = int(round(seconds * rate))
    generator = torch.Generator().manual_seed(seed)
    t = torch.arange(n, dtype=torch.float64) / rate
    partials = sum(torch.sin(2 * math.pi * f * t + p) / (k + 1) for k, (f, p) in enumerate(
        zip((220.0, 440.0 * 1.01, 660.0 * 0.99), torch.rand(3, generator=generator, dtype=torch.float64).tolist(),
            strict=True)))
    signal = 0.4 * partials / 1.84 + 0.05 * torch.randn(batch, n, generator=generator, dtype=torch.float64)
    return signal.clamp(-1, 1).float().unsqueeze(1)
