"""Embedders behind one port: local MiniLM (ONNX, default) and Bedrock Titan v2."""
