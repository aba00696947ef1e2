"""Quantizer argmax near-ties between eager PyTorch and ONNX Runtime in the wav2vec2 family (transformers #50575)."""
