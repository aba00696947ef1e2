"""DAC checkpoints in the original codebase's layout, written by the tests that load them back."""

import torch

from exactness.models import dac


def _original_key(name: str, n_blocks: int) -> str:
    """The inverse of map_key, for writing test checkpoints in the original layout."""
    units = {"snake1": 0, "conv1": 1, "snake2": 2, "conv2": 3}
    parts = name.split(".")
    if name.startswith("quantizer."):
        return name
    if parts[0] == "encoder":
        if parts[1] == "conv1":
            return "encoder.block.0." + ".".join(parts[2:])
        if parts[1] == "conv2":
            return f"encoder.block.{n_blocks + 2}." + ".".join(parts[2:])
        if parts[1] == "snake1":
            return f"encoder.block.{n_blocks + 1}.alpha"
        block = int(parts[2]) + 1
        if parts[3].startswith("res_unit"):
            return f"encoder.block.{block}.block.{int(parts[3][-1]) - 1}.block.{units[parts[4]]}." + ".".join(parts[5:])
        return f"encoder.block.{block}.block.{3 if parts[3] == 'snake1' else 4}." + ".".join(parts[4:])
    if parts[1] == "conv1":
        return "decoder.model.0." + ".".join(parts[2:])
    if parts[1] == "conv2":
        return f"decoder.model.{n_blocks + 2}." + ".".join(parts[2:])
    if parts[1] == "snake1":
        return f"decoder.model.{n_blocks + 1}.alpha"
    block = int(parts[2]) + 1
    if parts[3].startswith("res_unit"):
        return f"decoder.model.{block}.block.{int(parts[3][-1]) + 1}.block.{units[parts[4]]}." + ".".join(parts[5:])
    return f"decoder.model.{block}.block.{0 if parts[3] == 'snake1' else 1}." + ".".join(parts[4:])


def write_original(path, plain, trained=False):
    """`plain` as an original checkpoint: (g, v) = (||W||, W), or with `trained` each v scaled per output channel
    (a trained checkpoint's ||v|| is not its g; the weights W = g v / ||v|| stay the same)."""
    normed = dac.build_variant(plain, "weight_norm")
    state = {}
    for name, value in normed.state_dict().items():
        if trained and name.endswith("original1"):
            value = value * torch.linspace(0.3, 7.9, value.shape[0]).reshape(-1, *[1] * (value.dim() - 1))
        name = name.replace("parametrizations.weight.original0", "weight_g").replace(
            "parametrizations.weight.original1", "weight_v")
        state[_original_key(name, len(plain.config.downsampling_ratios))] = value
    c = plain.config
    kwargs = {"encoder_dim": c.encoder_hidden_size, "encoder_rates": list(c.downsampling_ratios),
              "latent_dim": c.hidden_size, "decoder_dim": c.decoder_hidden_size,
              "decoder_rates": list(c.upsampling_ratios), "n_codebooks": c.n_codebooks,
              "codebook_size": c.codebook_size, "codebook_dim": c.codebook_dim, "quantizer_dropout": 0.0,
              "sample_rate": c.sampling_rate}
    torch.save({"state_dict": state, "metadata": {"kwargs": kwargs}}, path)
    return state
