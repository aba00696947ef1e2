"""DAC batching: does a zero-padded batch change the shorter clip (the review of the DAC integration-test fix)."""
