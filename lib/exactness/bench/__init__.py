"""`make bench`: speed and memory as ratios against a baseline run side by side."""
