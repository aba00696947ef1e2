"""A side is one typed value: parsed from text, labelled (emulated says so), refused in one line when it cannot run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from exactness.runtimes.sides import DEFAULT_PAIR, Device, Pair, Precision, Runtime, Side, SideError


def test_a_side_parses_labels_and_says_when_it_is_emulated():
    side = Side.parse("eager:cpu:tf32-conv")
    assert (side.runtime, side.device, side.precision) == (Runtime.EAGER, Device.CPU, Precision.TF32_CONV)
    assert side.emulated and side.label == "eager CPU TF32 convolutions (emulated)"
    cuda = Side.parse("EAGER:CUDA:tf32")
    assert not cuda.emulated and cuda.label == "eager CUDA TF32"
    assert cuda.cuda_flags == {"cudnn.allow_tf32": True, "cuda.matmul.allow_tf32": True}
    assert Side.parse("eager:cuda:fp32").cuda_flags == {"cudnn.allow_tf32": False, "cuda.matmul.allow_tf32": False}
    assert DEFAULT_PAIR.spec == "eager:cpu:fp32 vs ort:cpu:fp32"


@pytest.mark.parametrize(("text", "words"), [
    ("eager:cpu", "write runtime:device:precision"),
    ("eager:tpu:fp32", "'tpu' is not a device (cpu, cuda)"),
    ("eager:cpu:fp8", "'fp8' is not a precision"),
    ("ort:cpu:tf32", "ONNX Runtime runs here with its CPU provider in fp32 only"),
])
def test_a_bad_side_is_one_line_naming_it(text, words):
    with pytest.raises(SideError) as error:
        Side.parse(text)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_a_pair_needs_two_different_sides():
    assert Pair.parse("eager:cpu:fp32 vs eager:cuda:tf32-conv").needs_cuda
    with pytest.raises(SideError, match="compared with itself"):
        Pair.parse("eager:cpu:fp32 vs eager:cpu:fp32")
    with pytest.raises(SideError, match="SIDE vs SIDE"):
        Pair.parse("eager:cpu:fp32")


def test_parsing_a_side_imports_no_torch():
    """The parameter rules parse sides before a run: in a fraction of a second, without torch."""
    code = "import sys; from exactness.runtimes.sides import Pair; Pair.parse('eager:cpu:fp32 vs eager:cpu:bf16'); " \
           "print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_an_ort_side_runs_no_python():
    with pytest.raises(SideError, match="only an eager side"), Side(Runtime.ORT).applied():
        pass
