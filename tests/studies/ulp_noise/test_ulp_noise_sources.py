"""The ulp-noise study's `model` takes your own builder like any other subject: every module's output compared."""

import textwrap

from builder_files import pair_builder
from exactness.studies.ulp_noise import rules
from exactness.studies.ulp_noise import study as ulp_noise


def test_your_builder_is_compared_tensor_by_tensor(tmp_path):
    path = tmp_path / "two_layers.py"
    path.write_text(textwrap.dedent("""
        import torch

        def build(seed):
            torch.manual_seed(seed)
            model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
            return model, {"input": torch.randn(3, 8)}
        """))
    name = f"{path}:build"
    assert rules.STUDY.rules["model"].problem(name) is None
    noise = ulp_noise.noise_draws(ulp_noise.noise_pool(name, "static"), range(2), workers=1, progress_every=1e9)
    assert set(noise.seed) == {0, 1}
    assert {"0", "1", "2"} <= set(noise.tensor) and noise.model_output.any()  # every module, then the output
    assert (noise.max_abs_diff >= 0).all()


def test_a_builder_returning_a_tuple_is_compared_at_each_output_and_named_by_them(tmp_path):
    """Outputs under the exporter's names (`0`, `1.0`, ...); a model with no tensors of its own to name is named by
    its outputs, so the settings comparison has tensors to measure."""
    path = pair_builder(tmp_path / "pair.py", "h, (torch.tanh(h), h.argmax(-1))")
    pool = ulp_noise.noise_pool(f"{path}:build", "static")
    noise = ulp_noise.noise_draws(pool, range(1), workers=1, progress_every=1e9)
    outputs = noise[noise.model_output]
    assert set(outputs.tensor) == {"0", "1.0", "1.1"} and set(outputs.label) == {"0", "1.0", "1.1"}
    settings = ulp_noise.settings(pool, [0])
    assert {"setting", "label"} <= set(settings.columns) and set(settings.label) == {"0", "1.0", "1.1"}
    assert set(settings.graph) == {ulp_noise.AS_EXPORTED}  # a model's outputs: read from the graph as exported
