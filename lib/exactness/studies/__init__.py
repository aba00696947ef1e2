"""The computations behind each notebook, returning pandas tables."""
