"""The `bench` command: list, run, calibrate, report, compare, export, trace.

User mistakes (a bad suites file, an unknown name, a bad argument) print one paragraph and exit 2; nothing
a user can cause ends in a traceback. Heavy imports (torch) happen inside the commands that need them.
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.registry import DTYPES, MODES

# No markup by default: paths, reasons and cells hold brackets ("a[old]/r.jsonl", "[rank 1]") that rich would
# read as tags and drop; the few styled lines ask for markup and escape what they quote.
console = Console(stderr=False, highlight=False, markup=False)
if not console.is_terminal:  # logs and CI: wide enough that the summary table stays readable
    console = Console(stderr=False, highlight=False, markup=False, width=200)
err = Console(stderr=True, highlight=False, markup=False)

DEFAULT_SUITES = "suites.yaml"


class UserError(click.ClickException):
    exit_code = 2

    def show(self, file=None):
        err.print(f"[bold red]error:[/] {escape(self.message)}", markup=True, highlight=False, soft_wrap=True)


def _fail(msg: str):
    raise UserError(msg)


_python_showwarning = warnings.showwarning


class _Commands(click.Group):
    def invoke(self, ctx):
        """A path the system refuses (a report or cache directory under a file, no permission, a full disk while
        opening) is the user's to fix: one line naming it, exit 2, no traceback."""
        try:
            return super().invoke(ctx)
        except OSError as e:
            if e.filename is None:
                raise
            if isinstance(e, FileExistsError) and Path(e.filename).is_file():  # mkdir of a path that is a file
                raise UserError(f"{e.filename} is a file where a directory is needed") from e
            raise UserError(f"{e.filename}: {e.strerror or e}") from e


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Benchmark, check and roofline-predict the building blocks of LLMs."""
    warnings.showwarning = _show_warning


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """A warning about the user's files (a row skipped) reads as one line on stderr, not as a line of our source."""
    from bench.results import ResultsWarning

    if issubclass(category, ResultsWarning):
        err.print(f"[yellow]warning:[/] {escape(str(message))}", markup=True, soft_wrap=True)
    else:
        _python_showwarning(message, category, filename, lineno, file, line)


def _suites_path(path: str | None) -> Path:
    p = Path(path or DEFAULT_SUITES)
    if not p.exists():
        hint = "" if path else " (run from the repository root, or pass --suites PATH)"
        _fail(f"suites file {p} not found{hint}")
    return p


def _device(requested: str | None) -> str:
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        _fail("--device cuda was asked for, but torch sees no CUDA GPU here")
    if requested:
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


# ---- list -----------------------------------------------------------------------------------------------------

@main.command("list")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None, help="Judge needs for this device.")
@click.option("--costs", "costs_for", default=None, metavar="COMPONENT",
              help="Show FLOPs, bytes, intensity and predicted time for this component's points in --suite.")
@click.option("--suite", "suite_name", default=None, help="Suite whose points --costs shows (default: all suites).")
@click.option("--suites", "suites_file", default=None, help="Path of suites.yaml.")
def list_cmd(device, costs_for, suite_name, suites_file):
    """Components, implementations, axes, and whether each can run here."""
    from bench import registry

    dev = _device(device)
    comps = registry.discover()
    if costs_for:
        return _list_costs(comps, costs_for, suite_name, suites_file, dev)
    table = Table(title=f"components and implementations (device: {dev})")
    for col in ("component", "axes", "modes", "dtypes", "impl", "runs here", "description"):
        table.add_column(col)
    for name, comp in sorted(comps.items()):
        first = True
        for impl in comp.impls.values():
            why = impl.needs.unmet(dev)
            here = "yes" if not why else f"no: {why}"
            if not why and impl.interpreted_on_cpu and dev == "cpu":
                here = "checked only (Triton interpreter)"
            table.add_row(name if first else "", ", ".join(comp.axes) if first else "",
                          ", ".join(comp.modes) if first else "", ", ".join(comp.dtypes) if first else "",
                          impl.name, here, impl.description)
            first = False
    console.print(table)


