"""Render result files into one offline HTML report: overview, one section per component, comparison.

Reads rows with `bench.results.load` (pandas only), draws with plotly (plotly.js written once beside the page,
no CDN) and lays out with jinja2 (autoescaped: every string from a results file is shown, never executed).
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from jinja2 import Environment, FileSystemLoader, select_autoescape

from bench.results import atomic_write, load, natural_key, point_label
from bench.roofline import datasheet

TEMPLATES = Path(__file__).parent / "templates"
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]
SYMBOLS = {"bf16": "circle", "fp16": "triangle-up", "tf32": "diamond", "fp32": "square", "fp64": "x"}
STATUS_ORDER = ["ok", "mismatch", "error", "oom", "timeout", "skipped"]
TABLE_COLUMNS = [
    ("device", "device"), ("impl", "impl"), ("mode", "mode"), ("point", "point"), ("dtype", "dtype"),
    ("status", "status"), ("median_ms", "median ms"), ("p20_ms", "p20 ms"), ("p80_ms", "p80 ms"), ("n", "n"),
    ("late_samples", "late samples"),
    ("cpu_ms", "host ms/call"), ("tflops", "TFLOP/s"), ("gbps", "GB/s"), ("intensity", "FLOP/B"),
    ("predicted_ms", "roofline ms"), ("roofline_pct", "% roofline"), ("bound", "bound"), ("speedup", "speedup"),
    ("rel_err", "rel err"), ("tol", "tol"), ("peak_mem_bytes", "peak MB"),
    ("predicted_mem_bytes", "predicted MB"), ("predicted_comm_ms", "comm ms (pred.)"), ("comm_ms", "comm ms (meas.)"),
    ("comm_share", "comm % of step"), ("exposed_comm_share", "exposed comm %"), ("compile_s", "compile s"),
    ("timer", "timer"), ("kernel_configs", "kernel configs"), ("autotune_ms", "autotuner margin"),
    ("reason", "reason / note"),
]


def _num(x):
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _fmt(col: str, v) -> str:
    if not _num(v) or v == "":
        return ""
    if col == "kernel_configs":  # {kernel: config} the autotuner chose
        return "; ".join(f"{k}: {c}" for k, c in v.items()) if isinstance(v, dict) else str(v)
    if col == "autotune_ms":  # {kernel: {config: ms}} fastest first: how close the pick was
        return "; ".join(_margin(k, t) for k, t in v.items()) if isinstance(v, dict) else str(v)
    if col in ("median_ms", "p20_ms", "p80_ms", "predicted_ms", "cpu_ms", "predicted_comm_ms", "comm_ms"):
        return f"{v:.4g}"
    if col in ("comm_share", "exposed_comm_share"):
        return f"{100 * v:.1f}%"
    if col in ("tflops", "gbps", "intensity", "roofline_pct", "compile_s"):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"
    if col == "speedup":
        return f"{v:.2f}x"
    if col in ("rel_err", "tol"):
        return f"{v:.2e}"
    if col in ("peak_mem_bytes", "predicted_mem_bytes"):
        return f"{v / 1e6:,.1f}"
    if col in ("n", "late_samples"):
        return str(int(v))
    return str(v)


def _margin(kernel: str, timings: dict) -> str:
    """"_k: 8 tried, runner-up +21%": how much slower the autotuner measured its second-best config (a few
    percent: a pick that may differ from run to run). A candidate that failed to run has no time (its inf is
    stored as null)."""
    ms = sorted(t for t in timings.values() if _num(t))
    if len(ms) < 2 or not ms[0]:
        return f"{kernel}: {len(timings)} tried"
    return f"{kernel}: {len(timings)} tried, runner-up +{100 * (ms[1] / ms[0] - 1):.0f}%"


def _sort_key(col: str, v):
    """A numeric key the page sorts by (strings sort as text)."""
    return float(v) if _num(v) and isinstance(v, (int, float, np.number)) else ""


OPTIONAL = ["peak_tflops", "peak_gbps", "peak_comm_gbps", "math", "busbw_gbps", "backend", "launch_bound", "baseline",
            "predicted_mem_bytes", "peak_mem_bytes", "predicted_comm_ms", "comm_ms", "comm_share", "exposed_comm_share",
            "late_samples", "kernel_configs", "autotune_ms"]


def prepare(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for col in OPTIONAL:  # older rows, or rows from components without these fields
        if col not in df.columns:
            df[col] = None
    df["point_label"] = df["point"].map(point_label)
    df["device"] = df["device"].fillna(df.get("backend", "unknown"))
    # One row per case: files given together may repeat one (a rerun, a resumed run); the newest row stands.
    case = ["component", "impl", "mode", "point_label", "dtype", "device"]
    n = len(df)
    df = df.sort_values("time", kind="stable").drop_duplicates(case, keep="last").sort_index()
    df.attrs["superseded"] = n - len(df)
    df["size"] = df["flops"].where(df["flops"].notna() & (df["flops"] > 0), df["bytes"])
    df["speedup"] = np.nan
    # Speedup over the component's reference implementation at the same device/mode/point/dtype.
    for comp, g in df.groupby("component"):
        base = _baseline_impl(g)
        ref = g[(g["impl"] == base) & (g["status"] == "ok")].set_index(["device", "mode", "point_label", "dtype"])["median_ms"]
        for idx, row in g.iterrows():
            key = (row["device"], row["mode"], row["point_label"], row["dtype"])
            if row["status"] == "ok" and _num(row["median_ms"]) and key in ref.index and _num(ref.loc[key]):
                df.at[idx, "speedup"] = float(ref.loc[key]) / row["median_ms"]
        df.loc[g.index, "baseline_impl"] = base
    return df


def _baseline_impl(g: pd.DataFrame) -> str:
    """The reference implementation rows name (else eager when present, else the first impl seen); where the
    files hold no measured row of it (a sweep of sdpa and triton alone), the impl measured at the most points,
    so the speedups still compare the impls that ran."""
    impls = list(dict.fromkeys(g["impl"]))
    named = g["baseline"].dropna() if "baseline" in g.columns else []
    base = named.iloc[0] if len(named) else ("eager" if "eager" in impls else impls[0])
    measured = g.loc[(g["status"] == "ok") & g["median_ms"].notna(), "impl"].value_counts()
    if measured.empty or base in measured.index:
        return base
    return min(measured.index, key=lambda impl: (-measured[impl], impl))


def _colors(impls) -> dict:
    return {impl: PALETTE[i % len(PALETTE)] for i, impl in enumerate(sorted(impls))}


def _layout(title: str, xtitle: str, ytitle: str, xlog=False, ylog=False, height=420) -> dict:
    """A chart's layout: the legend in rows under the title, not over it (five impls and the roofline, or eight
    collectives, take two rows)."""
    return dict(
        title=dict(text=title, font=dict(size=15), y=0.96, yanchor="top"),  # callers escape results' text
        xaxis=dict(title=dict(text=xtitle), type="log" if xlog else "-", gridcolor="#e5e5e5", zeroline=False),
        yaxis=dict(title=dict(text=ytitle), type="log" if ylog else "-", gridcolor="#e5e5e5", zeroline=False),
        height=height, margin=dict(l=70, r=20, t=100, b=60), plot_bgcolor="white", paper_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left", font=dict(size=11)),
        hoverlabel=dict(align="left"), font=dict(family="system-ui, sans-serif", size=12),
    )


def _rate(tflops: float) -> str:
    return f"{tflops:,.0f} TFLOP/s" if tflops >= 1 else f"{tflops * 1e3:,.1f} GFLOP/s"


def roofline_chart(g: pd.DataFrame, colors: dict, device: str) -> dict:
    """Log-log intensity vs achieved FLOP/s per impl on one device, with its memory and compute roofs
    (one compute roof per dtype and math unit the rows use)."""
    fig = go.Figure()
    ok = g[(g["status"] == "ok") & g["tflops"].notna() & g["intensity"].notna() & (g["intensity"] > 0)]
    if ok.empty:
        return {}
    xs = ok["intensity"]
    xmin, xmax = float(xs.min()) / 4, float(xs.max()) * 4
    roofs = ok.dropna(subset=["peak_tflops", "peak_gbps"]).groupby(["peak_tflops", "peak_gbps"])
    dashes = ["dash", "dot", "dashdot", "longdash", "longdashdot"]
    for i, ((peak_t, peak_bw), rs) in enumerate(roofs):
        kinds = sorted({f"{d} {'matrix' if m == 'tensor' else 'vector'}" for d, m in zip(rs["dtype"], rs["math"])})
        ridge = peak_t * 1e12 / (peak_bw * 1e9)
        x = np.geomspace(min(xmin, ridge / 8), max(xmax, ridge * 4), 64)
        y = np.minimum(peak_bw * 1e9 * x, peak_t * 1e12) / 1e12
        label = f"roof {'/'.join(kinds)}: {_rate(peak_t)}, {peak_bw:,.0f} GB/s"
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line=dict(color="#666", width=1.3, dash=dashes[i % len(dashes)]),
                                 name=html.escape(label),
                                 hovertemplate=html.escape(f"{label}; ridge at {ridge:,.1f} FLOP/B") + "<extra></extra>"))
    for impl, s in ok.groupby("impl"):
        text = [html.escape(f"{r.impl} {r.mode} {r.dtype} {r.point_label}") + "<br>"
                + f"{r.median_ms:.4g} ms, {r.tflops:.3g} TFLOP/s, {r.gbps:,.0f} GB/s"
                + (f"<br>{r.roofline_pct:.1f}% of roofline ({r.bound})" if _num(r.roofline_pct) else "")
                for r in s.itertuples()]
        symbols = [SYMBOLS.get(d, "circle") + ("-open" if m != "fwd" else "") for d, m in zip(s["dtype"], s["mode"])]
        fig.add_trace(go.Scatter(x=s["intensity"], y=s["tflops"], mode="markers", name=html.escape(impl),
                                 marker=dict(color=colors[impl], size=9, symbol=symbols, line=dict(width=1.2, color=colors[impl])),
                                 text=text, hovertemplate="%{text}<extra></extra>"))
    shapes = ", ".join(f"{d} {SYMBOLS[d]}" for d in SYMBOLS if d in set(ok["dtype"]))
    lay = _layout(f"Roofline on {html.escape(device)}<br><sup>marker: {html.escape(shapes)}; filled fwd, open with backward</sup>", "arithmetic intensity (FLOP/byte, log)", "achieved TFLOP/s (log)",
                  xlog=True, ylog=True, height=460)
    lay["legend"] = dict(orientation="v", x=1.01, y=1, xanchor="left", yanchor="top", font=dict(size=11))
    lay["margin"].update(r=10, t=60)
    fig.update_layout(**lay)
    return fig.to_plotly_json()


def _split_axes(points: list) -> tuple[dict, list[dict]]:
    """(the axes every point has with one value, each point's other axes)."""
    dicts = [p if isinstance(p, dict) else {} for p in points]
    keys = list(dict.fromkeys(k for p in dicts for k in p))
    same = [k for k in keys if dicts and all(k in p for p in dicts) and len({str(p[k]) for p in dicts}) == 1]
    return {k: dicts[0][k] for k in same}, [{k: v for k, v in p.items() if k not in same} for p in dicts]


def _varying_labels(points: list) -> tuple[str, list[str]]:
    """(the axes every point shares, "batch=8,heads=16"; each point named by the axes that differ): a sweep's
    tick labels then read "seq=4096,head_dim=128" instead of repeating batch, heads and causal at every tick."""
    shared, rest = _split_axes(points)
    if len(points) < 2 or not shared or not any(rest):
        return "", [point_label(p) for p in points]
    return point_label(shared), [point_label(r) for r in rest]


def _predicted_trace(s: pd.DataFrame, order: list[str], x: list[str]) -> go.Scatter | None:
    """The roofline's time of each point in `order` (the cost model's, the same for every impl), drawn at `x`: a
    tick a point, or (one point) every impl's place, the one prediction repeated."""
    known = s.dropna(subset=["predicted_ms"]).groupby("point_label")
    predicted, bound = known["predicted_ms"].first().reindex(order), known["bound"].first().reindex(order)
    if not predicted.notna().any():
        return None
    hover = [html.escape(f"roofline {p}") + (f"<br>{m:.4g} ms predicted ({b}-bound)" if _num(m) else "")
             for p, m, b in zip(order, predicted, bound)]
    repeat = len(x) // len(order)
    return go.Scatter(x=x, y=predicted.tolist() * repeat, mode="lines+markers", name="roofline (predicted)",
                      line=dict(color="#444", dash="dash", width=1.5),
                      marker=dict(symbol="line-ew-open", size=14, color="#444"), text=hover * repeat,
                      hovertemplate="%{text}<extra></extra>")


def shape_charts(g: pd.DataFrame, colors: dict) -> list[dict]:
    """Per (device, mode, dtype): time against shape, measured per impl beside the roofline's prediction, and
    speedup over the reference impl (where there are several). A panel of one point (a training step per
    strategy) sets its impls side by side along x instead."""
    out = []
    ok = g[(g["status"] == "ok") & g["median_ms"].notna()]
    for (device, mode, dtype), s in ok.groupby(["device", "mode", "dtype"], sort=False):
        # by work, then (equal work: bucket sizes of one step) by the points' values
        points = sorted(s.drop_duplicates("point_label").to_dict("records"),
                        key=lambda r: (r["size"] if _num(r["size"]) else math.inf, natural_key(r["point"])))
        order = [r["point_label"] for r in points]
        fixed, ticks = _varying_labels([r["point"] for r in points])  # tick labels, in `order`
        one_point = len(order) == 1
        if one_point:
            fixed = order[0]
        time_fig, speed_fig = go.Figure(), go.Figure()
        roof = _predicted_trace(s, order, sorted(set(s["impl"])) if one_point else ticks)
        if roof is not None:
            time_fig.add_trace(roof)
        for impl, t in s.groupby("impl"):
            t = t.set_index("point_label").reindex(order)
            hover = [html.escape(f"{impl} {p}") + (f"<br>{m:.4g} ms" if _num(m) else "") for p, m in zip(order, t["median_ms"])]
            x = [impl] if one_point else ticks
            time_fig.add_trace(go.Scatter(x=x, y=t["median_ms"], mode="lines+markers", name=html.escape(impl),
                                          line=dict(color=colors[impl]), text=hover, hovertemplate="%{text}<extra></extra>",
                                          error_y=dict(type="data", symmetric=False, array=(t["p80_ms"] - t["median_ms"]),
                                                       arrayminus=(t["median_ms"] - t["p20_ms"]), thickness=1, width=3)))
            speed_fig.add_trace(go.Scatter(x=x, y=t["speedup"], mode="lines+markers", name=html.escape(impl),
                                           line=dict(color=colors[impl]), text=hover,
                                           hovertemplate="%{text}<br>%{y:.2f}x<extra></extra>"))
        base = s["baseline_impl"].iloc[0]
        title = f"{mode}, {dtype} on {device}" + (f" ({fixed})" if fixed else "")
        # a short y title: a long one runs down into the tick labels that hang left of the first points
        xtitle = "implementation" if one_point else "shape (ordered by work)"
        lt = _layout("Time per call<br><sup>median, bars p20-p80</sup>", xtitle, "ms (log)", ylog=True)
        ls = _layout(f"Speedup over {html.escape(base)}", xtitle, f"speedup over {html.escape(base)} (x)")
        for lay in (lt, ls):
            lay["xaxis"]["tickangle"] = -30 if len(order) > 3 else 0
            lay["xaxis"]["automargin"] = True
        ls["shapes"] = [dict(type="line", xref="paper", x0=0, x1=1, y0=1, y1=1, line=dict(color="#999", dash="dot"))]
        time_fig.update_layout(**lt)
        speed_fig.update_layout(**ls)
        one_impl = s["impl"].nunique() < 2  # its speedup over itself is 1 everywhere: no chart
        out.append({"title": title, "time": time_fig.to_plotly_json(),
                    "speedup": None if one_impl else speed_fig.to_plotly_json()})
    return out


def busbw_chart(g: pd.DataFrame, device: str) -> dict:
    """Collectives: nccl-tests' bus bandwidth per message size and op, against the roofline's (the bus bytes over
    the predicted time: the bandwidth ceiling for large messages, less where the latency bounds a small one) and
    the interconnect ceiling."""
    if "busbw_gbps" not in g.columns:
        return {}
    ok = g[(g["status"] == "ok") & g["busbw_gbps"].notna() & g["point"].map(lambda p: "mb" in p)]
    if ok.empty:  # only collectives sweep message sizes; a training step's bus bytes are not a size sweep
        return {}
    fig = go.Figure()
    ok = ok.assign(mb=ok["point"].map(lambda p: p.get("mb")), op=ok["point"].map(lambda p: p.get("op")),
                   ws=ok["point"].map(lambda p: p.get("world_size")))
    colors = _colors(set(ok["op"]))
    for (op, ws, dtype), s in ok.sort_values("mb").groupby(["op", "ws", "dtype"]):
        text = [html.escape(f"{op} {mb} MB x{ws} {dtype}") + f"<br>{t:.4g} ms, {b:,.1f} GB/s" for mb, t, b in
                zip(s["mb"], s["median_ms"], s["busbw_gbps"])]
        fig.add_trace(go.Scatter(x=s["mb"], y=s["busbw_gbps"], mode="lines+markers",  # an op a color, a dtype a marker
                                 line=dict(color=colors[op], dash="solid" if dtype == "bf16" else "dot"),
                                 marker=dict(symbol=SYMBOLS.get(dtype, "circle"), size=8),
                                 name=html.escape(f"{op} ({ws} ranks, {dtype})"), text=text,
                                 hovertemplate="%{text}<extra></extra>"))
    if "predicted_ms" in ok.columns:  # the roofline's bus bandwidth: the bus bytes over the predicted time
        known = ok[ok["predicted_ms"].notna()].drop_duplicates(["op", "ws", "mb"]).sort_values("mb")
        for (op, ws), s in known.groupby(["op", "ws"]):
            if (s["bound"] == "comm").all():  # the bandwidth ceiling everywhere: the ceiling's line below says it
                continue
            pred = s["busbw_gbps"] * s["median_ms"] / s["predicted_ms"]
            text = [html.escape(f"roofline of {op} {mb} MB x{ws}") + f"<br>{p:.4g} ms, {b:,.1f} GB/s ({bound}-bound)"
                    for mb, p, b, bound in zip(s["mb"], s["predicted_ms"], pred, s["bound"])]
            fig.add_trace(go.Scatter(x=s["mb"], y=pred, mode="lines", name=html.escape(f"{op} roofline"),
                                     line=dict(color=colors[op], dash="dash", width=1.5), text=text,
                                     hovertemplate="%{text}<extra></extra>"))
    ceiling = ok["peak_comm_gbps"].dropna() if "peak_comm_gbps" in ok.columns else pd.Series(dtype=float)
    span = [ok["mb"].min(), ok["mb"].max()]
    if len(ceiling):  # what predicted_comm_ms used: calibrated all-reduce bus bandwidth, or the datasheet's
        c = float(ceiling.iloc[0])
        fig.add_trace(go.Scatter(x=span, y=[c, c], mode="lines", name=f"ceiling used for predictions {c:,.0f} GB/s",
                                 line=dict(color="#666", dash="dash")))
    sheet = datasheet(device)
    if sheet is not None and sheet.interconnect_bw:
        d = sheet.interconnect_bw / 1e9
        fig.add_trace(go.Scatter(x=span, y=[d, d], mode="lines", name=f"datasheet interconnect {d:,.0f} GB/s",
                                 line=dict(color="#000", dash="dot")))
    fig.update_layout(**_layout(f"Bus bandwidth on {html.escape(device)}", "message size (MB, log)",
                                "bus bandwidth (GB/s, nccl-tests definition)", xlog=True))
    return fig.to_plotly_json()


def memory_chart(g: pd.DataFrame, device: str) -> dict:
    """Components that predict their memory (data_parallel): measured peak per rank beside the prediction, per
    implementation and point, with the measured / predicted ratio in the hover."""
    ok = g[(g["status"] == "ok") & g["predicted_mem_bytes"].notna() & g["peak_mem_bytes"].notna()]
    if ok.empty:
        return {}
    ok = pd.DataFrame(sorted(ok.to_dict("records"), key=lambda r: (r["impl"], natural_key(r["point"]), r["dtype"])))
    # a bar is named by its impl and what differs between the bars; what they share goes in the title
    shared, rest = _split_axes(ok["point"].tolist())
    several = [c for c in ("mode", "dtype") if ok[c].nunique() > 1]
    labels = [html.escape(" ".join([r["impl"], *(str(r[c]) for c in several)] + ([point_label(v)] if v else [])))
              for r, v in zip(ok.to_dict("records"), rest)]
    gib = 2**30
    ratio = ok["peak_mem_bytes"] / ok["predicted_mem_bytes"]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=(ok["peak_mem_bytes"] / gib).tolist(), name="measured peak (max over ranks)",
                         marker_color=PALETTE[0], text=[f"measured / predicted {r:.2f}" for r in ratio],
                         hovertemplate="%{x}<br>%{y:.2f} GiB, %{text}<extra></extra>"))
    fig.add_trace(go.Bar(x=labels, y=(ok["predicted_mem_bytes"] / gib).tolist(), name="predicted", marker_color=PALETTE[1],
                         hovertemplate="%{x}<br>%{y:.2f} GiB predicted<extra></extra>"))
    title = f"Peak memory per rank on {device}" + (f" ({point_label(shared)})" if shared else "")
    fig.update_layout(barmode="group", **_layout(html.escape(title), "implementation", "memory per rank (GiB)"))
    return fig.to_plotly_json()


