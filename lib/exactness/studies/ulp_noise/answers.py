"""The ulp-noise report's answer line: the model, whether its eager/ORT difference is float noise (ORT as close
to a float64 run as eager float32 is), and the noise's median and worst size in ulps of each tensor's scale.
Read from the noise and float64-reference tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from exactness.studies.ulp_noise.depth import scale_profile, worst_draw
from exactness.studies.ulp_noise.study import FLOAT64_FACTOR, beyond_rounding
from exactness.workbook.answers import Answer, Columns
from exactness.workbook.findings import count, significant
from exactness.workbook.presentation import plural

COLUMNS = Columns(subject="model", rate="noise, in ulps of each tensor's RMS")


def answers(noise: pd.DataFrame, closer: pd.DataFrame, model: str, shape_mode: str) -> list[Answer]:
    scaled = scale_profile(noise) if len(noise) else pd.DataFrame()
    moving = scaled[scaled.max_abs_diff > 0] if len(scaled) else scaled
    subject = f"{model} ({shape_mode} export)"
    if not len(moving):
        return [Answer(subject, "exact", "compare every tensor exactly", "0: every tensor bit-identical",
                       f"{plural(len(scaled), 'module output')} compared over "
                       f"{plural(int(noise.seed.nunique()) if len(noise) else 0, 'draw')}")]
    worst = moving.loc[moving.rms_ulps.idxmax()]
    median = float(np.median(moving.rms_ulps))
    single = worst_draw(noise)
    rate = (f"median {significant(median)}, worst {significant(float(worst.rms_ulps))} ({worst.tensor}) in each "
            "tensor's median draw" + (f"; {significant(single[0])} in the worst draw ({single[1]}, seed {single[2]})"
                                      if single is not None and single[0] > float(worst.rms_ulps) else ""))
    far = beyond_rounding(closer)
    spans = f"{significant(float(moving.max_abs_diff.min()))} to {significant(float(moving.max_abs_diff.max()))}"
    if not len(closer):
        return [Answer(subject, "undecided", "compare against float64 (reference_draws of 1 or more) to decide",
                       rate, "no float64 reference was run")]
    broken = closer[closer.eager_vs_float64.isna() | closer.ort_vs_float64.isna()]
    if len(broken):
        return [Answer(subject, "undecided", "fix the non-finite values first (discrete_ops localizes where they "
                                             "start): no noise can be measured through them", rate,
                       f"{broken.tensor.iloc[0]} holds non-finite values against float64 (eager float32 or ORT) on "
                       f"{count(len(broken))} of {plural(len(closer), 'tensor')}")]
    if len(far):
        return [Answer(subject, "undecided", "look at the float64 table: ORT is further from float64 than "
                                             "rounding explains there", rate,
                       f"ORT's error from float64 over {FLOAT64_FACTOR:g}x eager float32's own on "
                       f"{count(len(far))} of {plural(len(closer), 'tensor')}, e.g. {far.tensor.iloc[0]}")]
    return [Answer(subject, "float noise",
                   f"compare in ulps of each tensor's RMS, not at one absolute tolerance: the absolute noise spans "
                   f"{spans}", rate,
                   f"ORT within {FLOAT64_FACTOR:g}x eager float32's own error from float64 on every one of "
                   f"{plural(len(closer), 'tensor')}; the median element within "
                   f"{significant(float(moving.median_ulp.max()))} ulps")]