def _list_costs(comps, name, suite_name, suites_file, dev):
    from bench import roofline, suite
    from bench.results import device_name, environment, point_label

    if name not in comps:
        _fail(f"unknown component {name!r}; known: {', '.join(sorted(comps))}")
    path = _suites_path(suites_file)
    try:
        every = suite.load(path)
        suites = dict(suite.select(every, [suite_name], path)) if suite_name else every
    except suite.SuiteError as e:
        _fail(str(e))
    with_it = [sname for sname, s in every.items() if any(e.component == name for e in s.entries)]
    if not set(with_it) & set(suites):
        _fail(f"{path}: suite {suite_name!r} has no {name} points; suites with {name}: {', '.join(with_it) or 'none'}"
              if suite_name else f"{path}: no suite has {name} points")
    env = environment(dev)
    spec = roofline.resolve(device_name(env, dev), env.get("driver"))
    table = Table(title=f"{name}: cost model and roofline ({spec.name + ', ' + spec.source if spec else 'no ceilings: run bench calibrate'})")
    for col in ("suite", "point", "dtype", "mode", "GFLOP", "MB", "FLOP/B", "predicted", "bound"):
        table.add_column(col, justify="right")
    comp = comps[name]
    seen = set()
    for sname, s in suites.items():
        for entry in s.entries:
            if entry.component != name:
                continue
            for point in suite.expand(entry):
                for dtype in entry.dtypes:
                    for mode in entry.modes:
                        key = (point_label(point), dtype, mode)
                        if key in seen:
                            continue
                        seen.add(key)
                        c = comp.cost(point, dtype, mode)
                        pred = roofline.predict(c.flops, c.bytes, dtype, c.math, spec) if spec else None
                        table.add_row(sname, point_label(point), dtype, mode, f"{c.flops / 1e9:,.3f}",
                                      f"{c.bytes / 1e6:,.2f}", f"{c.flops / c.bytes:,.1f}" if c.bytes else "-",
                                      _fmt_ms(pred["predicted_ms"]) if pred else "-", pred["bound"] if pred else "-")
    console.print(table)


def _fmt_ms(ms) -> str:
    if ms is None:
        return "-"
    if ms < 0.01:
        return f"{ms * 1e3:.2f} us"
    if ms < 10:
        return f"{ms:.3f} ms"
    return f"{ms:,.1f} ms"


# ---- run ------------------------------------------------------------------------------------------------------

@main.command()
@click.argument("suite_names", nargs=-1)
@click.option("--suite", "suite_opt", multiple=True, help="Suite to run (same as the positional SUITE).")
@click.option("--suites", "suites_file", default=None, help="Path of suites.yaml (default: ./suites.yaml).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None, help="Default: cuda when present.")
@click.option("--impl", "impls", multiple=True, help="Only these implementations (repeatable).")
@click.option("--component", "components", multiple=True, help="Only these components (repeatable).")
@click.option("--mode", "modes", multiple=True, type=click.Choice(MODES), help="Only these modes (repeatable).")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(DTYPES), help="Only these dtypes (repeatable).")
@click.option("--where", "wheres", multiple=True, metavar="AXIS=VALUE",
              help="Only points whose AXIS has this VALUE, e.g. --where seq=4096 (repeatable: every axis named must "
              "match; an axis named twice matches either value).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Results JSONL (default: results/<suites>-<time>.jsonl). Rows are appended.")
@click.option("--resume", is_flag=True, help="Skip cases already in --out (default: the newest matching file); cases "
              "whose row is an error run again.")
@click.option("--isolate", is_flag=True, help="Run every point in its own worker process.")
@click.option("--point-timeout", type=click.FloatRange(min=0.1), default=900.0, show_default=True,
              help="Seconds one point may take, compile included.")
