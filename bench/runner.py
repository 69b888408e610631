"""Run a plan of cases: the parent writes rows, a worker subprocess measures them.

The parent never touches the device. It sends one case at a time to a worker (a fresh one per case with
`isolate`), writes each row as soon as it arrives, and survives what the worker does not: a crash (segfault,
os._exit, a poisoned CUDA context) gives an `error` row and a fresh worker for the rest, a hang past the
point timeout gives a `timeout` row, Ctrl-C or SIGTERM stops with every finished row on disk.
"""
from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import signal
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from bench import registry, roofline
from bench.execute import Case, first_line
from bench.results import COLUMNS, Writer, device_name, git_sha, point_key, read_rows
from bench.timing import TimingConfig, wall_clock

WORKER_START_TIMEOUT_S = 300.0
PROBE_TIMEOUT_S = 120.0  # the copy probe: seconds at most, unless the device hangs


class RunInterrupted(Exception):
    def __init__(self, written: int, path: Path):
        super().__init__(f"interrupted after {written} rows")
        self.written, self.path = written, path


@dataclass
class Planned:
    suite: str
    case: Case


@dataclass
class RunOptions:
    device: str
    out: Path
    timing: TimingConfig = field(default_factory=TimingConfig)
    isolate: bool = False
    point_timeout: float = 900.0
    resume: bool = False
    seed: int = 0
    check: bool = True


def plan(suites: list[tuple[str, object]], impl_names: list[str] | None = None) -> list[Planned]:
    """Cases in run order: per entry, point, dtype and mode, every impl in turn (so a point's float64
    reference is computed once and shared)."""
    from bench.suite import expand

    out = []
    for suite_name, suite in suites:
        for entry in suite.entries:
            comp = registry.get(entry.component)
            impls = entry.impls or list(comp.impls)
            if impl_names:
                impls = [i for i in impls if i in impl_names]
            for point in expand(entry):
                for dtype in entry.dtypes:
                    for mode in entry.modes:
                        for impl in impls:
                            out.append(Planned(suite_name, Case(entry.component, impl, mode, point, dtype)))
    return out


def row_key(row: dict) -> tuple:
    return (row.get("component"), row.get("impl"), row.get("mode"), point_key(row.get("point")), row.get("dtype"))


def planned_key(p: Planned) -> tuple:
    c = p.case
    return (c.component, c.impl, c.mode, point_key(c.point), c.dtype)


# ---- the worker side ------------------------------------------------------------------------------------------

def _sm_clock() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM)
    except Exception:  # no NVML (CPU, containers without it): clocks stay unknown
        return None


def _worker_main(conn, device: str, timing: TimingConfig, seed: int, check: bool) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C means
    from bench.execute import Worker
    from bench.results import environment

    env = environment(device)
    conn.send(("hello", env))
    worker = Worker(device, timing, seed, check)
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        if msg[0] == "calibrate":
            from bench import calibrate

            conn.send(("calibrated", calibrate.measure(device, quick=True, log=lambda s: None)))
            continue
        if msg[0] == "probe":
            from bench import calibrate

            try:
                conn.send(("probe", calibrate.copy_probe(device, timing)))
            except Exception as e:  # out of memory, a broken device: the run goes on without it
                conn.send(("probe", {"error": f"{type(e).__name__}: {first_line(e)}"}))
            continue
        _, idx, case = msg
        conn.send(("start", idx))
        before = _sm_clock() if device == "cuda" else None
        row = worker.measure(case)
        after = _sm_clock() if device == "cuda" else None
        if before is not None and after is not None:
            row["clocks"] = {"sm_mhz_min": min(before, after), "sm_mhz_max": max(before, after)}
        conn.send(("row", idx, row))


class _WorkerHandle:
    def __init__(self, opts: RunOptions):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, opts.device, opts.timing, opts.seed, opts.check),
                                daemon=True)
        self.proc.start()
        child.close()
        msg = self.recv(WORKER_START_TIMEOUT_S)
        if msg is None or msg[0] != "hello":
            self.kill()
            raise RuntimeError(f"the worker process did not start ({self.exit_reason()})")
        self.env = msg[1]

    def recv(self, timeout: float):
        """The next message, ("dead",) if the worker died, or None if `timeout` passed first."""
        deadline = wall_clock() + timeout
        while wall_clock() < deadline:
            if self.conn.poll(0.05):
                try:
                    return self.conn.recv()
                except (EOFError, OSError):  # the pipe closed: the process is exiting, reap it
                    self.proc.join(10)
                    return ("dead",)
            if not self.proc.is_alive():
                if self.conn.poll(0):
                    continue
                return ("dead",)
        return None

    def alive(self) -> bool:
        return self.proc.is_alive()

    def exit_reason(self) -> str:
        code = self.proc.exitcode
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"

    def stop(self) -> None:
        try:
            self.conn.send(("stop",))
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(5)
        self.kill()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)


# ---- the parent side ------------------------------------------------------------------------------------------

