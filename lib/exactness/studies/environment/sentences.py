"""The environment notebook's words: each fact named as a person says it, and one sentence per section,
each reading its facts and nothing else."""

from __future__ import annotations

import pandas as pd

from exactness.studies.environment.study import float32_ulp_at_one, flushing_runtimes, relative_spacing_range
from exactness.workbook.findings import count, significant
from exactness.workbook.presentation import plural

# Each recorded fact in words, for the tables a person reads (the tables under tables/ keep the names).
FACT_WORDS = {
    "cpu_model": "CPU",
    "architecture": "architecture",
    "logical_cpus": "logical CPUs",
    "usable_cpus": "CPUs this run may use",
    "vector_extensions": "vector extensions",
    "torch_cpu_capability": "kernels torch dispatches",
    "torch_intra_op_threads": "torch: threads inside one op",
    "torch_inter_op_threads": "torch: threads running ops side by side",
    "ort_intra_op_threads_setting": "ONNX Runtime: threads inside one op (0: one per physical core)",
    "ort_inter_op_threads_setting": "ONNX Runtime: threads running ops side by side (0: its default)",
    "numpy_keeps_subnormals": "numpy keeps subnormal floats",
    "torch_keeps_subnormals": "torch keeps subnormal floats",
    "ort_keeps_subnormals": "ONNX Runtime keeps subnormal floats",
    "ort_available_providers": "ONNX Runtime execution providers",
    "ort_default_graph_optimization_level": "ONNX Runtime's graph optimisation by default",
}


OPTIMISATION_WORDS = {"ORT_DISABLE_ALL": "none", "ORT_ENABLE_BASIC": "basic (constant folding, redundant nodes)",
                      "ORT_ENABLE_EXTENDED": "extended (basic and fused operators)",
                      "ORT_ENABLE_LAYOUT": "layout (extended and memory layouts)",
                      "ORT_ENABLE_ALL": "all (every graph optimisation)"}


def optimisation_words(level: object) -> str:
    """`GraphOptimizationLevel.ORT_ENABLE_ALL` as a person says it: 'all (every graph optimisation)'."""
    name = str(level).rsplit(".", 1)[-1]
    return OPTIMISATION_WORDS.get(name, name)


def facts_for_people(facts: dict[str, object]) -> pd.DataFrame:
    """fact, value: each fact named in words, yes/no for a probe, an optimisation level by what it does."""
    def value(key, v):
        if isinstance(v, bool):
            return "yes" if v else "no"
        if key == "ort_default_graph_optimization_level":
            return optimisation_words(v)
        return ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return pd.DataFrame([(FACT_WORDS.get(k, k.replace("_", " ")), value(k, v)) for k, v in facts.items()],
                        columns=["fact", "value"])


def versions_sentence(versions: dict) -> str:
    return (f"torch {versions['torch']} against onnxruntime {versions['onnxruntime']} with transformers "
            f"{versions['transformers']}, on Python {versions['python']}.")


def hardware_sentence(hardware: dict) -> str:
    ort = int(hardware["ort_intra_op_threads_setting"])
    ort_words = "one thread per physical core (its setting 0)" if ort == 0 else plural(ort, "thread")
    return (f"{plural(int(hardware['usable_cpus']), 'usable CPU')} ({hardware['cpu_model']}); torch dispatches "
            f"{hardware['torch_cpu_capability']} kernels and splits one op over "
            f"{plural(int(hardware['torch_intra_op_threads']), 'thread')}; ONNX Runtime over {ort_words}.")


def subnormals_sentence(behaviour: dict) -> str:
    flushed = flushing_runtimes(behaviour)
    if not flushed:
        return "Subnormal float32 values are kept by every runtime."
    return f"Subnormals are flushed to zero by: {', '.join(flushed)}; results near zero can differ by that."


def spacing_sentence(spacing: pd.DataFrame, checked: pd.DataFrame) -> str:
    at_one = float32_ulp_at_one(spacing)
    return ((f"At magnitude 1, one float32 ulp is {at_one:.3g}; " if at_one is not None else "")
            + f"{count(int(checked.agrees.sum()))} of {count(len(checked))} measured spacings equal the IEEE 754 "
            "value.")


def spacing_caption(spacing: pd.DataFrame) -> str:
    low, high = relative_spacing_range(spacing)
    return ("1 ulp (absolute spacing, log scale) against the magnitude of the value (log scale), one line per dtype; a "
            f"line one decade lower is ten times finer. Relative float32 spacing stays between {significant(low)} and "
            f"{significant(high)}: ulps compare errors across scales.")