def table(g: pd.DataFrame) -> dict:
    rows = []
    for r in g.sort_values(["device", "mode", "dtype", "size", "impl"]).to_dict("records"):
        r["point"] = r["point_label"]
        reason = r.get("reason") or ""
        if r["status"] == "mismatch" and _num(r.get("rel_err")):
            reason = f"rel err {r['rel_err']:.3g} > tol {r['tol']:.3g}. {reason}"
        if r.get("check_note"):
            reason = f"{reason} [{r['check_note']}]".strip()
        if r.get("launch_bound"):
            reason = f"{reason} launch-bound (host time >= device time)".strip()
        r["reason"] = reason
        cells = [{"text": _fmt(col, r.get(col)), "key": _sort_key(col, r.get(col))} for col, _ in TABLE_COLUMNS]
        rows.append({"status": r["status"], "cells": cells})
    # columns no row of this component fills (a matmul has no communication share) are left out; the first six
    # (device .. status) and the reason always stay, where the page's styling expects them
    keep = [i for i, (col, _) in enumerate(TABLE_COLUMNS)
            if i < 6 or col == "reason" or any(row["cells"][i]["text"] for row in rows)]
    return {"columns": [TABLE_COLUMNS[i][1] for i in keep],
            "rows": [{"status": row["status"], "cells": [row["cells"][i] for i in keep]} for row in rows]}


