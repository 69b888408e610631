"""suites.yaml: named sweeps, validated once into typed objects.

A suite is {description, entries}, each entry {component, impls (default all), axes (lists expand to their
cartesian product) or points (explicit dicts), dtypes, modes}. Every mistake is a SuiteError naming the file, the
key path and, where one is close, the valid name meant.
"""
from __future__ import annotations

import difflib
import itertools
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bench import registry


class SuiteError(Exception):
    """A user mistake in a suites file or a suite name; the CLI prints it and exits 2."""


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    component: str
    impls: list[str] | None = None
    axes: dict[str, Any] | None = None
    points: list[dict[str, Any]] | None = None
    dtypes: list[str] = Field(default_factory=lambda: ["fp32"])
    modes: list[str] = Field(default_factory=lambda: ["fwd"])

    @field_validator("impls", "dtypes", "modes", "points")
    @classmethod
    def not_empty(cls, v):
        if v is not None and len(v) == 0:
            raise ValueError("empty list: nothing to run")
        return v


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    description: str = ""
    entries: list[Entry]

    @field_validator("entries")
    @classmethod
    def not_empty(cls, v):
        if not v:
            raise ValueError("a suite needs at least one entry")
        return v


class SuitesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    suites: dict[str, Suite]


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _suggest(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _fields(loc: tuple) -> list[str]:
    """Valid keys beside the unknown one at `loc`, for suggestions."""
    if "entries" in loc:
        return list(Entry.model_fields)
    if len(loc) == 3 and loc[0] == "suites":
        return list(Suite.model_fields)
    return list(SuitesFile.model_fields)


_SHAPES = {
    Suite: "expected a suite: a mapping of description (optional) and entries (a list of sweeps)",
    Entry: "expected an entry: a mapping of component, impls, axes or points, dtypes and modes",
    SuitesFile: "expected a mapping with a top-level key 'suites'",
}


def _model_at(loc: tuple) -> type[BaseModel]:
    """Which model the value at `loc` should have been (a pydantic model_type error's location)."""
    if "entries" in loc:
        return Entry
    return Suite if len(loc) == 2 and loc[0] == "suites" else SuitesFile


def load(path: str | Path) -> dict[str, Suite]:
    """Parse and validate a suites file (structure and registry names). Raises SuiteError."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SuiteError(f"{path}: cannot read suites file: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(e, "problem", None) or str(e)
        raise SuiteError(f"{path}: YAML syntax error at {where}: {problem}") from None
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}: expected a mapping with a top-level key 'suites', got {type(raw).__name__}")
    try:
        parsed = SuitesFile.model_validate(raw)
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            loc = err["loc"]
            if err["type"] == "extra_forbidden":
                key = loc[-1]
                msgs.append(f"{_path(loc)}: unknown key {key!r}{_suggest(key, _fields(loc))}")
            elif err["type"] == "model_type":  # a list or a scalar where a mapping belongs: say which mapping
                msgs.append(f"{_path(loc)}: {_SHAPES[_model_at(loc)]}, got {type(err['input']).__name__}")
            elif err["type"] == "dict_type" and loc == ("suites",):
                msgs.append(f"suites: expected a mapping of suite names to suites, got {type(err['input']).__name__}")
            else:
                msgs.append(f"{_path(loc)}: {err['msg']}")
        raise SuiteError(f"{path}: invalid suites file:\n  " + "\n  ".join(msgs)) from None
    for name, suite in parsed.suites.items():
        for i, entry in enumerate(suite.entries):
            _check_entry(path, f"suites.{name}.entries[{i}]", entry)
    return parsed.suites


def _check_entry(path: Path, where: str, e: Entry) -> None:
    def fail(key: str, msg: str):
        raise SuiteError(f"{path}: {where}.{key}: {msg}")

    comp = _check_names(fail, e)
    if (e.axes is None) == (e.points is None):
        fail("axes", "give exactly one of 'axes' (lists sweep their cartesian product) or 'points'")
    points = [("axes", e.axes)] if e.axes is not None else [(f"points[{i}]", p) for i, p in enumerate(e.points)]
    for key, axes in points:
        for name in axes:
            if name not in comp.axes:
                fail(f"{key}.{name}", f"{comp.name} has no axis {name!r}{_suggest(name, comp.axes)}; "
                                      f"its axes: {', '.join(comp.axes)}")
        for name, kind in comp.axes.items():
            if name not in axes:
                fail(key, f"missing axis {name!r} ({comp.name} needs {', '.join(comp.axes)})")
            values = axes[name] if isinstance(axes[name], list) else [axes[name]]
            if key == "axes" and isinstance(axes[name], list) and not values:
                fail(f"{key}.{name}", "empty sweep: give at least one value")
            for v in values:
                _check_value(fail, f"{key}.{name}", v, kind)


def _check_names(fail, e: Entry):
    """The entry's component, implementations, dtypes and modes are the registry's; returns the component."""
    comps = registry.discover()
    if e.component not in comps:
        fail("component", f"unknown component {e.component!r}{_suggest(e.component, comps)}; "
                          f"known: {', '.join(sorted(comps))}")
    comp = comps[e.component]
    for i, impl in enumerate(e.impls or []):
        if impl not in comp.impls:
            fail(f"impls[{i}]", f"{comp.name} has no implementation {impl!r}{_suggest(impl, comp.impls)}; "
                                f"known: {', '.join(comp.impls)}")
    for i, d in enumerate(e.dtypes):
        if d not in comp.dtypes:
            fail(f"dtypes[{i}]", f"{comp.name} does not take dtype {d!r}{_suggest(d, comp.dtypes)}; "
                                 f"it takes: {', '.join(comp.dtypes)}")
    for i, m in enumerate(e.modes):
        if m not in comp.modes:
            fail(f"modes[{i}]", f"{comp.name} has no mode {m!r}{_suggest(m, comp.modes)}; "
                                f"it has: {', '.join(comp.modes)}")
    return comp


def _check_value(fail, key: str, v: Any, kind) -> None:
    if isinstance(kind, tuple):  # a choice among names
        if v not in kind:
            fail(key, f"{v!r} is not one of {', '.join(map(str, kind))}{_suggest(v, kind)}")
    elif kind is bool:
        if not isinstance(v, bool):
            fail(key, f"expected true or false, got {v!r}")
    elif kind is int:
        if isinstance(v, bool) or not isinstance(v, int):
            fail(key, f"expected a positive integer, got {v!r}")
        if v <= 0:
            fail(key, f"sizes must be positive, got {v}")
    elif kind is str:
        if not isinstance(v, str):
            fail(key, f"expected a string, got {v!r}")
    elif not isinstance(v, kind):
        fail(key, f"expected {getattr(kind, '__name__', kind)}, got {v!r}")


def parse_point(comp, spec: str, where: str | None = None) -> dict:
    """A point given on the command line, `k=v,k=v` with every axis of `comp`, parsed and checked as a suite's;
    errors begin with `where` (default: the --point option)."""
    def fail(key: str, msg: str):
        raise SuiteError(f"{where or f'--point {spec!r}'}: {key}: {msg}")

    pairs = [kv.split("=", 1) for kv in spec.split(",")]
    bad = next((kv for kv in pairs if len(kv) != 2), None)
    if bad is not None:
        fail("=".join(bad), f"expected {','.join(f'{a}=...' for a in comp.axes)}")
    point = {}
    for name, text in pairs:
        if name not in comp.axes:
            fail(name, f"{comp.name} has no axis {name!r}{_suggest(name, comp.axes)}; its axes: {', '.join(comp.axes)}")
        kind = comp.axes[name]
        if kind is int:
            try:
                point[name] = int(text)
            except ValueError:
                fail(name, f"expected a positive integer, got {text!r}")
        elif kind is bool:
            if text.lower() not in ("true", "false"):
                fail(name, f"expected true or false, got {text!r}")
            point[name] = text.lower() == "true"
        else:  # a choice among names, or a string
            point[name] = text
        _check_value(fail, name, point[name], kind)
    missing = [a for a in comp.axes if a not in point]
    if missing:
        fail(", ".join(missing), f"missing ({comp.name} needs {', '.join(comp.axes)})")
    return {a: point[a] for a in comp.axes}


def parse_case(spec: str) -> tuple[str, str, str, str, dict]:
    """(component, impl, mode, dtype, point) from COMPONENT:IMPL:MODE:DTYPE:k=v,k=v on the command line, each part
    checked as a suite entry's."""
    where = f"--case {spec!r}"

    def fail(key: str, msg: str):
        raise SuiteError(f"{where}: {key}: {msg}")

    parts = spec.split(":", 4)
    if len(parts) != 5:
        raise SuiteError(f"{where}: expected COMPONENT:IMPL:MODE:DTYPE:k=v,k=v")
    name, impl, mode, dtype, point_spec = parts
    comp = _check_names(fail, Entry(component=name, impls=[impl], dtypes=[dtype], modes=[mode]))
    return name, impl, mode, dtype, parse_point(comp, point_spec, where)


def expand(entry: Entry) -> list[dict]:
    """The points of an entry: the cartesian product of its axes, or its explicit points, in order."""
    comp = registry.get(entry.component)
    if entry.points is not None:
        return [{name: p[name] for name in comp.axes} for p in entry.points]
    lists = [entry.axes[n] if isinstance(entry.axes[n], list) else [entry.axes[n]] for n in comp.axes]
    return [dict(zip(comp.axes, combo)) for combo in itertools.product(*lists)]


def select(suites: dict[str, Suite], names: list[str], path: str | Path) -> list[tuple[str, Suite]]:
    out = []
    for name in names:
        if name not in suites:
            raise SuiteError(f"{path}: no suite named {name!r}{_suggest(name, suites)}; "
                             f"suites: {', '.join(suites)}")
        out.append((name, suites[name]))
    return out
