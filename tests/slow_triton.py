"""A deliberately slowed rmsnorm:triton (it computes every call twice), loaded via BENCH_PLUGINS=slow_triton.

Used to show that `bench compare` catches a real slowdown on a GPU against the committed baseline.
"""
from bench import registry

impl = registry.get("rmsnorm").impls["triton"]
_build = impl.build


def _slowed(point, dtype, device):
    fn = _build(point, dtype, device)

    def twice(*args, **kwargs):
        fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return twice


impl.build = _slowed