@click.option("--quick-timing", is_flag=True, help="Fewer, shorter samples (smoke runs, tests).")
@click.option("--no-check", is_flag=True, help="Skip the float64 correctness check (not recommended).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--report/--no-report", "write_report", default=True, help="Write the HTML report next to the results.")
def run(suite_names, suite_opt, suites_file, device, impls, components, modes, dtypes, wheres, out, resume, isolate,
        point_timeout, quick_timing, no_check, seed, write_report):
    """Run SUITE ... (default: quick) and write one row per case."""
    from bench import registry, suite
    from bench.results import natural_key, read_rows
    from bench.runner import RunInterrupted, RunOptions, Runner, default_out, plan
    from bench.timing import TimingConfig

    names = list(suite_names) + list(suite_opt) or ["quick"]
    path = _suites_path(suites_file)
    try:
        suites = suite.load(path)
        chosen = suite.select(suites, names, path)
    except suite.SuiteError as e:
        _fail(str(e))
    dev = _device(device)
    comps = registry.discover()
    for c in components:
        if c not in comps:
            _fail(f"--component {c!r}: no such component; known: {', '.join(sorted(comps))}")
    every = plan(chosen, None)  # all cases of the suites, before the filters
    in_suites = {p.case.component for p in every}
    for name in impls:
        owners = [comps[c] for c in sorted(in_suites) if c in comps and name in comps[c].impls]
        if not owners:
            known = sorted({i for c in in_suites if c in comps for i in comps[c].impls})
            _fail(f"--impl {name!r}: no component of suite(s) {', '.join(names)} has that implementation; "
                  f"known: {', '.join(known)}")
        for comp in owners:
            points = [p.case.point for p in every if p.case.component == comp.name] or [{}]
            whys = [comp.unmet(comp.impls[name], pt, dev) for pt in points]
            why = None if None in whys else whys[0]  # a point of one rank runs where one of two cannot
            if why:
                _fail(f"--impl {name!r} was asked for by name but cannot run here: {comp.name}:{name} {why}")
    where: dict[str, list[str]] = {}  # axis -> the values it may take
    for w in wheres:
        axis, eq, value = w.partition("=")
        if not eq or not axis:
            _fail(f"--where {w!r}: expected AXIS=VALUE, e.g. --where seq=4096")
        where.setdefault(axis.strip(), []).append(value.strip())
    planned = [p for p in every if not impls or p.case.impl in impls]
    if components:
        planned = [p for p in planned if p.case.component in components]
    if modes:
        planned = [p for p in planned if p.case.mode in modes]
    if dtypes:
        planned = [p for p in planned if p.case.dtype in dtypes]
    for axis, wanted in where.items() if planned else ():
        asked = f"--where {axis}={' or '.join(wanted)}"
        values = {str(p.case.point[axis]) for p in planned if axis in p.case.point}
        if not values:
            axes = sorted({a for p in planned for a in p.case.point})
            _fail(f"{asked}: no case left has an axis {axis!r}; axes: {', '.join(axes)}")
        planned = [p for p in planned if str(p.case.point.get(axis)).lower() in {v.lower() for v in wanted}]
        if not planned:
            _fail(f"{asked}: no case left has that value; {axis} values: {', '.join(sorted(values, key=natural_key))}")
    if not planned:
        _fail("nothing to run: the suites, --component, --mode, --dtype, --where and --impl filters leave no case")
    label = "+".join(names)
    if out is None:
        out = _newest(label) if resume else None
        out = out or default_out(label)
    out.parent.mkdir(parents=True, exist_ok=True)  # a results file the system refuses fails here, before any worker
    open(out, "a", encoding="utf-8").close()
    timing = TimingConfig.quick() if quick_timing else TimingConfig.for_device(dev)
    opts = RunOptions(device=dev, out=out, timing=timing, isolate=isolate, point_timeout=point_timeout,
                      resume=resume, seed=seed, check=not no_check)
    console.print(f"running {len(planned)} cases of suite(s) {', '.join(names)} on {dev} -> {out}")
    held = len(read_rows(out, warn=False)) if not resume else 0
    if held:
        console.print(f"  {out} holds {held} rows already: this run's are appended, and the report and "
                      f"`bench compare` take each case's newest (--resume would skip the cases it holds)",
                      soft_wrap=True)
    rows = _run_with_progress(Runner, opts, planned, RunInterrupted, write_report)
    _summary(rows)
    console.print(f"results: {out}")
    if write_report:
        _report_for([out], out.with_suffix(""), [])


def _newest(label: str) -> Path | None:
    files = sorted(Path("results").glob(f"{label}-*.jsonl"), key=lambda p: p.stat().st_mtime)
    return files[-1] if files else None


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}"


