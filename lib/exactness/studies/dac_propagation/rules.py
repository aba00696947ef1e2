"""The DAC propagation study's parameter rules (imports no torch: the command line checks them before a run)."""

from exactness.models import names
from exactness.workbook.parameter_rules import AtLeast, EachOf, OneOf
from exactness.workbook.study_rules import SEED, GpuFolder, Registration

CLIP_SECONDS = AtLeast(names.DAC_MIN_SECONDS, "shorter clips do not fill the encoder's strides")

class Checkpoint:
    """"" or a DAC checkpoint of the user's own (absolute, or relative to the project's root): the original
    codebase's `.pth` file or a transformers model directory. Read with `torch.load(weights_only=True)` or as
    safetensors: never executed."""

    def problem(self, value) -> str | None:
        from pathlib import Path

        from exactness.workbook.project import find_root

        if value == "":
            return None
        if not isinstance(value, str) or len(value) > 4096:
            return "must be \"\" or the path of a DAC checkpoint (.pth) or transformers model directory"
        path = Path(value) if Path(value).is_absolute() else find_root() / value
        if path.is_dir():
            return None if (path / "config.json").is_file() else (
                f"names the folder {value!r}, which is not a transformers model directory (no config.json)")
        if not path.is_file():
            return f"names {value!r}, which does not exist (absolute, or relative to the project's root)"
        if path.stat().st_size == 0:
            return f"names {value!r}, an empty file: not a checkpoint"
        return None


def _checkpoint_alone(values) -> list[str]:
    if values.get("checkpoint") and values.get("gpu_run"):
        return ["checkpoint and gpu_run: a GPU run's chain is of the random inits, not your weights; run one or the "
                "other"]
    return []


# The study frees and allocates layer outputs of tens of MB thousands of times; with glibc handing large blocks
# back at once (`dac_chunks.hand_back_large_blocks`, which keeps memory flat in the clip's length) every new
# 4 KiB page faults in. PyTorch's THP_MEM_ALLOC_ENABLE backs blocks of 2 MB and more with transparent huge pages.
# Where memory lives never changes the arithmetic (a test finds the table equal in a process started with it).
STUDY = Registration({
    "variant": OneOf(names.DAC_VARIANTS, "DAC variant"), "seconds": CLIP_SECONDS, "seed": SEED, "audio_seed": SEED,
    "inits": EachOf(OneOf(names.DAC_INITS, "init")),
    "other_variants": EachOf(OneOf(names.DAC_VARIANTS, "DAC variant"), allow_empty=True),
    "other_seconds": CLIP_SECONDS,
    "precisions": EachOf(OneOf(("tf32-conv", "tf32", "bf16", "fp16"), "precision"), allow_empty=True),
    "gpu_run": GpuFolder(("dac_chain.csv",)),
    "checkpoint": Checkpoint(),
}, kernel_environment={"THP_MEM_ALLOC_ENABLE": "1"}, across=_checkpoint_alone)
