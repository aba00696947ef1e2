"""The plain recipe: self-contained transformers code a user pastes to rebuild a seed's model and inputs
without this workbook, and the check that it rebuilds exactly what the workbook's builders do."""

from __future__ import annotations

from exactness.models.wav2vec2_family.inputs import tester_inputs
from exactness.models.wav2vec2_family.specs import build_model, spec


def plain_recipe(model: str) -> str:
    """Self-contained transformers code that rebuilds `model` and its inputs for `seed`: what a user runs
    without this workbook (the notebook shows it and executes it)."""
    s = spec(model)
    kwargs = ", ".join(f"{k}={v!r}" for k, v in s.config.items())
    return f"""import random, torch, transformers
from transformers.testing_utils import set_config_for_less_flaky_test, set_model_for_less_flaky_test
rng = random.Random(seed)
values = [rng.random() * {s.input_scale!r} for _ in range({s.batch_size} * {s.seq_length})]
mask = [rng.randint(0, 1) for _ in range({s.batch_size} * {s.seq_length})]
input_values = torch.tensor(values, dtype=torch.float).view({s.batch_size}, {s.seq_length})
attention_mask = torch.tensor(mask).view({s.batch_size}, {s.seq_length}); attention_mask[:, 0] = 1
config = transformers.{s.config_class}({kwargs})
config.return_loss = False
set_config_for_less_flaky_test(config)  # every norm eps in the config, the tester's included, becomes 1.0
torch.manual_seed(seed)
model = transformers.{s.model_class}(config).eval()
set_model_for_less_flaky_test(model)  # and every norm module's eps, set or not from the config
"""


def plain_recipe_matches(model: str, seed: int) -> dict[str, bool]:
    """Run `plain_recipe` as a user would paste it and compare with this workbook's builders."""
    plain = {"seed": seed}
    exec(plain_recipe(model), plain)
    rebuilt = build_model(model, seed)
    return {"weights": all(a.equal(b) for a, b in zip(plain["model"].state_dict().values(),
                                                      rebuilt.state_dict().values(), strict=True)),
            "inputs": plain["input_values"].equal(tester_inputs(model, seed)["input_values"])
            and plain["attention_mask"].equal(tester_inputs(model, seed)["attention_mask"])}


