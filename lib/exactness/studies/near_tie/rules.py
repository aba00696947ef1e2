"""The near-tie study's parameter rules (imports no torch: the command line checks them before a run)."""

from exactness.models import names
from exactness.workbook.machine import KERNEL_SETS
from exactness.workbook.parameter_rules import AtLeast, EachOf, OneOf, Positive, Switch
from exactness.workbook.study_rules import (
    COUNT,
    SCHEDULER,
    SEED,
    SEEDS,
    TOLERANCE,
    WORKERS,
    EagerPairs,
    GpuFolder,
    Registration,
)


def kernel_sets_here(values) -> list[str]:
    """Every kernel set asked for must be one this CPU runs: refused before the environment study, not after."""
    from exactness.studies.near_tie.cpu_kernel_sets import unavailable

    kernel_sets = values.get("cpu_kernels")
    return unavailable(kernel_sets) if isinstance(kernel_sets, list) else []


# what `gpu_run.read` reads (named here too: the rules module imports neither pandas nor torch)
GPU_RUN_FILES = ("pairs.parquet", "noise_law.parquet", "smallest_gaps.parquet", "tf32_probe.csv")

STUDY = Registration({
    "models": EachOf(OneOf(names.WAV2VEC2_FAMILY, "model"), needs_one_of=names.QUANTIZER_CALLED,
                     why_needed="the others never call their quantizer in eval mode: no argmax to screen"),
    "seed_start": SEED, "n_seeds": SEEDS, "threshold": Positive(), "scheduler": SCHEDULER,
    "threshold_ulps": AtLeast(0, "0 chooses candidates by the absolute threshold"),
    "cpu_kernels": EachOf(OneOf(tuple(KERNEL_SETS), "kernel set")),
    "shape_modes": EachOf(OneOf(names.SHAPE_MODES, "shape mode")),
    "max_checks": AtLeast(0, "0 checks every candidate"), "replay_seeds": EachOf(SEED, allow_empty=True),
    "defect_seeds": COUNT, "what_if_checks": COUNT, "workers": WORKERS, "atol": TOLERANCE, "rtol": TOLERANCE,
    "fast_paths": Switch("every speed-up off: plain builds, a fresh export and session per seed, plain lookups"),
    "pairs": EagerPairs(), "pair_calibration_seeds": AtLeast(10, maximum=100_000, whole=True),
    "gpu_run": GpuFolder(GPU_RUN_FILES),
}, across=kernel_sets_here,
    # its answers on the wav2vec2 family (40,000 seeds a class) settle discrete_ops' (2,000): it runs first, so that
    # discrete_ops' report shows them
    runs_before=("discrete_ops",))
