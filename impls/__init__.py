"""One module per component; each declares its inputs, cost and reference and registers implementations.

Modules here are imported by `bench.registry.discover()`; a module whose name starts with '_' is skipped.
"""
