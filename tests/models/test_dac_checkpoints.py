"""Checkpoints written here, in both formats, from a tiny DAC; then loaded back."""

import re
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from dac_files import write_original
from exactness.models import dac, dac_checkpoints


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


def _broken_original(tmp_path, plain, label, change):
    """A copy of a good original checkpoint with `change` applied to its state_dict."""
    state = dict(write_original(tmp_path / "good.pth", plain))
    checkpoint = torch.load(tmp_path / "good.pth", weights_only=True)
    change(state)
    torch.save({**checkpoint, "state_dict": state}, tmp_path / f"{label}.pth")
    return tmp_path / f"{label}.pth"


@pytest.mark.slow
def test_weight_g_far_too_small_is_named_instead_of_aborting_the_interpreter(tmp_path, plain):
    # (1,1,1) for (8,1,1) once freed memory it did not own (glibc abort, exit 134): run it where a crash
    # shows up as a return code rather than taking pytest down
    path = _broken_original(tmp_path, plain, "g111",
                            lambda s: s.__setitem__("encoder.block.0.weight_g", torch.ones(1, 1, 1)))
    script = (f"from exactness.models import dac_checkpoints as c\nfor fold in (True, False):\n"
              f"    try:\n        c.load_original({str(path)!r}, fold=fold)\n    except c.CheckpointError as e:\n"
              f"        print(e)\n    else:\n        print('loaded')\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-500:]}"
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 2 and all("encoder.block.0.weight_g" in line and "(1, 1, 1)" in line
                                   and "(8, 1, 1)" in line for line in lines), run.stdout


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("key, shape, expected", [
    ("encoder.block.0.weight_g", (9, 1, 1), (8, 1, 1)),
    ("encoder.block.0.weight_g", (8, 1), (8, 1, 1)),
    ("encoder.block.0.weight_v", (8, 1, 6), (8, 1, 7)),
])
def test_weight_norm_pair_of_wrong_shape_is_named_with_found_and_expected_shapes(tmp_path, plain, fold, key, shape,
                                                                                 expected):
    path = _broken_original(tmp_path, plain, "pair", lambda s: s.__setitem__(key, torch.ones(shape)))
    with pytest.raises(dac_checkpoints.CheckpointError) as error:
        dac_checkpoints.load_original(path, fold=fold)
    assert key in str(error.value) and str(shape) in str(error.value) and str(expected) in str(error.value)


@pytest.mark.parametrize("fold", [True, False])
def test_a_weight_v_with_a_zero_output_channel_is_named_instead_of_giving_nan_outputs(tmp_path, plain, fold):
    def zero_channel(state):
        v = state["encoder.block.0.weight_v"].clone()
        v[3] = 0.0
        state["encoder.block.0.weight_v"] = v

    path = _broken_original(tmp_path, plain, "zero", zero_channel)
    with pytest.raises(dac_checkpoints.CheckpointError, match=r"all-zero output channel .*encoder\.block\.0\.weight_v"):
        dac_checkpoints.load_original(path, fold=fold)


def test_empty_and_text_files_say_what_they_are_and_what_was_expected(tmp_path):
    (tmp_path / "empty.pth").write_bytes(b"")
    with pytest.raises(dac_checkpoints.CheckpointError, match=r"is empty \(0 bytes\); expected a PyTorch checkpoint"):
        dac_checkpoints.load_original(tmp_path / "empty.pth")
    (tmp_path / "text.pth").write_text("encoder_dim: 64\n")
    with pytest.raises(dac_checkpoints.CheckpointError) as error:
        dac_checkpoints.load_original(tmp_path / "text.pth")
    assert "16 bytes" in str(error.value) and "b'encoder_dim: 64" in str(error.value)
    assert "expected a PyTorch checkpoint (.pth) holding {'state_dict'" in str(error.value)


@pytest.mark.parametrize("key, value, message", [
    ("encoder.block.0.bias", "hello", "encoder.block.0.bias holds a str, expected a floating-point tensor"),
    ("encoder.block.0.bias", torch.zeros(8, dtype=torch.int32),
     "encoder.block.0.bias holds torch.int32, expected a floating-point tensor"),
    ("encoder.block.0.weight_v", torch.zeros(8, 1, 7, dtype=torch.int64),
     "encoder.block.0.weight_v holds torch.int64, expected a floating-point tensor"),
    ("encoder.block.0.weight_g", 3.0, "encoder.block.0.weight_g holds a float, expected a floating-point tensor"),
])
def test_values_that_are_not_float_tensors_are_named_with_their_type(tmp_path, plain, key, value, message):
    path = _broken_original(tmp_path, plain, "value", lambda s: s.__setitem__(key, value))
    for fold in (True, False):
        with pytest.raises(dac_checkpoints.CheckpointError, match=re.escape(message)):
            dac_checkpoints.load_original(path, fold=fold)


def test_state_dict_and_metadata_that_are_not_dicts_are_named(tmp_path, plain):
    write_original(tmp_path / "good.pth", plain)
    checkpoint = torch.load(tmp_path / "good.pth", weights_only=True)
    for label, broken in [("list", [1, 2]), ("state", {**checkpoint, "state_dict": [1]}),
                          ("metadata", {**checkpoint, "metadata": "kwargs"})]:
        torch.save(broken, tmp_path / f"{label}.pth")
        with pytest.raises(dac_checkpoints.CheckpointError, match="not an original DAC checkpoint"):
            dac_checkpoints.load_original(tmp_path / f"{label}.pth")


def _broken_directory(tmp_path, plain, change):
    plain.save_pretrained(tmp_path / "model")
    state = load_file(tmp_path / "model" / "model.safetensors")
    change(state)
    save_file(state, tmp_path / "model" / "model.safetensors", metadata={"format": "pt"})
    return tmp_path / "model"


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("encoder.conv1.bias"), "missing keys ['encoder.conv1.bias']"),
    (lambda s: s.__setitem__("encoder.extra", torch.zeros(2)), "unexpected keys ['encoder.extra']"),
    (lambda s: s.__setitem__("encoder.conv1.bias", torch.zeros(3)), "encoder.conv1.bias: checkpoint (3,), model (8,)"),
    (lambda s: s.__setitem__("encoder.conv1.bias", torch.zeros(8, dtype=torch.int32)),
     "encoder.conv1.bias holds torch.int32, expected a floating-point tensor"),
])
def test_transformers_directory_loads_strictly_against_the_models_keys(tmp_path, plain, change, message):
    # from_pretrained filled a missing key with fresh random weights and ignored an extra one
    path = _broken_directory(tmp_path, plain, change)
    with pytest.raises(dac_checkpoints.CheckpointError, match=re.escape(message)):
        dac_checkpoints.load_transformers_dir(path)


