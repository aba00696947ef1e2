"""The DAC propagation study's parameter rules (imports no torch: the command line checks them before a run)."""

from exactness.models import names
from exactness.workbook.parameter_rules import AtLeast, EachOf, OneOf
from exactness.workbook.study_rules import SEED, GpuFolder, Registration

CLIP_SECONDS = AtLeast(names.DAC_MIN_SECONDS, "shorter clips do not fill the encoder's strides")

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
}, kernel_environment={"THP_MEM_ALLOC_ENABLE": "1"})
