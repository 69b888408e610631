"""Triton kernels. Each file imports only torch and triton (tests/test_layout.py enforces it)."""
