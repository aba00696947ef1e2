"""Runtimes: eager runs with captured intermediates; ONNX export, weight swapping and ORT sessions that
expose intermediate tensors."""