class Runner:
    def __init__(self, opts: RunOptions, on_row: Callable[[dict, int, int], None] | None = None,
                 on_start: Callable[[Planned, int, int], None] | None = None, log: Callable[[str], None] = print):
        self.opts, self.on_row, self.on_start, self.log = opts, on_row, on_start, log
        self.run_id = uuid.uuid4().hex[:12]
        self.sha = git_sha()
        self.spec: roofline.DeviceSpec | None = None
        self.env: dict | None = None
        self.rows: list[dict] = []

    def _spec_for(self, worker: _WorkerHandle) -> None:
        if self.env is not None:
            return
        self.env = worker.env
        name = device_name(self.env, self.opts.device)
        self.spec = roofline.resolve(name, self.env.get("driver"))
        if self.spec is None:  # a CPU or an unknown GPU with no calibration yet: measure quickly, once
            self.log(f"no ceilings known for {name}: calibrating (run `bench calibrate` for a thorough one)")
            worker.conn.send(("calibrate",))
            msg = worker.recv(600)
            if msg and msg[0] == "calibrated":
                self.spec = roofline.store_quick_calibration(msg[1], name, self.env.get("driver"), self.log)
        if self.opts.device == "cuda" and self.opts.timing.flush_l2:
            self._probe(worker)

    def _probe(self, worker: _WorkerHandle) -> None:
        """The run's copy probe (see calibrate.copy_probe) into every row's env, once a run."""
        worker.conn.send(("probe",))
        msg = worker.recv(PROBE_TIMEOUT_S)
        probe = msg[1] if msg and msg[0] == "probe" else {"error": "no answer from the worker"}
        self.env = {**self.env, "copy_probe": probe}
        if "us" in probe:
            self.log(f"copy probe: {probe['mib']} MiB into {probe['mib']} MiB in {probe['us']:.2f} us "
                     f"({probe['gbps']:,.0f} GB/s)")
        else:
            self.log(f"copy probe failed: {probe['error']}")

    def _row(self, p: Planned, measured: dict) -> dict:
        c = p.case
        env = self.env or {}
        row = {
            "run_id": self.run_id,
            "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_sha": self.sha,
            "suite": p.suite,
            "component": c.component,
            "impl": c.impl,
            "mode": c.mode,
            "point": c.point,
            "dtype": c.dtype,
            "device": device_name(env, self.opts.device),
            "backend": self.opts.device,
            "world_size": registry.get(c.component).world_size(registry.get(c.component).impls[c.impl], c.point),
            "baseline": registry.get(c.component).baseline,
            **measured,
            "env": env,
        }
        row.setdefault("reason", "")
        cost = registry.get(c.component).cost(c.point, c.dtype, c.mode)
        roofline.annotate(row, cost, self.spec)
        ordered = {k: row[k] for k in COLUMNS if k in row}
        ordered.update({k: v for k, v in row.items() if k not in ordered})
        return ordered

    def run(self, planned: list[Planned]) -> list[dict]:
        opts = self.opts
        if opts.resume and opts.out.exists():
            # a case that ended in an error runs again (a crash or a since-fixed bug); every other status stands
            rows = read_rows(opts.out, warn=False)
            done = {row_key(r) for r in rows if r.get("status") != "error"}
            errored = {row_key(r) for r in rows if r.get("status") == "error"} - done
            skipped = len([p for p in planned if planned_key(p) in done])
            retried = len([p for p in planned if planned_key(p) in errored])
            planned = [p for p in planned if planned_key(p) not in done]
            self.log(f"resuming {opts.out}: {skipped} rows already there, {len(planned)} to run"
                     + (f" ({retried} that ended in an error, again)" if retried else ""))
        if opts.device == "cpu":
            os.environ.setdefault("TRITON_INTERPRET", "1")  # inherited by the spawned workers
        worker: _WorkerHandle | None = None
        old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
        total = len(planned)
        try:
            with Writer(opts.out) as writer:
                for i, p in enumerate(planned):
                    if worker is None or not worker.alive():
                        worker = _WorkerHandle(opts)
                        self._spec_for(worker)
                    if self.on_start:
                        self.on_start(p, i, total)
                    comp = registry.get(p.case.component)
                    if comp.ranked:
                        measured = self._ranked(p, comp)
                    else:
                        measured, worker = self._one(worker, i, p)
                    row = self._row(p, measured)
                    writer.write(row)
                    self.rows.append(row)
                    if self.on_row:
                        self.on_row(row, i, total)
                    if opts.isolate and worker is not None:
                        worker.stop()
                        worker = None
        except KeyboardInterrupt:
            raise RunInterrupted(len(self.rows), opts.out) from None
        finally:
            signal.signal(signal.SIGTERM, old_term)
            if worker is not None:
                worker.kill() if not worker.alive() else worker.stop()
        return self.rows

    def _one(self, worker: _WorkerHandle, i: int, p: Planned) -> tuple[dict, _WorkerHandle | None]:
        t0 = wall_clock()
        try:
            worker.conn.send(("case", i, p.case))
        except (OSError, BrokenPipeError):
            worker.kill()
            return {"status": "error", "reason": f"worker lost before the point ({worker.exit_reason()})"}, None
        while True:
            left = self.opts.point_timeout - (wall_clock() - t0)
            msg = worker.recv(max(left, 0.0))
            if msg is None:  # still running past the point timeout: a hang
                worker.kill()
                return {"status": "timeout",
                        "reason": f"no result within --point-timeout {self.opts.point_timeout:g} s"}, None
            if msg[0] == "dead":
                reason = worker.exit_reason()
                worker.kill()
                return {"status": "error", "reason": f"worker process died during this point ({reason}); "
                                                     f"the run went on in a fresh worker"}, None
            if msg[0] == "row" and msg[1] == i:
                return msg[2], worker


    def _ranked(self, p: Planned, comp) -> dict:
        """A multi-rank case: torchrun starts the ranks in a session of their own; a failing rank ends the
        run through torchrun, a hang through the point timeout, and nothing they started outlives the call."""
        import json
        import subprocess
        import tempfile

        from bench import distributed

        c = p.case
        impl = comp.impls[c.impl]
        world = comp.world_size(impl, c.point)
        why = comp.unmet(impl, c.point, self.opts.device) or impl.unsupported(c.mode, c.dtype)
        if not why and self.opts.device == "cuda" and world > (self.env or {}).get("gpu_count", 0):
            why = f"needs {world} GPUs, {(self.env or {}).get('gpu_count', 0)} visible"
        if why:
            return {"status": "skipped", "reason": why}
        with tempfile.TemporaryDirectory(prefix="bench-ranks-") as tmp:
            out = os.path.join(tmp, "row.json")
            timing = {k: v for k, v in asdict(self.opts.timing).items()}
            cmd = distributed.command(c, world, self.opts.device) + [
                "--timing", json.dumps(timing), "--seed", str(self.opts.seed), "--out", out, "--pids", tmp]
            log = open(os.path.join(tmp, "log.txt"), "w+")
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(timeout=self.opts.point_timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_ranks(proc, tmp)
            if timed_out:
                return {"status": "timeout", "reason": f"{world} ranks gave no result within --point-timeout "
                                                       f"{self.opts.point_timeout:g} s; every rank was stopped"}
            log.seek(0)
            text = log.read()
            return ranked_result(distributed.written_rows(out), proc.returncode, text)


def ranked_result(rows: list[dict], returncode: int, log: str) -> dict:
    """The row of a multi-rank case from what its ranks wrote and how torchrun ended. Rank 0 writes the measured
    row only after every rank has finished its last collective, so a crash after that (seen: gloo ranks aborting
    at teardown, now and then, on a loaded 2-core machine) keeps the measurement and says what happened."""
    failed = sorted((r for r in rows if r.get("status") != "ok"), key=lambda r: r.get("at", 0))
    unreported = _unreported_failure(log) if returncode else ""
    done = next((r for r in rows if r.get("rank") == 0 and r.get("status") == "ok"), None)
    if done is not None and not failed:
        if returncode:
            done["reason"] = f"measured; afterwards {unreported or f'torchrun exited with code {returncode}'}"
        return done
    if failed:
        row = failed[0]  # the earliest report: the others usually only saw its peers vanish
        row["reason"] = "; ".join(filter(None, [unreported, row.get("reason")]))
        return row
    tail = [ln for ln in log.splitlines() if ln.strip()][-4:]
    return {"status": "error", "reason": (unreported or f"torchrun exited with code {returncode}")
                                         + ": " + " | ".join(tail)[-400:]}


def _unreported_failure(log: str) -> str:
    """From torchrun's failure summary, a rank that died without writing its row (exit codes other than the
    ones bench.distributed uses after reporting): "rank 1 exited with code 1"."""
    import re

    from bench.distributed import REPORTED_ERROR, REPORTED_OOM

    pairs = re.findall(r"rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-?\d+)", log)
    # torchrun stops the surviving ranks with SIGTERM (then SIGKILL): those are consequences, not causes.
    stopped_by_torchrun = (-signal.SIGTERM, -signal.SIGKILL)
    for rank, code in pairs:
        c = int(code)
        if c not in (0, REPORTED_ERROR, REPORTED_OOM, *stopped_by_torchrun):
            how = f"killed by signal {-c}" if c < 0 else f"exited with code {c}"
            return f"rank {rank} {how}"
    return ""


def _kill_ranks(proc, pid_dir: str) -> None:
    """Stop torchrun's session and every rank that left its pid, whatever state they are in."""
    import glob

    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    for path in glob.glob(os.path.join(pid_dir, "rank-*.pid")):
        try:
            with open(path) as f:
                os.kill(int(f.read().strip()), signal.SIGKILL)
        except (ValueError, OSError):
            pass


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def default_out(label: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{label}-{stamp}.jsonl"