def first_oom(g: pd.DataFrame) -> list[dict]:
    """Where each implementation first runs out of memory: an `oom` row whose point, moved down along one numeric
    axis (the rest equal), ran `ok` and nowhere ran out lower. One line per such edge, e.g. naive attention at
    head_dim=16: ok at seq=4096, out of memory from seq=16384."""
    lines = []
    for (impl, mode, dtype, device), s in g.groupby(["impl", "mode", "dtype", "device"], sort=True):
        rows = [(r["point"], r["status"], r.get("reason", "")) for r in s.to_dict("records")
                if isinstance(r["point"], dict)]
        for point, status, reason in rows:
            if status != "oom":
                continue
            for axis, value in point.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                rest = {k: v for k, v in point.items() if k != axis}
                line = [(p[axis], st) for p, st, _ in rows if {k: v for k, v in p.items() if k != axis} == rest
                        and p[axis] < value]
                ok_below = [v for v, st in line if st == "ok"]
                if ok_below and not any(st == "oom" for _, st in line):
                    lines.append({"impl": impl, "mode": mode, "dtype": dtype, "device": device, "axis": axis,
                                  "ok": max(ok_below), "oom": value, "at": point_label(rest),
                                  "reason": str(reason)[:160]})
    return sorted(lines, key=lambda r: (r["impl"], r["mode"], r["dtype"], r["axis"], r["at"]))


