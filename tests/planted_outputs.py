"""Two output dicts with planted differences of every kind the export test's check treats differently: a few or
many elements off, NaN on one side or both, inf, an element just past the tolerance, another shape or dtype, a
0-d, one-element and empty output; `names` adds outputs of these names (the ones a rule may leave out)."""

import numpy as np
import torch


def planted_case(rng: np.random.Generator, names: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """Two output dicts with a planted difference of a random kind in some outputs."""
    expected, actual = {}, {}
    for index in range(int(rng.integers(1, 5))):
        name = str(rng.choice(names)) if names and rng.random() < 0.5 else f"out_{rng.integers(0, 99):02d}_{index}"
        kind = rng.choice(["float", "scalar", "int", "one", "empty", "half"])
        shape = {"float": (int(rng.integers(2, 60)),), "scalar": (), "int": (int(rng.integers(2, 40)),),
                 "one": (1,), "empty": (0, 3), "half": (int(rng.integers(2, 60)),)}[kind]
        if kind == "int":
            value = torch.from_numpy(rng.integers(0, 5, size=shape))
        else:
            value = torch.from_numpy(rng.normal(size=shape).astype(np.float16 if kind == "half" else np.float32))
        moved = value.clone()
        change = rng.choice(["none", "few", "many", "nan", "nan_both", "inf", "edge", "half_noise", "shape", "dtype"])
        flat = moved.reshape(-1)
        if flat.numel():
            k = 1 if change == "few" and flat.numel() < 25 else int(rng.integers(1, max(2, flat.numel() // 20 + 1)))
            at = torch.from_numpy(rng.choice(flat.numel(), size=min(k, flat.numel()), replace=False))
            if change == "few" or change == "many":
                flat[at] += 1 if kind == "int" else 0.5
                if change == "many":
                    flat += 1 if kind == "int" else 0.5
            elif change in ("nan", "nan_both", "inf") and kind != "int":
                flat[at] = {"nan": float("nan"), "nan_both": float("nan"), "inf": float("inf")}[change]
                if change == "nan_both":
                    value.reshape(-1)[at] = float("nan")
            elif change == "edge" and kind != "int":
                flat[at] = flat[at] + (1e-3 + 1e-3 * flat[at].abs())
            elif change == "half_noise" and kind != "int":
                flat[at] = flat[at] + 0.01  # within a widened half-precision tolerance, outside the test's own
        if change == "shape":
            moved = torch.cat([moved.reshape(-1), moved.reshape(-1)[:1]]) if moved.numel() else torch.zeros(1)
        elif change == "dtype":
            moved = moved.double()
        expected[name], actual[name] = value, moved
    return actual, expected
