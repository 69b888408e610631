"""The harness and the bench CLI."""
