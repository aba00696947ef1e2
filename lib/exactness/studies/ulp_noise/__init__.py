"""ulp noise between eager PyTorch and ONNX Runtime, tensor by tensor."""