def overview(df: pd.DataFrame) -> list[dict]:
    """Per component and device: the fastest impl (geomean speedup over the reference), its % of roofline."""
    out = []
    for (comp, device), g in df.groupby(["component", "device"], sort=True):
        counts = g["status"].value_counts().to_dict()
        ok = g[(g["status"] == "ok") & g["speedup"].notna()]
        best, best_speed, best_pct = None, None, None
        if not ok.empty:
            geo = ok.groupby("impl")["speedup"].apply(lambda s: float(np.exp(np.log(s).mean())))
            best = geo.idxmax()
            best_speed = geo.max()
            pct = ok[ok["impl"] == best]["roofline_pct"].dropna()
            best_pct = float(pct.median()) if len(pct) else None
        # out of memory is a limit of the machine (the section names where it starts), not a failure
        wrong, failed = counts.get("mismatch", 0), counts.get("error", 0) + counts.get("timeout", 0)
        out.append({"component": comp, "device": device, "best": best or "-",
                    "speedup": f"{best_speed:.2f}x" if best_speed else "-",
                    "roofline": f"{best_pct:.0f}%" if best_pct is not None else "-",
                    "baseline": g["baseline_impl"].iloc[0], "impls": len(set(g["impl"])), "rows": len(g),
                    "statuses": [{"status": s, "n": counts[s]} for s in STATUS_ORDER if counts.get(s)],
                    "wrong": wrong, "failed": failed})
    return out


