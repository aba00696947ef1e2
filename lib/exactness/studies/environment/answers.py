"""The environment report's answer line: the machine, whether its floats behave as IEEE 754 says, and the
versions another run must match. Read from the facts measured in this run."""

from __future__ import annotations

import pandas as pd

from exactness.studies.environment.sentences import optimisation_words
from exactness.studies.environment.study import flushing_runtimes, spacing_against_ieee
from exactness.workbook.answers import Answer, Columns
from exactness.workbook.findings import count
from exactness.workbook.presentation import plural

ANSWER_COLUMNS = Columns(subject="machine", cause="floats", action="what it means for the other reports",
                         rate="", proof="measured")


def answers(versions: dict, hardware: dict, behaviour: dict, spacing: pd.DataFrame) -> list[Answer]:
    """The machine in one line: the CPU and its kernels, whether floats behave as IEEE 754 says here, and the
    versions another run must match for its float figures to compare."""
    checked = spacing_against_ieee(spacing)
    checked = checked[checked.representable]
    wrong = checked[~checked.agrees]
    flushed = flushing_runtimes(behaviour)
    capability = str(hardware.get("torch_cpu_capability", "unknown"))
    subject = (f"{hardware.get('cpu_model', 'an unknown CPU')} ({plural(int(hardware['usable_cpus']), 'CPU')}, "
               f"{capability} kernels)")
    cause = "flushes subnormals" if flushed else "not IEEE spacing" if len(wrong) else "IEEE floats"
    threads = int(hardware["torch_intra_op_threads"])
    action = (f"float figures compare with runs on {capability} kernels, torch {versions.get('torch')} and "
              f"onnxruntime {versions.get('onnxruntime')}, at the thread counts each report states (this machine's "
              f"torch default: {plural(threads, 'thread')})")
    kept = ("subnormals kept by every runtime" if not flushed else f"subnormals flushed by {', '.join(flushed)}")
    proof = (f"{kept}; {count(len(checked) - len(wrong))} of {count(len(checked))} float spacings the IEEE 754 value; "
             f"ONNX Runtime optimisation: {optimisation_words(behaviour.get('ort_default_graph_optimization_level'))}")
    return [Answer(subject, cause, action, "", proof)]
