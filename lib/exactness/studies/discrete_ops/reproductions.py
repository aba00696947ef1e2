"""The smallest reproduction of a named pass, to report upstream: a few lines of plain torch/ONNX code, run here.

A reproduction sets `with_pass`, `without_pass` and `eager` (numpy arrays): the pass's output, the same
computation without the pass, and eager PyTorch. It reproduces when the pass's output differs from eager (a
value non-finite on one side only, or apart by more than `TOLERANCE`) while the output without it agrees:
running it decides, so a pass fixed upstream reads "does not reproduce".
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np

from exactness.causes import Stage
from exactness.engine.places import Reproduction
from exactness.errors import brief

TOLERANCE = 1e-6  # far below what either pass changes (NaN, 1.49), far above float32 rounding of these sizes

# onnxscript's add-zero rule deletes `b + 1e-10`: its pattern's constant matches within abs_tol 1e-8 of zero
ADD_ZERO = '''\
import torch, onnxruntime as ort
from onnxscript.rewriter import rewrite
from onnxscript.rewriter.rules.common import add_0_rule

class Guarded(torch.nn.Module):
    def forward(self, a, b):
        return a / (b + 1e-10)  # the guard keeps 0 / 0 finite

a, b = torch.zeros(4), torch.zeros(4)
plain = torch.onnx.export(Guarded(), (a, b), dynamo=True, optimize=False).model_proto
rewritten = rewrite(plain, pattern_rewrite_rules=add_0_rule.commute())  # this one rule, nothing else

def run(model):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"a": a.numpy(), "b": b.numpy()})[0]

with_pass, without_pass, eager = run(rewritten), run(plain), Guarded()(a, b).numpy()
print("with the rule:", with_pass, "without:", without_pass, "eager:", eager)
'''

# ONNX Runtime's Pad_Fusion folds a zero Pad into the following MaxPool's pads, and a pool pads with -inf
PAD_FUSION = '''\
import torch, onnxruntime as ort

class PadPool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.max_pool2d(torch.nn.functional.pad(x, (1, 1, 1, 1)), 3, stride=2)

x = -1 - torch.rand(1, 1, 6, 6, generator=torch.Generator().manual_seed(0))  # negative: the zero pad wins at edges
model = torch.onnx.export(PadPool(), (x,), dynamo=True).model_proto.SerializeToString()

def run(disabled):
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)
    return session.run(None, {"x": x.numpy()})[0]

with_pass, without_pass, eager = run([]), run(["Pad_Fusion"]), PadPool()(x).numpy()
print("with Pad_Fusion:", abs(with_pass - eager).max(), "without:", abs(without_pass - eager).max())
'''


def code_for(stage: Stage, pass_name: str) -> str:
    """The reproduction of a named pass; "" for a pass with none written."""
    if stage is Stage.EXPORT_OPTIMIZER and pass_name.startswith("no_op[") and "Add(" in pass_name:
        return ADD_ZERO
    if stage is Stage.ORT_OPTIMIZER and pass_name == "Pad_Fusion":
        return PAD_FUSION
    return ""


def _apart(a: np.ndarray, b: np.ndarray) -> tuple[int, float]:
    """(values non-finite on one side only, the largest difference of the values finite on both)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    return int((np.isfinite(a) != np.isfinite(b)).sum()), float(np.max(np.abs(a[both] - b[both]), initial=0.0))


def judge(code: str) -> Reproduction:
    """Run `code` and say whether it shows the pass: with it apart from eager, without it not."""
    scope: dict = {}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            exec(compile(code, "<reproduction>", "exec"), scope)  # our own constant code, never a user's text
        except Exception as error:
            return Reproduction(code, False, error=brief(error))
    with_bad, with_diff = _apart(scope["with_pass"], scope["eager"])
    without_bad, without_diff = _apart(scope["without_pass"], scope["eager"])
    shows = (with_bad > 0 or with_diff > TOLERANCE) and without_bad == 0 and without_diff <= TOLERANCE
    printed = " ".join(line for line in out.getvalue().splitlines() if line.startswith(("with", "without")))
    return Reproduction(code, shows, int(np.size(scope["eager"])), with_bad, with_diff, without_bad, without_diff,
                        printed)


def run(stage: Stage, pass_name: str) -> Reproduction | None:
    code = code_for(stage, pass_name)
    return judge(code) if code else None
