"""Run under torchrun (2 gloo ranks): train the tiny tied LM (one frozen parameter) for a few steps with each
data-parallel strategy, and write, per strategy, how far its parameters end from single-process training on the
global batch. Used by tests/test_data_parallel.py."""
import json
import os
import sys

import torch
import torch.distributed as dist

from impls import _model
from impls import data_parallel as dp

STEPS = 3


def single_process(point, world, dtype) -> torch.Tensor:
    model = dp.build_model(point, "cpu", dtype)
    opt = dp.adamw(dp.trainable(model))
    for step in range(STEPS):
        tokens = torch.cat([dp.make_inputs(point, "fp32", "cpu", step, r)["tokens"] for r in range(world)])
        _model.loss_fn(model, tokens).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return dp.flat_params(model).double()


def main(out: str, names: list[str], mixed: bool) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    point = {"config": "tiny-tied", "batch": 2, "seq": 16, "world_size": world, "bucket_mb": 0}
    report = {}
    ref = single_process(point, world, torch.float64)
    for name in names:
        model = dp.build_model(point, "cpu")
        if name == "unsynced":  # no gradient averaging at all: must NOT match (the comparison can fail)
            step = dp.Step(model, dp.adamw(dp.trainable(model)))
        elif name.startswith("bucketed:"):
            step = dp.apply_bucketed(model, mixed, int(name.split(":")[1]))
        else:
            step = dp.STRATEGIES[name][0](model, mixed)
        start = step.check_outputs()[0].double()
        for s in range(STEPS):
            step(dp.make_inputs(point, "fp32", "cpu", s, rank)["tokens"])
        got = step.check_outputs()[0].double()
        frozen = dict(model.named_parameters())[dp.FROZEN]
        frozen = frozen.full_tensor() if hasattr(frozen, "full_tensor") else frozen  # FSDP2: a DTensor
        report[name] = {
            "rel_err": float((got - ref).norm() / ref.norm()),
            "moved": float((got - start).norm() / start.norm()),
            "frozen_still_ones": bool(torch.all(frozen == 1).item()),
        }
    if rank == 0:  # atomically: the test reads the report even if a rank aborts at teardown afterwards
        with open(out + ".tmp", "w") as f:
            json.dump(report, f)
        os.replace(out + ".tmp", out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), sys.argv[3] == "mixed")
