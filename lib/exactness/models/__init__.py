"""Model builders: the wav2vec2 family's tiny test models (and, later, DAC variants and checkpoint loaders)."""