def test_transformers_directory_keeps_the_saved_dtype(tmp_path, plain):
    plain.double().save_pretrained(tmp_path / "model")
    loaded = dac_checkpoints.load_transformers_dir(tmp_path / "model")
    assert loaded.dtype == torch.float64
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), loaded.state_dict().values(),
                                                  strict=True))


def test_empty_weights_file_in_a_transformers_directory_is_named(tmp_path, plain):
    plain.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "model.safetensors").write_bytes(b"")
    with pytest.raises(dac_checkpoints.CheckpointError, match=r"model.safetensors is empty \(0 bytes\); expected"):
        dac_checkpoints.load_transformers_dir(tmp_path / "model")


def test_weight_norm_pair_of_mixed_float_dtypes_folds_in_the_wider_one(tmp_path, plain):
    path = _broken_original(tmp_path, plain, "mixed", lambda s: s.__setitem__(
        "encoder.block.0.weight_g", s["encoder.block.0.weight_g"].half()))
    state = torch.load(path, weights_only=True)["state_dict"]
    g, v = state["encoder.block.0.weight_g"], state["encoder.block.0.weight_v"]
    loaded = dac_checkpoints.load_original(path, fold=True)
    assert torch.equal(loaded.encoder.conv1.weight, torch._weight_norm(v, g.float(), 0))


