"""pytest plugin (entry point `llm_bench`): run registered points under pytest-benchmark with the suite's timer."""
