"""Where along the depth the noise grows and where it is reset, in relative terms, per layer kind; and which
elements carry the worst element-wise ulp counts.

Absolute noise and relative noise answer different questions: a module that scales its values scales their
noise alike, moving the absolute noise while the noise relative to the tensor's RMS stays flat. The factor of a
module is its output's noise over its input's, both as max |diff| (absolute) and as max |diff| / RMS
(relative). A module's input is the module output eager's module read, found bit for bit
(`eager_capture.EagerRun.input_of`); a module reading a sum no module returns (a norm after a residual add) has
no measured input and no factor. Leaves only: a container's output repeats its last child's.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from exactness.compare.scale import rms_ulps

# Kinds by the last part of a module's path; the first pattern that matches names the kind.
KINDS = (
    ("layer norm", r"(^|_)layer_norm$|^layernorm$|^ln\w*$|^norm\d*$"),
    ("batch norm", r"batch_norm$|^bn\d*$"),
    ("attention", r"^(linear_out|out_proj|o_proj)$"),
    ("linear", r"(dense|linear\w*|proj\w*|projection|weight_proj|project_\w+|^fc\d*)$"),
    ("convolution", r"conv\w*$"),
    ("activation", r"(act\w*|activation|glu|snake\d*|gelu|relu|silu)$"),
)
PARALLEL = {"linear_k": "linear_q", "linear_v": "linear_q", "k_proj": "q_proj", "v_proj": "q_proj"}
# A kind "resets" the relative noise when its relative factor stays within this factor of 1 while its absolute
# factor moves by more than it; it "grows" the relative noise when its relative factor exceeds it.
FLAT = 1.5


def layer_kind(path: str) -> str:
    last = path.split(".")[-1]
    for kind, pattern in KINDS:
        if re.search(pattern, last):
            return kind
    return "other"


def leaves(paths: list[str]) -> list[str]:
    """Paths that contain no other path of the list (containers repeat their last child's output)."""
    return [p for p in paths if not any(q.startswith(p + ".") for q in paths)]


def growth(scaled: pd.DataFrame) -> pd.DataFrame:
    """Per leaf module output (graph order): its input, kind, and absolute and relative noise factors.
    `scaled`: `scale_profile(noise)` (medians over draws per tensor)."""
    ordered = scaled.sort_values("depth")
    if "model_output" in ordered:  # the model's outputs repeat module outputs: not modules of their own
        ordered = ordered[~ordered.model_output.astype(bool)]
    ordered = ordered[ordered.tensor.isin(leaves(ordered.tensor.tolist()))]
    rel = ordered.rel_rms
    by_path = dict(zip(ordered.tensor, zip(ordered.max_abs_diff, rel, strict=True), strict=True))
    rows, previous, inputs = [], None, {}
    read = dict(zip(ordered.tensor, ordered.input_module, strict=True)) if "input_module" in ordered else None
    for path, absolute, relative in zip(ordered.tensor, ordered.max_abs_diff, rel, strict=True):
        parent, last = path.rsplit(".", 1) if "." in path else ("", path)
        sibling = f"{parent}.{PARALLEL[last]}" if parent and last in PARALLEL else None
        source = inputs.get(sibling) if sibling in inputs else previous
        if read is not None:  # what eager's module read, bit for bit; "" for a sum no module returns
            source = read.get(path) or None
            source = source if source in by_path else None
        inputs[path] = source
        if source is not None and absolute > 0:
            a0, r0 = by_path[source]
            rows.append({"tensor": path, "kind": layer_kind(path), "input": source, "max_abs_diff": absolute,
                         "rel_rms": relative, "absolute_factor": absolute / a0 if a0 > 0 else math.inf,
                         "relative_factor": relative / r0 if r0 > 0 else math.inf})
        if absolute > 0:  # an exact tensor (a separate branch such as positions) is no one's noisy input
            previous = path
    return pd.DataFrame(rows, columns=["tensor", "kind", "input", "max_abs_diff", "rel_rms", "absolute_factor",
                                       "relative_factor"])


def growth_by_kind(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer kind: how many module outputs, and the median absolute and relative noise factor."""
    columns = ["kind", "modules", "absolute_factor", "relative_factor", "relative_low", "relative_high", "role"]
    finite = table[np.isfinite(table.absolute_factor.astype(float)) & np.isfinite(table.relative_factor.astype(float))]
    if not len(finite):
        return pd.DataFrame(columns=columns)
    kinds = finite.groupby("kind", sort=True).agg(modules=("tensor", "size"),
                                                  absolute_factor=("absolute_factor", "median"),
                                                  relative_factor=("relative_factor", "median"),
                                                  relative_low=("relative_factor", "min"),
                                                  relative_high=("relative_factor", "max"))
    kinds = kinds.reset_index().sort_values("relative_factor", ascending=False, ignore_index=True)
    return kinds.assign(role=[role(r) for r in kinds.itertuples()])


def role(row) -> str:
    """What a kind does to the noise, in words, from its two median factors."""
    flat = 1 / FLAT <= row.relative_factor <= FLAT
    if flat and not 1 / FLAT <= row.absolute_factor <= FLAT:
        return "rescales (relative noise flat, absolute noise moved)"
    if flat:
        return "passes the noise on"
    return "grows the relative noise" if row.relative_factor > FLAT else "shrinks the relative noise"


def worst_draw(noise: pd.DataFrame) -> tuple[float, str, int] | None:
    """The largest max |diff| in ulps of the tensor's RMS in any single draw: (ulps, tensor, seed), or None.
    The scale profile's figures are medians over draws; a test's tolerance must hold in the worst one."""
    if not len(noise) or "rel_rms" not in noise:
        return None
    per_draw = pd.Series(rms_ulps(noise.max_abs_diff, noise.rel_rms), index=noise.index)
    if not per_draw.notna().any():
        return None
    at = per_draw.idxmax()
    return float(per_draw[at]), str(noise.tensor[at]), int(noise.seed[at])


def scale_profile(noise: pd.DataFrame) -> pd.DataFrame:
    """Per tensor along the depth (median over draws): max |diff| in ulps of the tensor's RMS beside the
    element-wise median and 99th-percentile ulps. The first says how many rounding steps of a typical element
    the worst difference is; the element-wise counts blow up where elements are far below the RMS."""
    scaled = noise.assign(rms_ulps=rms_ulps(noise.max_abs_diff, noise.rel_rms))
    more = {column: (column, "median") for column in ("rel_rms", "worst_of_rms", "top_ulps_below_rms")
            if column in noise}  # where the worst element-wise counts sit, against the RMS (`compare.scale`)
    if "model_output" in noise:
        more["model_output"] = ("model_output", "first")
    if "input_module" in noise:
        more["input_module"] = ("input_module", "first")
    return scaled.groupby(["depth", "tensor"], as_index=False).agg(
        max_abs_diff=("max_abs_diff", "median"), rms_ulps=("rms_ulps", "median"), median_ulp=("median_ulp", "median"),
        p99_ulp=("p99_ulp", "median"), max_ulp=("max_ulp", "median"), **more).sort_values("depth").reset_index(
        drop=True)
