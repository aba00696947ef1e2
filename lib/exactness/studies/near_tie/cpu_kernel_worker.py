"""The process a kernel set runs in (`cpu_kernel_sets.run_under`): torch loads here, after the set's environment is in
place; it screens the seeds, checks the candidates and the seeds it is asked to, and writes the tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from exactness.studies.near_tie.cpu_kernel_sets import CHECK_COLUMNS
from exactness.studies.near_tie.scale import is_candidate


def main(spec_path: str) -> None:
    import torch

    from exactness.studies.near_tie import screen as near_tie_screen
    from exactness.studies.near_tie import study as near_tie

    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    torch.set_num_threads(1)
    screen = near_tie_screen.screen(spec["models"], spec["seed_start"], spec["n_seeds"], workers=spec["workers"],
                                    progress_every=1e9, fast_paths=spec["fast_paths"])
    chosen = is_candidate(screen, spec["threshold"], spec["threshold_ulps"])
    for model, seeds in spec["also_check"].items():
        chosen |= (screen.model == model) & screen.seed.isin(seeds)
    checks = near_tie.run_checks(screen[chosen], float("inf"), [spec["shape_mode"]], max_checks=spec["max_checks"],
                                 atol=spec["atol"], rtol=spec["rtol"], what_if_checks=0, full_tensor_checks=0,
                                 workers=spec["workers"], progress_every=1e9, fast_paths=spec["fast_paths"]).checks
    screen.to_parquet(out / "screen.parquet")
    (checks[CHECK_COLUMNS] if len(checks) else pd.DataFrame(columns=CHECK_COLUMNS)).to_parquet(
        out / "checks.parquet")
    (out / "capability.txt").write_text(torch.backends.cpu.get_cpu_capability())


if __name__ == "__main__":
    main(sys.argv[1])