@pytest.mark.parametrize("key, value, message", [
    ("encoder_rates", None, "encoder_rates is None, expected a list of positive ints"),
    ("encoder_dim", "8", "encoder_dim is '8' (str), expected a positive int"),
    ("encoder_dim", 8.0, "encoder_dim is 8.0 (float), expected a positive int"),
    ("codebook_size", 0, "codebook_size is 0 (int), expected a positive int"),
])
def test_architecture_kwargs_of_the_wrong_type_are_named(tmp_path, plain, key, value, message):
    write_original(tmp_path / "good.pth", plain)
    checkpoint = torch.load(tmp_path / "good.pth", weights_only=True)
    kwargs = {**checkpoint["metadata"]["kwargs"], key: value}
    torch.save({**checkpoint, "metadata": {"kwargs": kwargs}}, tmp_path / "kwargs.pth")
    with pytest.raises(dac_checkpoints.CheckpointError, match=re.escape(f"metadata.kwargs: {message}")):
        dac_checkpoints.load_original(tmp_path / "kwargs.pth")


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("key", ["encoder.block.0.weight_v", "encoder.block.0.weight_g"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_weight_norm_tensor_is_named_instead_of_giving_nan_outputs(tmp_path, plain, fold, key, bad):
    def poison(state):
        value = state[key].clone()
        value.view(-1)[0] = bad
        state[key] = value

    path = _broken_original(tmp_path, plain, "poisoned", poison)
    with pytest.raises(dac_checkpoints.CheckpointError, match=rf"non-finite values \(NaN or inf\) in \['{key}'\]"):
        dac_checkpoints.load_original(path, fold=fold)


def test_a_folder_given_as_an_original_checkpoint_is_named(tmp_path):
    with pytest.raises(dac_checkpoints.CheckpointError, match=r"is a folder, not a checkpoint file"):
        dac_checkpoints.load_original(tmp_path)


def _sharded_directory(tmp_path, plain, index_text: str):
    plain.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "model.safetensors.index.json").write_text(index_text)
    return tmp_path / "model"


@pytest.mark.parametrize("index_text, message", [
    ("{not json", r"model.safetensors.index.json is not JSON"),
    ('{"weight_map": []}', r"'weight_map' is a list, expected an object of tensor name -> file name"),
    ('{"metadata": {}}', r"'weight_map' is missing"),
    ('[1, 2]', r"holds a list, expected an object with 'weight_map'"),
    ('{"weight_map": {"encoder.conv1.bias": 3}}', r"'encoder.conv1.bias' maps to 3, not a file name"),
])
def test_a_broken_shard_index_is_a_checkpoint_error(tmp_path, plain, index_text, message):
    path = _sharded_directory(tmp_path, plain, index_text)
    with pytest.raises(dac_checkpoints.CheckpointError, match=message):
        dac_checkpoints.load_transformers_dir(path)


@pytest.mark.parametrize("entry", ["../outside.safetensors", "{tmp}/outside.safetensors",
                                   "sub/../../outside.safetensors"])
def test_a_shard_index_naming_a_file_outside_the_folder_is_refused_without_reading_it(tmp_path, plain, entry,
                                                                                    monkeypatch):
    plain.save_pretrained(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "model.safetensors").rename(tmp_path / "outside.safetensors")  # complete, loadable
    entry = entry.format(tmp=tmp_path)
    index = {"weight_map": {name: entry for name in plain.state_dict()}}
    import json

    path = _sharded_directory(tmp_path, plain, json.dumps(index))
    read = []
    real_load = dac_checkpoints.load_file
    monkeypatch.setattr(dac_checkpoints, "load_file", lambda file, *a, **k: read.append(file) or real_load(file))
    with pytest.raises(dac_checkpoints.CheckpointError, match=rf"names {re.escape(repr(entry))}, outside {path}"):
        dac_checkpoints.load_transformers_dir(path)
    assert read == []


def test_a_weights_file_that_is_a_folder_is_named(tmp_path, plain):
    plain.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "model.safetensors").unlink()
    (tmp_path / "model" / "model.safetensors").mkdir()
    with pytest.raises(dac_checkpoints.CheckpointError, match=r"model.safetensors is a folder, not a file"):
        dac_checkpoints.load_transformers_dir(tmp_path / "model")


