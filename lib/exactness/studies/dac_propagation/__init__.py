"""DAC error propagation: one weight-norm checkpoint run four ways, layer by layer (the DAC integration-test fix)."""
