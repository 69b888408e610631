"""Rows round-trip through JSONL into a DataFrame; corrupt lines are reported by line number and skipped."""
import json
import warnings

import pytest

from bench import results


def row(i, status="ok"):
    return {"run_id": "r", "component": "rmsnorm", "impl": "eager", "mode": "fwd", "point": {"tokens": i, "dim": 8},
            "dtype": "fp32", "device": "cpu:x", "status": status, "samples_ms": [1.0, 1.1], "median_ms": 1.05,
            "rel_err": float("inf") if status == "mismatch" else 1e-7}


def test_round_trip_has_documented_columns(tmp_path):
    path = tmp_path / "r.jsonl"
    with results.Writer(path) as w:
        for i in range(3):
            w.write(row(i))
        w.write(row(9, "mismatch"))
    df = results.load(path)
    assert len(df) == 4
    for col in results.COLUMNS:
        assert col in df.columns
    assert df.loc[0, "samples_ms"] == [1.0, 1.1]
    assert df.loc[1, "point"] == {"tokens": 1, "dim": 8}
    assert df.loc[3, "rel_err"] is None or df.loc[3, "rel_err"] != df.loc[3, "rel_err"]  # inf stored as null


def test_corrupt_and_truncated_lines_are_reported_and_skipped(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [json.dumps(row(0)), "{not json", json.dumps(row(1)), json.dumps(row(2))[:25]]
    path.write_text("\n".join(lines))  # the last line is truncated, without newline
    with pytest.warns(results.ResultsWarning) as caught:
        df = results.load(path)
    assert len(df) == 2
    msgs = " ".join(str(w.message) for w in caught)
    assert f"{path}:2:" in msgs and f"{path}:4:" in msgs


def test_objects_that_are_not_result_rows_are_named_and_skipped(tmp_path):
    """An object without the fields every row names (an explore script's row here) is no row of a run."""
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([json.dumps(row(0)), json.dumps({"variant": "desc", "us": 1.0}),
                               json.dumps({k: v for k, v in row(1).items() if k != "status"})]))
    with pytest.warns(results.ResultsWarning) as caught:
        got = results.read_rows(path)
    assert got == [row(0)]
    assert [str(w.message) for w in caught] == [
        f"{path}:2: not a result row, skipped (no component, impl, mode, point, dtype, status)",
        f"{path}:3: not a result row, skipped (no status)"]


def test_writer_starts_a_new_line_after_a_truncated_one(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(row(0)) + "\n" + json.dumps(row(1))[:20])
    with results.Writer(path) as w:
        w.write(row(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = results.load(path)
    assert sorted(p["tokens"] for p in df["point"]) == [0, 2]


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "a" / "f.json"
    results.atomic_write(path, "one")
    results.atomic_write(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]  # no temporary left behind


def test_one_label_for_a_point_wherever_it_is_read():
    """The run's log, its table, the report, `bench compare` (whose key holds the point as sorted JSON) and the
    NVTX range names all write a point the same way, in its own order."""
    point = {"tokens": 4096, "dim": 768, "causal": True}
    assert results.point_label(point) == "tokens=4096,dim=768,causal=True"
    assert results.point_label(json.dumps(point, sort_keys=True)) == "causal=True,dim=768,tokens=4096"
    assert results.point_label("not json") == "not json"
    assert results.point_label(None) == "None"
    assert sorted([{"mb": 25}, {"mb": 100}, {"mb": 1}], key=results.natural_key) == [
        {"mb": 1}, {"mb": 25}, {"mb": 100}]
