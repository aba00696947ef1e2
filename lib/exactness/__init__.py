"""exactness: measure whether two computations of the same model disagree by a bug, float noise, or a
discrete choice flipped by a near-tie, and how often."""

__version__ = "0.1.0"