def copy_probes(g: pd.DataFrame) -> list[str]:
    """One line per run of a machine's rows that recorded a copy probe (bench.calibrate.copy_probe)."""
    lines = []
    for run, rg in g.groupby("run_id", sort=True) if "run_id" in g.columns else ():
        env = next((e for e in rg["env"] if isinstance(e, dict)), {}) or {}
        probe = env.get("copy_probe")
        if isinstance(probe, dict) and probe.get("us"):
            lines.append(f"copy probe, run {run}: {probe['mib']} MiB into {probe['mib']} MiB in {probe['us']:.2f} us "
                         f"({probe['gbps']:,.0f} GB/s)")
    return lines


def machines(df: pd.DataFrame) -> list[dict]:
    out = []
    for device, g in df.groupby("device", sort=True):
        env = next((e for e in g["env"] if isinstance(e, dict)), {}) or {}
        peaks = (g.dropna(subset=["peak_tflops"]).groupby(["dtype", "math"])["peak_tflops"].first()
                 if "math" in g.columns else pd.Series(dtype=float))
        ceilings = [f"{dtype} {'matrix' if math == 'tensor' else 'vector'}: {_rate(v)}" for (dtype, math), v in peaks.items()]
        bw = g["peak_gbps"].dropna()
        if len(bw):
            ceilings.insert(0, f"memory: {bw.iloc[0]:,.0f} GB/s")
        at = 1 if len(bw) else 0  # after the memory ceiling
        ceilings[at:at] = copy_probes(g)
        times = pd.to_datetime(g["time"], errors="coerce")
        # each run's first to last row, summed: runs days apart do not count the days between them
        spans = times.groupby(g["run_id"].fillna("")).agg(lambda t: (t.max() - t.min()).total_seconds()).dropna()
        span = float(spans.sum()) if len(spans) else None
        times = times.dropna()
        out.append({
            "device": device, "backend": (g["backend"].dropna().iloc[0] if "backend" in g and g["backend"].notna().any() else ""),
            "software": ", ".join(f"{k} {env.get(k)}" for k in ("torch", "triton", "cuda", "driver", "python") if env.get(k)),
            "ceilings": ceilings, "source": ", ".join(sorted(set(g["ceiling_source"].dropna()))) or "none",
            "runs": ", ".join(sorted(set(g["run_id"].dropna()))), "suites": ", ".join(sorted(set(g["suite"].dropna()))),
            "started": str(times.min()) if len(times) else "", "duration": f"{span / 60:.1f} min" if span is not None else "",
            "git": ", ".join(sorted(set(g["git_sha"].dropna()))), "rows": len(g),
        })
    return out