def _run_with_progress(Runner, opts, planned, RunInterrupted, write_report=False):
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    from bench.results import point_label
    from bench.timing import wall_clock

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TimeRemainingColumn(), console=console, transient=False, disable=not console.is_terminal)
    task = progress.add_task("starting", total=len(planned))
    counts: dict[str, int] = {}
    start = wall_clock()

    def on_start(p, i, total):
        progress.update(task, description=p.case.label[:70])

    def on_row(row, i, total):
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        progress.advance(task)
        if not console.is_terminal:  # plain log lines when output is not a terminal (CI, pipes)
            med = row.get("median_ms")
            extra = f"{med:.4f} ms" if med else row.get("reason", "")[:80]
            # elapsed, and the cases left at this run's mean so far (a compile or a big point moves it)
            spent = wall_clock() - start
            left = f", ~{_clock(spent / (i + 1) * (total - i - 1))} left" if i + 1 < total else ""
            console.print(f"[{i + 1}/{total} {_clock(spent)}{left}] {row['component']}:{row['impl']}:{row['mode']}:"
                          f"{point_label(row['point'])}:{row['dtype']} {row['status']} {extra}")

    runner = Runner(opts, on_row=on_row, on_start=on_start, log=lambda s: console.print(s))
    try:
        with progress:
            rows = runner.run(planned)
    except RunInterrupted as e:
        err.print(f"interrupted: {e.written} rows of this run are in {e.path}; "
                  f"`bench run ... --out {e.path} --resume` finishes it")
        if write_report and e.path.exists() and e.path.stat().st_size:
            try:
                _report_for([e.path], e.path.with_suffix(""), [])
            except Exception as exc:  # a partial report is a courtesy; the rows are what must survive
                err.print(f"partial report not written: {exc}")
        sys.exit(130)
    return rows


def _summary(rows):
    from bench.results import point_label

    table = Table(title="summary")
    for col in ("component", "impl", "mode", "point", "dtype", "median", "TFLOP/s", "GB/s", "% roofline", "status"):
        table.add_column(col, justify="right" if col in ("median", "TFLOP/s", "GB/s", "% roofline") else "left")
    for r in rows:
        med = r.get("median_ms")
        status = r["status"]
        if status != "ok" and r.get("reason"):
            status = f"{status}: {r['reason'][:60]}"
        table.add_row(r["component"], r["impl"], r["mode"], point_label(r["point"]), r["dtype"], _fmt_ms(med),
                      f"{r['tflops']:.3f}" if r.get("tflops") else "-", f"{r['gbps']:.1f}" if r.get("gbps") else "-",
                      f"{r['roofline_pct']:.1f}" if r.get("roofline_pct") else "-", status)
    console.print(table)


def _report_for(paths, out_dir, baselines, across_devices=False):
    try:
        from reports.render import render
    except ImportError as e:  # report-only dependencies missing (e.g. plotly on a bare GPU box)
        err.print(f"report skipped: {e}; render it elsewhere with `bench report`")
        return None
    from bench.compare import AcrossDevicesError

    try:
        index = render([str(p) for p in paths], out_dir, [str(b) for b in baselines], across_devices=across_devices)
    except AcrossDevicesError as e:
        _fail(str(e))
    console.print(f"report: {index}")
    return index


# ---- report -------------------------------------------------------------------------------------------------

@main.command()
@click.argument("results_files", nargs=-1, required=True)
@click.option("-o", "--out", "out_dir", default="report", show_default=True, help="Output directory.")
@click.option("--baseline", "baselines", multiple=True, help="Baseline results for the comparison view (repeatable).")
@click.option("--across-devices", is_flag=True,
              help="Compare against a baseline of another machine (one device a side), as `bench compare`'s flag.")
@click.option("--open", "open_browser", is_flag=True, help="Open the report in a browser.")
def report(results_files, out_dir, baselines, across_devices, open_browser):
    """Write an offline HTML report of RESULTS_FILES (several files, e.g. GPU and CPU runs, go in one report)."""
    if across_devices and not baselines:
        _fail("--across-devices compares against a --baseline; none was given")
    _result_files(list(results_files) + list(baselines))
    index = _report_for(list(results_files), Path(out_dir), list(baselines), across_devices)
    if index and open_browser:
        import webbrowser

        webbrowser.open(index.resolve().as_uri())


# ---- trace ----------------------------------------------------------------------------------------------------

