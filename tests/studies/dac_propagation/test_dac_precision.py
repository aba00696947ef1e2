"""The DAC fix's comparison in another precision: TF32 makes the first block jump, float32 does not."""

from __future__ import annotations

import pandas as pd

from exactness.models import dac
from exactness.runtimes.sides import Side
from exactness.studies.dac_propagation import answers as propagation_answers
from exactness.studies.dac_propagation import precision


def test_tf32_makes_the_first_block_jump_where_float32_stays_at_rounding():
    plain = dac.template("tiny", 0, "variance_preserving")
    audio = dac.audio("tiny", 0.25, 0)
    fp32 = precision.encoder_chain(plain, audio, Side.parse("eager:cpu:fp32")).set_index("layer").max_abs_diff
    tf32 = precision.encoder_chain(plain, audio, Side.parse("eager:cpu:tf32-conv")).set_index("layer").max_abs_diff
    assert fp32[precision.FIRST] == tf32[precision.FIRST]  # a one-channel first convolution stays in float32
    assert tf32[precision.JUMP] > 50 * fp32[precision.JUMP]


def test_a_pattern_reproduces_only_within_the_factor_on_both_layers():
    chain = pd.DataFrame({"side": ["a", "a", "b", "b"], "layer": [precision.FIRST, precision.JUMP] * 2,
                          "max_abs_diff": [1.2e-7, 2e-4, 1.2e-7, 2e-6]})
    found = {p.side: p.reproduces for p in precision.patterns(chain)}
    assert found == {"a": True, "b": False}


def test_the_committed_gpu_run_reproduces_the_pattern_in_tf32_and_not_in_fp32():
    _, chain = precision.read_gpu_chain("etc/gpu_runs/h200-2026-12-04")
    found = {p.side: p.reproduces for p in precision.patterns(chain[chain.init == "variance_preserving"])}
    assert found["eager CUDA TF32 convolutions"] and not found["eager CUDA fp32"]


def test_another_model_than_the_investigations_is_not_set_against_its_figures():
    chain = pd.DataFrame({"side": ["a", "a"], "layer": [precision.FIRST, precision.JUMP], "init": ["x", "x"],
                          "max_abs_diff": [1.2e-7, 2e-4]})
    (line,) = propagation_answers.precision_answers(chain, "tiny")
    assert line.cause == "not comparable" and "tiny" in line.proof
    gpu = chain.assign(side="eager CUDA TF32 convolutions (GPU run)")  # a GPU run's chain is the 44.1 kHz model
    assert propagation_answers.precision_answers(gpu, "tiny")[0].cause != "not comparable"
