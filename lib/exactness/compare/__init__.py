"""Comparators: ulp distances, the export test's rule (replicated exactly), per-output reports, and
near-tie aware comparison."""
