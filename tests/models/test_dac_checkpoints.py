"""Checkpoints written here, in both formats, from a tiny DAC; then loaded back."""

import pytest
import torch

from exactness.models import dac, dac_checkpoints


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


def write_original(path, plain):
    normed = dac.build_variant(plain, "weight_norm")
    state = {}
    for name, value in normed.state_dict().items():
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


@pytest.fixture
def plain():
    return dac.template("tiny", 1)


def test_original_checkpoint_loads_folded_and_as_weight_norm(tmp_path, plain):
    write_original(tmp_path / "weights.pth", plain)
    signal = dac.audio("tiny", 0.25, 0)
    expected = dac.build_variant(plain, "weight_norm")
    with torch.no_grad():
        want = expected(signal).audio_values
        for fold in (True, False):
            loaded = dac_checkpoints.load_original(tmp_path / "weights.pth", fold=fold)
            assert hasattr(loaded.encoder.conv1, "parametrizations") != fold
            assert torch.equal(loaded(signal).audio_values, want)


def test_transformers_directory_round_trips(tmp_path, plain):
    plain.save_pretrained(tmp_path / "model")
    loaded = dac_checkpoints.load_transformers_dir(tmp_path / "model")
    pairs = zip(plain.state_dict().values(), loaded.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    with pytest.raises(dac_checkpoints.CheckpointError, match="no config.json"):
        dac_checkpoints.load_transformers_dir(tmp_path)


def test_missing_unexpected_and_misshaped_keys_are_named(tmp_path, plain):
    state = write_original(tmp_path / "good.pth", plain)
    checkpoint = torch.load(tmp_path / "good.pth", weights_only=True)
    for label, change, message in [
        ("missing", lambda s: s.pop("encoder.block.0.bias"), "missing keys \\['encoder.conv1.bias'\\]"),
        ("unexpected", lambda s: s.__setitem__("encoder.extra.weight", torch.zeros(1)), "unexpected keys"),
        ("shape", lambda s: s.__setitem__("encoder.block.0.bias", torch.zeros(3)), "shape mismatches"),
        ("half pair", lambda s: s.pop("encoder.block.0.weight_g"), "come in pairs"),
    ]:
        broken = dict(state)
        change(broken)
        torch.save({**checkpoint, "state_dict": broken}, tmp_path / f"{label}.pth")
        with pytest.raises(dac_checkpoints.CheckpointError, match=message):
            dac_checkpoints.load_original(tmp_path / f"{label}.pth")


def test_broken_files_and_metadata_are_named(tmp_path, plain):
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(dac_checkpoints.CheckpointError, match="not a readable torch checkpoint"):
        dac_checkpoints.load_original(tmp_path / "junk.pth")
    torch.save({"state_dict": {}}, tmp_path / "bare.pth")
    with pytest.raises(dac_checkpoints.CheckpointError, match="lacks 'state_dict' or 'metadata.kwargs'"):
        dac_checkpoints.load_original(tmp_path / "bare.pth")
    with pytest.raises(dac_checkpoints.CheckpointError, match="no checkpoint at"):
        dac_checkpoints.load_original(tmp_path / "absent.pth")
    torch.save({"state_dict": {}, "metadata": {"kwargs": {"encoder_dim": 8}}}, tmp_path / "kwargs.pth")
    with pytest.raises(dac_checkpoints.CheckpointError, match="metadata.kwargs lacks"):
        dac_checkpoints.load_original(tmp_path / "kwargs.pth")
