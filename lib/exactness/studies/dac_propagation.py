"""How a tiny weight difference grows through the DAC encoder and decoder, and why the codes survive it.

Activations are not copied: the two reference runs (weight norm recomputed in float32, and float64) keep
their layer outputs as the forward produces them, and every other run compares its outputs against them
inside the hook and keeps only the statistics.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from exactness.models import dac

REFERENCES = ("weight_norm", "float64")


def layers(model) -> list[tuple[str, str, str]]:
    """(label, module path, role) along the encoder then the decoder; role 'main' is the path the signal
    takes, 'inner' a residual unit inside a block (its growth is measured from the block's input)."""
    rows = [("encoder.Conv1", "encoder.conv1", "main")]
    for i, _ in enumerate(model.encoder.block):
        rows += [(f"encoder.Block{i}.res_unit{j}", f"encoder.block.{i}.res_unit{j}", "inner") for j in (1, 2, 3)]
        rows.append((f"encoder.Block{i}", f"encoder.block.{i}", "main"))
    rows += [("encoder.Snake1", "encoder.snake1", "main"), ("encoder.Conv2", "encoder.conv2", "main"),
             ("decoder.Conv1", "decoder.conv1", "main")]
    for i, _ in enumerate(model.decoder.block):
        rows += [(f"decoder.Block{i}.res_unit{j}", f"decoder.block.{i}.res_unit{j}", "inner") for j in (1, 2, 3)]
        rows.append((f"decoder.Block{i}", f"decoder.block.{i}", "main"))
    rows += [("decoder.Snake1", "decoder.snake1", "main"), ("decoder.Conv2", "decoder.conv2", "main")]
    return rows


class _Hooks:
    def __init__(self, model, paths, hook):
        modules = dict(model.named_modules())
        self.handles = [modules[p].register_forward_hook(lambda m, a, out, p=p: hook(p, out)) for p in paths]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()


def _cast(x: torch.Tensor, model) -> torch.Tensor:
    return x.to(next(model.parameters()).dtype)


@torch.no_grad()
def _run(model, audio: torch.Tensor, codes: torch.Tensor, hook, paths) -> dict:
    with _Hooks(model, paths, hook):
        encoded = model.encode(_cast(audio, model))
        decoded = model.decode(audio_codes=codes).audio_values  # the decoder fed identical codes
    return {"codes": encoded.audio_codes, "quantized": encoded.quantized_representation, "audio": decoded}


def propagate(plain, audio: torch.Tensor, variants=dac.VARIANTS) -> tuple[pd.DataFrame, dict]:
    """Error per layer of every variant against each reference (float64 first, then weight norm), plus
    each variant's codes, quantized representation and audio decoded from the shared codes."""
    order = [v for v in ("float64", "weight_norm") if v in variants] + [v for v in variants if v not in REFERENCES]
    paths = [p for _, p, _ in layers(plain)]
    models = {v: dac.build_variant(plain, v) for v in order}
    with torch.no_grad():
        codes = models["weight_norm"].encode(audio).audio_codes  # every decoder gets these
    stored: dict[str, dict] = {}
    results, rows = {}, []
    for variant in order:
        stats: dict[str, dict] = {}
        keep = stored.setdefault(variant, {}) if variant in REFERENCES else None

        def measure(path, out, stats=stats, keep=keep, variant=variant):
            value = out.detach()
            if keep is not None:
                keep[path] = value
            wide = value.double()
            entry = stats.setdefault(path, {"act_rms": float(wide.square().mean().sqrt())})
            for reference, activations in stored.items():
                if reference != variant:
                    error = (wide - activations[path].double()).abs()
                    entry[reference] = (float(error.max()), float(error.mean()))

        results[variant] = _run(models[variant], audio, codes, measure, paths)
        for depth, (label, path, role) in enumerate(layers(plain)):
            for reference in (r for r in REFERENCES if r in stats[path]):
                max_err, mean_err = stats[path][reference]
                rms = stats[path]["act_rms"]
                rows.append({"variant": variant, "against": reference, "layer": label, "depth": depth, "role": role,
                             "max_abs_err": max_err, "mean_abs_err": mean_err, "act_rms": rms,
                             "rel_err": max_err / rms if rms else np.nan})
    return _with_growth(pd.DataFrame(rows)), {"codes": codes, "results": results, "models": models}


def _with_growth(table: pd.DataFrame) -> pd.DataFrame:
    """growth: error over the error at the input of this layer (the previous main-path layer), as the seed
    measured it; a residual unit is measured from its block's input."""
    table = table.sort_values(["variant", "against", "depth"]).copy()
    growth = []
    for _, group in table.groupby(["variant", "against"], sort=False):
        previous_main = np.nan
        for row in group.itertuples():
            if row.layer == "decoder.Conv1":  # the decoder starts from identical codes: a new chain
                previous_main = np.nan
            growth.append(row.max_abs_err / previous_main if previous_main else np.nan)
            if row.role == "main":
                previous_main = row.max_abs_err
    table["growth"] = growth
    return table.reset_index(drop=True)


def amplifiers(propagation: pd.DataFrame, variant: str, against: str, top: int = 3) -> pd.DataFrame:
    encoder_main = propagation[(propagation.variant == variant) & (propagation.against == against)
                               & (propagation.role == "main") & propagation.layer.str.startswith("encoder.")]
    return encoder_main.nlargest(top, "growth")[["layer", "growth", "max_abs_err"]]


def _seed_chain(propagation: pd.DataFrame) -> pd.DataFrame:
    """The seed's comparison: weights folded differently (folded_fp64) against weight norm recomputed."""
    return propagation[(propagation.variant == "folded_fp64") & (propagation.against == "weight_norm")]


def encoder_growth(propagation: pd.DataFrame) -> pd.DataFrame:
    """Per init, from Conv1 to the encoder output: error, its growth, the activations' growth, and the
    growth of the relative error (which tells error growth from activation growth)."""
    rows = []
    for init, chain in _seed_chain(propagation).groupby("init", sort=False):
        first = chain[chain.layer == "encoder.Conv1"].iloc[0]
        last = chain[chain.layer == "encoder.Conv2"].iloc[0]
        error = last.max_abs_err / first.max_abs_err if first.max_abs_err else float("inf")
        activations = last.act_rms / first.act_rms
        rows.append({"init": init, "conv1_error": first.max_abs_err, "encoder_error": last.max_abs_err,
                     "amplification": error, "activation_growth": activations,
                     "relative_error_growth": error / activations})
    return pd.DataFrame(rows).set_index("init")


def beside_seed(propagation: pd.DataFrame) -> pd.DataFrame:
    """Max error per encoder layer under each init, with seed 002's figure for the same layer."""
    from exactness import reference

    seed = reference.table(reference.SEED_002)
    seed_layers = seed[seed.section == "propagation"].set_index("key").value
    chain = _seed_chain(propagation)
    table = chain[chain.layer.isin(seed_layers.index)].pivot_table(index="layer", columns="init",
                                                                  values="max_abs_err", sort=False)
    table["seed_002"] = seed_layers
    return table


def weight_table(models: dict) -> pd.DataFrame:
    """Per weight-normed layer, how far each variant's effective weight is from the recomputed one."""
    reference = dac.effective_weights(models["weight_norm"])
    rows = []
    for variant, model in models.items():
        weights = dac.effective_weights(model)
        rows += [{"variant": variant, "layer": name, "max_abs_diff": float((w.double() - reference[name].double())
                                                                           .abs().max())}
                 for name, w in weights.items()]
    return pd.DataFrame(rows)


@torch.no_grad()
def code_margins(model, audio: torch.Tensor) -> pd.DataFrame:
    """Per codebook and frame: how far the chosen codebook entry beats the runner-up (the near-tie view:
    a code only flips when the latent error exceeds this margin)."""
    latents = {}
    handles = [q.in_proj.register_forward_hook(lambda m, a, out, k=k: latents.__setitem__(k, out.detach()))
               for k, q in enumerate(model.quantizer.quantizers)]
    try:
        model.encode(_cast(audio, model))
    finally:
        for handle in handles:
            handle.remove()
    rows = []
    for k, q in enumerate(model.quantizer.quantizers):
        latent = latents[k]
        encodings = torch.nn.functional.normalize(latent.permute(0, 2, 1).reshape(-1, latent.shape[1]))
        codebook = torch.nn.functional.normalize(q.codebook.weight)
        # the same distance DacVectorQuantize.decode_latents maximises
        squared = encodings.pow(2).sum(1, keepdim=True)
        dist = -(squared - 2 * encodings @ codebook.t()) + codebook.pow(2).sum(1).unsqueeze(0)
        top = dist.topk(2, dim=1).values
        margin = (top[:, 0] - top[:, 1]).double()
        rows.append({"codebook": k, "frames": margin.numel(), "min_margin": float(margin.min()),
                     "median_margin": float(margin.median()), "margins_below_1e-4": int((margin < 1e-4).sum())})
    return pd.DataFrame(rows)


def code_agreement(codes: dict[str, torch.Tensor], reference: str = "weight_norm") -> pd.DataFrame:
    rows = []
    for variant, value in codes.items():
        differs = (value != codes[reference])
        for k in range(value.shape[1]):
            rows.append({"variant": variant, "codebook": k, "fraction_differing": float(differs[:, k].double().mean())})
    return pd.DataFrame(rows)


@torch.no_grad()
def codec_errors(extra: dict, audio: torch.Tensor) -> pd.DataFrame:
    """Per variant (from `propagate`'s results): codec error (own decode against the input, over the samples
    both have), decoded audio from the shared codes against float64's, and decoding from codes against
    decoding from the quantized representation."""
    results, models = extra["results"], extra["models"]
    reference = results["float64"]["audio"].double()
    rows = []
    for variant, model in models.items():
        from_codes = results[variant]["audio"].double()
        own = model.decode(results[variant]["quantized"]).audio_values.double()
        n = min(own.shape[-1], audio.shape[-1])
        error = own[..., :n] - audio[:, 0, :n].double()
        rows.append({"variant": variant, "codec_max_abs_err": float(error.abs().max()),
                     "codec_rms_err": float(error.square().mean().sqrt()),
                     "decoded_vs_float64": float((from_codes - reference).abs().max()),
                     "codes_vs_quantized_decode": float((from_codes - own).abs().max()),
                     "samples_in": audio.shape[-1], "samples_out": own.shape[-1]})
    return pd.DataFrame(rows)


from exactness.studies.dac_propagation_findings import block_table, findings, seed_chain  # noqa: E402,F401