@main.command()
@click.argument("suite_name", required=False)
@click.option("--suites", "suites_file", default=None, help="Path of suites.yaml.")
@click.option("--component", default=None, help="Only this component.")
@click.option("--impl", "impls", multiple=True, help="Only these implementations.")
@click.option("--point", "point_spec", default=None, metavar="k=v,k=v", help="One point (all axes), instead of a suite's.")
@click.option("--dtype", "dtypes", multiple=True, help="Only these dtypes.")
@click.option("--mode", "modes", multiple=True, help="Only these modes.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None)
@click.option("--calls", type=click.IntRange(1, 1000), default=5, show_default=True, help="Timed calls per case.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"), show_default=True)
@click.option("--nsys", is_flag=True, help="Run under `nsys profile -t cuda,nvtx` (prints the command if nsys is missing).")
@click.option("--ncu", is_flag=True, help="Run ncu on the timed range; DRAM bytes and FLOPs against the cost model.")
@click.option("--memory", is_flag=True, help="Dump a CUDA memory snapshot (open it at pytorch.org/memory_viz).")
@click.option("--plain", is_flag=True, hidden=True, help="Just make the calls in their NVTX ranges (under nsys/ncu).")
def trace(suite_name, suites_file, component, impls, point_spec, dtypes, modes, device, calls, out_dir, nsys, ncu,
          memory, plain):
    """Profile chosen points: torch.profiler trace and kernel table, or nsys / ncu / a memory snapshot."""
    from bench import registry, suite
    from bench import trace as tr
    from bench.execute import Case

    dev = _device(device)
    comps = registry.discover()
    if point_spec:
        if not component:
            _fail("--point needs --component")
        if component not in comps:
            _fail(f"unknown component {component!r}; known: {', '.join(sorted(comps))}")
        comp = comps[component]
        try:
            point = suite.parse_point(comp, point_spec)
        except suite.SuiteError as e:
            _fail(str(e))
        cases = [Case(component, i, m, point, d) for i in (impls or comp.impls) for m in (modes or comp.modes[:1])
                 for d in (dtypes or comp.dtypes[:1])]
    else:
        path = _suites_path(suites_file)
        try:
            chosen = suite.select(suite.load(path), [suite_name or "quick"], path)
        except suite.SuiteError as e:
            _fail(str(e))
        from bench.runner import plan

        cases = [p.case for p in plan(chosen, list(impls) or None)
                 if (not component or p.case.component == component) and (not dtypes or p.case.dtype in dtypes)
                 and (not modes or p.case.mode in modes)]
    if not cases:
        _fail("no case matches the filters")
    for c in cases:
        if c.impl not in comps[c.component].impls:
            _fail(f"{c.component} has no implementation {c.impl!r}; known: {', '.join(comps[c.component].impls)}")
        if comps[c.component].ranked:
            why = comps[c.component].unmet(comps[c.component].impls[c.impl], c.point, dev)
            if why:  # before torchrun starts (the point's ranks, not the implementation's listed needs)
                _fail(f"{c.label} cannot run here: {why}")
            world = tr.world_size(c)
            # ncu replays a kernel alone, while an NCCL kernel waits for its peers on other processes
            if ncu and world > 1:
                _fail(f"{c.label}: ncu cannot replay the collectives of {world} ranks; profile it with --nsys, or "
                      f"give --point with world_size=1")
        # Triton picks its driver when the kernels are first launched: on a CPU only the interpreter is there,
        # and it must have been chosen before the kernels were imported (bench run sets it for its workers)
        if (dev == "cpu" and comps[c.component].impls[c.impl].interpreted_on_cpu
                and os.environ.get("TRITON_INTERPRET") != "1"):
            _fail(f"{c.label}: Triton kernels need a CUDA GPU; on a CPU run them through the interpreter "
                  f"(TRITON_INTERPRET=1 bench trace ...), whose profile says nothing of a GPU's")
    out_dir.mkdir(parents=True, exist_ok=True)  # a directory the system refuses fails here, not after the profile

    if nsys:
        for c in cases:
            cmd = tr.nsys_command(c, dev, out_dir, calls)
            import shlex

            if not tr.have("nsys"):
                console.print(f"nsys was not found on PATH; to profile {c.label} run:\n  {shlex.join(cmd)}")
                continue
            subprocess_run(cmd)
        return
    if ncu:
        if not tr.have("ncu"):
            _fail("ncu was not found on PATH (Nsight Compute); it also needs a CUDA GPU")
        table = Table(title="ncu on the timed call vs the cost model")
        for col in ("case", "kernels", "DRAM MB (ncu)", "MB (model)", "ratio", "GFLOP (ncu)", "GFLOP (model)", "ratio"):
            table.add_column(col, justify="right")
        for c in cases:
            try:
                res, cmd = tr.run_ncu(c, dev)
            except tr.NcuError as e:
                _fail(str(e))
            cost = comps[c.component].cost(c.point, c.dtype, c.mode)
            measured_flops = res["simt_flops"] if cost.math == "vector" else res["tensor_ops"]
            console.print(f"[dim]{escape(cmd)}[/]", markup=True)
            for k in res["kernels"]:
                console.print(f"  kernel: {k}")
            table.add_row(c.label, str(len(res["kernels"])), f"{res['dram_bytes'] / 1e6:,.2f}", f"{cost.bytes / 1e6:,.2f}",
                          f"{res['dram_bytes'] / cost.bytes:.3f}" if cost.bytes else "-",
                          f"{measured_flops / 1e9:,.3f}" if measured_flops or res["tensor_measured"] else "n/a",
                          f"{cost.flops / 1e9:,.3f}",
                          f"{measured_flops / cost.flops:.3f}" if measured_flops and cost.flops else "-")
        console.print(table)
        return
    if memory and dev != "cuda":
        _fail("--memory records CUDA allocations; it needs --device cuda")
    for c in cases:
        if comps[c.component].ranked:
            _trace_ranked(c, dev, calls, out_dir, memory, plain)
            continue
        try:
            p = tr.prepare(c, dev)
        except ValueError as e:
            _fail(str(e))
        if plain:
            tr.run_calls(p, warmup=2, calls=calls)
            continue
        if memory:
            path = tr.memory_snapshot(p, out_dir, calls)
            console.print(f"{c.label}: memory snapshot {path} (drag it into https://pytorch.org/memory_viz)")
            continue
        path, kernels = tr.profile(p, out_dir, warmup=2, calls=calls)
        _print_kernels(f"{c.label}: {'kernels' if dev == 'cuda' else 'aten ops (CPU)'} over 2 warmup + {calls} timed "
                       f"calls", kernels)
        console.print(f"trace: {path} (open in https://ui.perfetto.dev or chrome://tracing)")