def comparison(current: pd.DataFrame, baselines: list[str], across_devices: bool = False) -> dict | None:
    """`bench compare`'s verdicts of the rows `current` (as results.load gives them) against the files `baselines`;
    `across_devices` as its flag (AcrossDevicesError unless each side holds one device)."""
    if not baselines:
        return None
    from bench import compare as cmp

    verdicts = cmp.compare_frames(load(baselines), current, across_devices=across_devices)
    rows = [{"verdict": v.verdict, "cells": cmp.row_cells(v)} for v in cmp.listed(verdicts, show_all=True)]
    return {"columns": cmp.HEADER, "rows": rows, "counts": cmp.counts(verdicts), "failed": cmp.failed(verdicts),
            "nothing_in_common": cmp.nothing_in_common(verdicts), "baselines": baselines,
            "devices": cmp.devices_matched(verdicts, across_devices)}


def _script_json(obj) -> str:
    """JSON safe inside a <script> block: no '</script>' or HTML comment can end it early."""
    text = json.dumps(obj, allow_nan=False, default=_json_default)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return [_json_default(x) if isinstance(x, (np.floating, np.integer)) else x for x in o.tolist()]
    return str(o)


def _clean(obj):
    """NaN/Inf -> None everywhere (plotly draws gaps; JSON has no NaN)."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_clean(v) for v in obj.tolist()]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def render(paths: list[str], out_dir: str | Path, baselines: list[str] | None = None, title: str | None = None,
           across_devices: bool = False) -> Path:
    """Write out_dir/index.html (+ plotly.min.js) for the rows in `paths`; returns the page's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = load(paths)
    df = prepare(rows)
    charts: dict[str, dict] = {}
    sections = []
    for comp, g in df.groupby("component", sort=True):
        colors = _colors(set(g["impl"]))
        cid = f"c-{len(sections)}"
        roofs = []
        for device, gd in g.groupby("device", sort=True):
            for chart in (roofline_chart(gd, colors, device), busbw_chart(gd, device), memory_chart(gd, device)):
                if chart:
                    charts[f"{cid}-roof{len(roofs)}"] = chart
                    roofs.append(f"{cid}-roof{len(roofs)}")
        panels = []
        for i, panel in enumerate(shape_charts(g, colors)):
            charts[f"{cid}-t{i}"] = panel["time"]
            if panel["speedup"]:
                charts[f"{cid}-s{i}"] = panel["speedup"]
            panels.append({"title": panel["title"], "time": f"{cid}-t{i}",
                           "speedup": f"{cid}-s{i}" if panel["speedup"] else None})
        sections.append({"id": cid, "name": comp, "roofs": roofs, "panels": panels,
                         "table": table(g), "rows": len(g), "oom": first_oom(g),
                         "impls": ", ".join(sorted(set(g["impl"]))), "baseline": g["baseline_impl"].iloc[0]})
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
    page = env.get_template("report.html").render(
        title=title or "llm-bench report", sources=[str(p) for p in paths], machines=machines(df),
        overview=overview(df), sections=sections,
        comparison=comparison(rows, list(map(str, baselines or [])), across_devices),
        charts_json=_script_json(_clean(charts)), total_rows=len(df), superseded=df.attrs.get("superseded", 0),
    )
    js = out / "plotly.min.js"
    if not js.exists():
        from plotly.offline import get_plotlyjs

        atomic_write(js, get_plotlyjs())
    index = out / "index.html"
    atomic_write(index, page)
    return index
