"""The names a study's parameters may choose from, importable without torch or transformers.

The command line checks a run's parameters before it creates anything, and it should not pay for importing
torch to do so. The modules that build the models own the full definitions; a test keeps these names equal
to theirs (`tests/models/test_names.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

# exactness.models.wav2vec2_family.MODELS: the four *ForPreTraining classes sharing the quantizer's argmax.
WAV2VEC2_FAMILY = (
    "Wav2Vec2ForPreTraining",
    "Wav2Vec2ConformerForPreTraining",
    "UniSpeechForPreTraining",
    "UniSpeechSatForPreTraining",
)
# The classes whose eval forward takes the quantizer's argmax (wav2vec2_family.quantizer_is_called): the
# others have nothing a near-tie could flip.
QUANTIZER_CALLED = ("Wav2Vec2ForPreTraining", "Wav2Vec2ConformerForPreTraining", "UniSpeechForPreTraining")
# exactness.models.dac.VARIANT_CONFIGS and dac.INITS.
DAC_VARIANTS = ("16khz", "24khz", "44khz", "tiny")
DAC_INITS = ("default", "variance_preserving")
# The encoders' strides need at least one hop of audio (512 samples at 44.1 kHz): 0.05 s fills every variant's.
DAC_MIN_SECONDS = 0.05
# exactness.models.tensor_subjects: what the per-tensor noise study compares.
DAC_ENCODER_PREFIX = "DacEncoder-"
NOISE_SUBJECTS = WAV2VEC2_FAMILY + tuple(DAC_ENCODER_PREFIX + variant for variant in DAC_VARIANTS)
# exactness.runtimes.graph_pool.SHAPE_MODES
SHAPE_MODES = ("dynamic", "static")


@dataclass(frozen=True)
class ClassTask:
    """One class and shape mode: a sweep item of the studies that export (its export, pool, screen or checks).
    A model id may hold '/' (a hub id), so nothing ever splits the key."""

    model: str
    shape_mode: str

    @property
    def resume_key(self) -> str:
        return f"{self.model}|{self.shape_mode}"

    @property
    def label(self) -> str:
        """How the terminal and the reports name it."""
        return f"{self.model} ({self.shape_mode})"

    def __str__(self) -> str:  # a shard's name and a sweep's label are made from it: two shape modes never mix
        return self.label