def _trace_ranked(c, dev: str, calls: int, out_dir: Path, memory: bool, plain: bool) -> None:
    """`bench trace` of a multi-rank case: its ranks under torchrun, each making the same calls."""
    import subprocess

    from bench import trace as tr

    if plain:
        if subprocess.run(tr.plain_command(c, dev, calls, None)).returncode:
            _fail(f"{c.label}: a rank failed (its output is above)")
        return
    try:
        rows = tr.run_ranked(c, dev, calls, out_dir, "memory" if memory else "trace")
    except tr.RankedError as e:
        _fail(str(e))
    if memory:
        for r in rows:
            console.print(f"{c.label}: rank {r['rank']}'s memory snapshot {r['path']} (https://pytorch.org/memory_viz)")
        return
    _print_kernels(f"{c.label}: rank 0's {'kernels' if dev == 'cuda' else 'aten ops (CPU)'} over 2 warmup + {calls} "
                   f"timed calls", rows[0]["kernels"])
    for r in rows:
        console.print(f"rank {r['rank']}'s trace: {r['path']} (open in https://ui.perfetto.dev or chrome://tracing)")


def _print_kernels(title: str, kernels: list[dict]) -> None:
    if not kernels:  # e.g. an all-reduce of one rank: NCCL launches nothing
        console.print(f"{title}: none ran")
        return
    table = Table(title=title)
    for col in ("kernel", "calls", "total us", "mean us", "share"):
        table.add_column(col, justify="left" if col == "kernel" else "right", overflow="fold")
    for k in kernels[:25]:
        table.add_row(k["kernel"][:90], str(k["calls"]), f"{k['total_us']:,.1f}", f"{k['mean_us']:,.2f}", f"{k['share']:.1%}")
    console.print(table)


def subprocess_run(cmd):
    import subprocess

    proc = subprocess.run(cmd)
    if proc.returncode:
        sys.exit(proc.returncode)


# ---- calibrate ------------------------------------------------------------------------------------------------

@main.command()
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None)
@click.option("--quick", is_flag=True, help="Smaller problems, seconds instead of a minute.")
@click.option("--world-size", type=click.IntRange(min=1), default=None,
              help="Ranks for the all-reduce bus bandwidth (default: every GPU when several are present, else none).")
@click.option("--use", "use_file", default=None, metavar="FILE",
              help="Measure nothing: take this device's ceilings from a calibration file of another machine (e.g. "
                   "baselines/h100/calibration.json), so that runs here are judged against the baseline's roofline.")