def test_a_trained_checkpoint_runs_its_own_g_and_v_in_every_run(tmp_path, plain):
    write_original(tmp_path / "trained.pth", plain, trained=True)
    loaded = dac_checkpoints.load(tmp_path / "trained.pth", "tiny")
    assert getattr(loaded.encoder.conv1, dac.GAIN) is not None and not hasattr(loaded.encoder.conv1, "parametrizations")
    signal = dac.audio("tiny", 0.25, 0)
    as_normed = dac_checkpoints.load_original(tmp_path / "trained.pth", fold=False)
    as_folded = dac_checkpoints.load_original(tmp_path / "trained.pth", fold=True)
    with torch.no_grad():
        for shared in (False, True):
            runs = {v: dac.build_variant(loaded, v, shared=shared) for v in dac.VARIANTS}
            # the original's recomputation and the float32 fold of the same (g, v), bit for bit
            assert torch.equal(runs["weight_norm"](signal).audio_values, as_normed(signal).audio_values)
            assert torch.equal(runs["folded_fp32"].encoder.conv1.weight, as_folded.encoder.conv1.weight)
            # the float64 run computes the same model (g, not ||v||, scales each channel): within rounding of it
            double = runs["float64"](signal.double()).audio_values
            assert torch.allclose(double.float(), as_normed(signal).audio_values, atol=1e-5)
            for variant, model in runs.items():  # one copy of the weights or one each: the same numbers
                x = signal.double() if variant == "float64" else signal
                alone = dac.build_variant(loaded, variant, shared=not shared)(x).audio_values
                assert torch.equal(model(x).audio_values, alone), (variant, shared)
        # ||v|| != g: the float64 fold of the checkpoint's (g, v) is not the fold of (||W||, W) a template would run
        w = dac.build_variant(loaded, "folded_fp64").encoder.conv1.weight
        assert not torch.equal(w, dac.build_variant(plain, "folded_fp64").encoder.conv1.weight)
        assert torch.allclose(w, plain.encoder.conv1.weight, rtol=1e-5, atol=1e-7)  # the same weights W, rounded


def test_load_refuses_a_checkpoint_of_another_configuration_and_keeps_a_folded_directory_as_it_is(tmp_path, plain):
    write_original(tmp_path / "tiny.pth", plain)
    with pytest.raises(dac_checkpoints.CheckpointError, match=r"is the tiny configuration, not variant '44khz': "
                                                              r"run it with -p variant tiny"):
        dac_checkpoints.load(tmp_path / "tiny.pth", "44khz")
    # said from the configuration alone, before the weights are built or checked (here they are missing)
    torch.save({"state_dict": {}, "metadata": torch.load(tmp_path / "tiny.pth")["metadata"]}, tmp_path / "bare.pth")
    with pytest.raises(dac_checkpoints.CheckpointError, match=r"is the tiny configuration, not variant '44khz'"):
        dac_checkpoints.load(tmp_path / "bare.pth", "44khz")
    plain.save_pretrained(tmp_path / "model")
    folded = dac_checkpoints.load(tmp_path / "model", "tiny")
    assert not hasattr(folded.encoder.conv1, dac.GAIN)  # weight norm recomputes g = ||W|| from folded weights
    pairs = zip(plain.state_dict().values(), folded.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    plain.to(torch.float64).save_pretrained(tmp_path / "double")  # saved in float64: run from float32 all the same
    assert next(dac_checkpoints.load(tmp_path / "double", "tiny").parameters()).dtype == torch.float32
    (tmp_path / "double" / "model.safetensors").unlink()  # a directory's configuration is refused before its weights
    with pytest.raises(dac_checkpoints.CheckpointError, match=r"is the tiny configuration, not variant '16khz'"):
        dac_checkpoints.load(tmp_path / "double", "16khz")
    other = dac.config("tiny")
    other.n_codebooks = 3
    assert dac.variant_of(other) is None and dac.variant_of(dac.config("16khz")) == "16khz"
