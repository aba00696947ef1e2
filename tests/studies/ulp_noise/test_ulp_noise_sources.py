"""The ulp-noise study's `model` takes your own builder like any other subject: every module's output compared."""

import textwrap

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