def calibrate(device, quick, world_size, use_file):
    """Measure this machine's ceilings and cache them for `bench run`."""

    from bench import calibrate as cal
    from bench import roofline
    from bench.results import device_name, environment

    dev = _device(device)
    env = environment(dev)
    name = device_name(env, dev)
    if use_file:
        try:
            spec, key = roofline.adopt(use_file, name, env.get("driver"))
        except ValueError as e:
            _fail(str(e))
        console.print(f"{name} (driver {env.get('driver') or 'n/a'}): the ceilings of {key} in {use_file} "
                      f"({spec.mem_bw / 1e9:,.0f} GB/s copy), stored in {roofline.cache_path()}")
        return
    console.print(f"calibrating {name} (driver {env.get('driver') or 'n/a'})")
    if world_size is None:
        world_size = env.get("gpu_count", 0) if dev == "cuda" and env.get("gpu_count", 0) > 1 else 1
    if dev == "cuda" and world_size > env.get("gpu_count", 0):
        _fail(f"--world-size {world_size}: only {env.get('gpu_count', 0)} GPUs are visible")
    roofline.cache_path().parent.mkdir(parents=True, exist_ok=True)  # a cache that cannot be made fails now, not after
    measured = cal.measure(dev, quick=quick, log=lambda s: console.print("  " + s), world_size=world_size)
    kept = roofline.carried_comm(measured, roofline.load_cached(name, env.get("driver")))
    measured.update(kept)
    ranks = measured.get("allreduce", {}).get("world_size", "several" if kept else world_size)
    if kept:
        console.print(f"  kept the interconnect's ceilings of the earlier calibration over {ranks} ranks "
                      f"(--world-size N measures them again)")
    sheet = roofline.datasheet(name)
    spec = roofline.merge(measured, sheet, name)
    table = Table(title=f"ceilings of {name}")
    for col in ("ceiling", "measured", "datasheet", "measured / datasheet"):
        table.add_column(col, justify="right")

    def add(label, got, ref, unit, scale):
        ratio = f"{got / ref:.0%}" if ref else "-"
        table.add_row(label, f"{got / scale:,.1f} {unit}", f"{ref / scale:,.1f} {unit}" if ref else "-", ratio)

    add("memory bandwidth", spec.mem_bw, sheet.mem_bw if sheet else None, "GB/s", 1e9)
    unit, scale = ("TFLOP/s", 1e12) if dev == "cuda" else ("GFLOP/s", 1e9)
    for dtype, rate in measured["tensor_flops"].items():
        add(f"matmul {dtype}", rate, sheet.tensor_flops.get(dtype) if sheet else None, unit, scale)
    if measured.get("interconnect_bw"):
        add(f"all-reduce bus bw ({ranks} ranks)", measured["interconnect_bw"],
            sheet.interconnect_bw if sheet else None, "GB/s", 1e9)
    table.add_row("launch overhead", f"{spec.launch_s * 1e6:.1f} us", "-", "-")
    if measured.get("comm_latency_s"):
        table.add_row(f"all-reduce latency ({ranks} ranks)", f"{spec.comm_latency_s * 1e6:,.1f} us", "-", "-")
    console.print(table)
    path = roofline.store(spec, name, env.get("driver"))
    console.print(f"stored in {path}")


# ---- compare / export -----------------------------------------------------------------------------------------

def _percent(ctx, param, value: str) -> float:
    try:
        v = float(value.rstrip("%")) / (100 if value.endswith("%") else 1)
    except ValueError:
        raise click.BadParameter(f"expected a percentage like 5% or 0.05, got {value!r}")
    if not 0 < v < 10:
        raise click.BadParameter(f"threshold must be positive, got {value!r}")
    return v


def _result_files(paths):
    """Each path is a file with result rows in it: a wrong file (an explore script's rows, a pytest-benchmark
    JSON, an empty file) is an error, never an empty report or a gate that passes."""
    from bench.results import holds_rows

    for p in paths:
        if not Path(p).is_file():
            _fail(f"results file {p} not found")
        if not holds_rows(p):
            _fail(f"{p} holds no result rows (`bench run --out FILE` writes one row per point)")


@main.command()
@click.argument("baseline", nargs=1)
@click.argument("current", nargs=1)
@click.option("--threshold", default="5%", callback=_percent, show_default=True,
              help="Smallest change in median time that counts.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.01, show_default=True,
              help="Significance level of the Mann-Whitney U test.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table", show_default=True)
@click.option("--all", "show_all", is_flag=True, help="Show unchanged rows too.")
@click.option("--fail-on", type=click.Choice(["slower", "broken"]), default="slower", show_default=True,
              help="What exits 1: `slower` (a slower row, or correctness lost) or `broken` (correctness lost only; "
                   "slower rows are still listed), for machines whose timing cannot be trusted.")
