"""The environment study's parameter rules; it runs first in every batch, so that every report links it."""

from exactness.workbook.parameter_rules import AtLeast, EachOf
from exactness.workbook.study_rules import Registration

MAGNITUDE = AtLeast(2.2250738585072014e-308, "the smallest normal float64", maximum=1.7976931348623157e308,
                    why_maximum="the largest float64")

STUDY = Registration({"magnitudes": EachOf(MAGNITUDE)}, runs_first=True)