@click.option("--across-devices", is_flag=True,
              help="Match the rows of two machines (one device a side), e.g. an H100 run against an H200 baseline.")
def compare(baseline, current, threshold, alpha, fmt, show_all, fail_on, across_devices):
    """Compare CURRENT results against BASELINE; exit 1 on a regression (slower, or correctness lost)."""
    from bench import compare as cmp

    _result_files([baseline, current])
    failing = cmp.FAIL_ON[fail_on]
    try:
        verdicts = cmp.compare_files([baseline], [current], threshold, alpha, across_devices)
    except cmp.AcrossDevicesError as e:
        _fail(str(e))
    why = cmp.nothing_in_common(verdicts, " (--across-devices compares two machines)")
    if why:
        _fail(f"no case of {current} is in {baseline}: {why}")
    matched = cmp.devices_matched(verdicts, across_devices)  # json names it in every row
    machines = f"across devices: {matched}" if matched else ""
    if fmt == "markdown":
        verdict_line, _, rest = cmp.markdown(verdicts, threshold, alpha, failing, show_all).partition("\n")
        click.echo(verdict_line + (f"\n\n{machines}" if machines else "") + "\n" + rest)
    elif fmt == "json":
        click.echo(cmp.as_json(verdicts, failing))
    else:
        table = Table(title=f"{current} vs {baseline} (threshold {threshold:.0%}, alpha {alpha}"
                            f"{'; ' + machines if machines else ''})")
        for col in cmp.HEADER:
            table.add_column(col)
        styles = {"broken": "bold red", "slower": "red", "faster": "green", "noisy": "yellow", "fixed": "green"}
        for v in cmp.listed(verdicts, show_all):
            table.add_row(*cmp.row_cells(v), style=styles.get(v.verdict))
        console.print(table)
        console.print(", ".join(f"{n} {k}" for k, n in sorted(cmp.counts(verdicts).items())))
        missing = cmp.unlisted_missing(verdicts, show_all)
        if missing:
            console.print(missing)
    if cmp.failed(verdicts, failing):
        if fmt == "table":
            err.print(f"[bold red]regression[/]: {' or '.join(failing)} rows above", markup=True)
        sys.exit(1)


@main.command("export")
@click.argument("results_files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["pytest-benchmark"]), default="pytest-benchmark", show_default=True)
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output JSON file.")
def export_cmd(results_files, fmt, out):
    """Export results to pytest-benchmark's JSON (readable by `pytest-benchmark compare`)."""
    from bench.export import export

    _result_files(results_files)
    n = export(list(results_files), out)
    console.print(f"wrote {n} benchmarks to {out}")


@main.command("crosscheck")
@click.option("--case", "cases", multiple=True, required=True, metavar="COMPONENT:IMPL:MODE:DTYPE:k=v,k=v",
              help="A case to time with both timers (repeatable).")
def crosscheck_cmd(cases):
    """Time cases with the suite's timer and with triton.testing.do_bench, side by side (GPU)."""
    import torch

    from bench.crosscheck import crosscheck

    parsed = [_parse_case(spec) for spec in cases]  # every mistake before a GPU is asked for
    if not torch.cuda.is_available():
        _fail("bench crosscheck compares two GPU timers, but torch sees no CUDA GPU here")
    table = Table(title="suite timer vs triton.testing.do_bench (medians)")
    for col in ("case", "bench", "do_bench", "ratio"):
        table.add_column(col, justify="right")
    for case in parsed:
        r = crosscheck(case, "cuda")
        table.add_row(r["case"], _fmt_ms(r["bench_ms"]), _fmt_ms(r["do_bench_ms"]), f"{r['ratio']:.3f}")
    console.print(table)


def _parse_case(spec: str):
    """COMPONENT:IMPL:MODE:DTYPE:k=v,k=v as a Case of one process, each part checked as a suite entry's."""
    from bench import registry, suite
    from bench.execute import Case

    try:
        name, impl, mode, dtype, point = suite.parse_case(spec)
    except suite.SuiteError as e:
        _fail(str(e))
    if registry.get(name).ranked:
        _fail(f"--case {spec!r}: {name} runs a process a rank; crosscheck times one process's calls")
    return Case(name, impl, mode, point, dtype)


if __name__ == "__main__":
    main()
