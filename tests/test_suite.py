"""suites.yaml validation: each kind of mistake exits 2 with a message naming the file and key path."""
import textwrap

import pytest
from click.testing import CliRunner

from bench import suite
from bench.cli import main

GOOD_ENTRY = """\
      - component: rmsnorm
        impls: [eager]
        axes: {tokens: [4, 8], dim: 16}
        dtypes: [fp32]
        modes: [fwd]
"""


def write(tmp_path, body: str):
    p = tmp_path / "suites.yaml"
    p.write_text(body)
    return p


def suites_with(entry: str) -> str:
    return "suites:\n  s:\n    entries:\n" + textwrap.indent(textwrap.dedent(entry), "      ")


CASES = {
    "syntax": ("suites:\n  s: [unclosed\n", "YAML syntax error at line 3"),
    "unknown_top_key": ("suites: {}\nsuite: {}\n", "suite: unknown key 'suite' (did you mean 'suites'?)"),
    "unknown_entry_key": (suites_with("- component: rmsnorm\n  axes: {tokens: 4, dim: 4}\n  dtype: [fp32]\n"),
                          "suites.s.entries[0].dtype: unknown key 'dtype' (did you mean 'dtypes'?)"),
    "unknown_component": (suites_with("- component: rmsnrom\n  axes: {tokens: 4, dim: 4}\n"),
                          "suites.s.entries[0].component: unknown component 'rmsnrom' (did you mean 'rmsnorm'?)"),
    "unknown_impl": (suites_with("- component: rmsnorm\n  impls: [eagre]\n  axes: {tokens: 4, dim: 4}\n"),
                     "suites.s.entries[0].impls[0]: rmsnorm has no implementation 'eagre' (did you mean 'eager'?)"),
    "unknown_axis": (suites_with("- component: rmsnorm\n  axes: {tokens: 4, dims: 4}\n"),
                     "suites.s.entries[0].axes.dims: rmsnorm has no axis 'dims' (did you mean 'dim'?)"),
    "missing_axis": (suites_with("- component: rmsnorm\n  axes: {tokens: 4}\n"),
                     "suites.s.entries[0].axes: missing axis 'dim'"),
    "unknown_dtype": (suites_with("- component: rmsnorm\n  axes: {tokens: 4, dim: 4}\n  dtypes: [bf61]\n"),
                      "suites.s.entries[0].dtypes[0]: rmsnorm does not take dtype 'bf61' (did you mean 'bf16'?)"),
    "unknown_mode": (suites_with("- component: rmsnorm\n  axes: {tokens: 4, dim: 4}\n  modes: [fwd_bwdd]\n"),
                     "suites.s.entries[0].modes[0]: rmsnorm has no mode 'fwd_bwdd' (did you mean 'fwd_bwd'?)"),
    "wrong_type": (suites_with("- component: rmsnorm\n  axes: {tokens: '4', dim: 4}\n"),
                   "suites.s.entries[0].axes.tokens: expected a positive integer, got '4'"),
    "wrong_type_list": (suites_with("- component: rmsnorm\n  axes: {tokens: 4, dim: 4}\n  dtypes: fp32\n"),
                        "suites.s.entries[0].dtypes: Input should be a valid list"),
    "empty_sweep": (suites_with("- component: rmsnorm\n  axes: {tokens: [], dim: 4}\n"),
                    "suites.s.entries[0].axes.tokens: empty sweep"),
    "empty_dtypes": (suites_with("- component: rmsnorm\n  axes: {tokens: 4, dim: 4}\n  dtypes: []\n"),
                     "suites.s.entries[0].dtypes: Value error, empty list"),
    "zero_size": (suites_with("- component: rmsnorm\n  axes: {tokens: [4, 0], dim: 4}\n"),
                  "suites.s.entries[0].axes.tokens: sizes must be positive, got 0"),
    "negative_size": (suites_with("- component: rmsnorm\n  points: [{tokens: 4, dim: -8}]\n"),
                      "suites.s.entries[0].points[0].dim: sizes must be positive, got -8"),
    "no_entries": ("suites:\n  s:\n    entries: []\n", "suites.s.entries: Value error, a suite needs at least one entry"),
    "both_axes_and_points": (suites_with("- component: rmsnorm\n  axes: {tokens: 4, dim: 4}\n  points: [{tokens: 4, dim: 4}]\n"),
                             "give exactly one of 'axes'"),
    "not_a_mapping": ("- just\n- a list\n", "expected a mapping with a top-level key 'suites'"),
    "suites_a_list": ("suites: [quick]\n", "suites: expected a mapping of suite names to suites, got list"),
    "suite_a_list": ("suites:\n  s:\n" + textwrap.indent(GOOD_ENTRY, "  "),
                     "suites.s: expected a suite: a mapping of description (optional) and entries (a list of sweeps), "
                     "got list"),
    "entry_a_name": (suites_with("- rmsnorm\n"), "suites.s.entries[0]: expected an entry: a mapping of component, "
                                                  "impls, axes or points, dtypes and modes, got str"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_suites_file_exits_2_naming_the_key(tmp_path, name):
    body, expected = CASES[name]
    path = write(tmp_path, body)
    result = CliRunner().invoke(main, ["run", "s", "--suites", str(path), "--device", "cpu", "--no-report"])
    assert result.exit_code == 2, result.output
    assert str(path) in result.output
    assert expected in result.output, result.output
    assert "Traceback" not in result.output


def test_unknown_suite_name_suggests(tmp_path):
    path = write(tmp_path, "suites:\n  quick:\n    entries:\n" + GOOD_ENTRY)
    result = CliRunner().invoke(main, ["run", "quik", "--suites", str(path), "--no-report"])
    assert result.exit_code == 2
    assert "no suite named 'quik' (did you mean 'quick'?)" in result.output


def test_missing_suites_file(tmp_path):
    """Named as given: brackets in a path are no markup (rich once printed `a[old]/s.yaml` as `a/s.yaml`)."""
    path = tmp_path / "a[old]" / "s[bold].yaml"
    result = CliRunner().invoke(main, ["run", "--suites", str(path)])
    assert result.exit_code == 2 and f"suites file {path} not found" in result.output, result.output


def test_bad_cli_arguments_exit_2():
    runner = CliRunner()
    assert runner.invoke(main, ["run", "--point-timeout", "-1"]).exit_code == 2
    assert runner.invoke(main, ["run", "--device", "tpu"]).exit_code == 2
    res = runner.invoke(main, ["run", "--impl", "nosuch"])
    assert res.exit_code == 2 and "no component of suite(s) quick has that implementation" in res.output
    res = runner.invoke(main, ["report", "r.jsonl", "--across-devices"])
    assert res.exit_code == 2 and "--across-devices compares against a --baseline; none was given" in res.output


def test_an_out_path_that_cannot_be_written_exits_2_before_any_work(tmp_path):
    """Its parent is a file (no permission bits to lean on: tests may run as root). Once a traceback from the
    results writer, after the workers had started."""
    path = write(tmp_path, "suites:\n  s:\n    entries:\n" + GOOD_ENTRY)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = blocker / "r.jsonl"
    result = CliRunner().invoke(main, ["run", "s", "--suites", str(path), "--device", "cpu", "--out", str(out),
                                       "--no-report"])
    assert result.exit_code == 2, result.output
    assert f"error: {blocker} is a file where a directory is needed" in result.output
    assert "Traceback" not in result.output and "running" not in result.output


def test_paths_the_system_refuses_exit_2_naming_them(tmp_path, monkeypatch):
    """A report, export, trace or calibration cache whose directory would sit under a file: one line naming the
    path, no traceback; `bench trace` and `bench calibrate` find out before they profile or measure anything."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rows = tmp_path / "r.jsonl"
    rows.write_text('{"component": "rmsnorm", "impl": "eager", "mode": "fwd", "point": {"tokens": 1}, '
                    '"dtype": "fp32", "device": "cpu:x", "status": "ok", "samples_ms": [1.0], "median_ms": 1.0}\n')
    for args in (["report", str(rows), "-o", str(blocker / "report")],
                 ["export", str(rows), "-o", str(blocker / "sub" / "x.json")],
                 ["trace", "--component", "rmsnorm", "--impl", "eager", "--point", "tokens=8,dim=16", "--dtype",
                  "fp32", "--device", "cpu", "--out", str(blocker / "traces")]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and str(blocker) in result.output, result.output
        assert "trace:" not in result.output  # refused before profiling, not after
    monkeypatch.setenv("BENCH_CACHE_DIR", str(blocker / "cache"))
    result = CliRunner().invoke(main, ["calibrate", "--device", "cpu", "--quick"])
    assert result.exit_code == 2, result.output
    assert f"error: {blocker / 'cache'}: Not a directory" in result.output
    assert "bandwidth" not in result.output  # nothing measured


def test_axes_expand_to_cartesian_product(tmp_path):
    path = write(tmp_path, "suites:\n  s:\n    entries:\n" + GOOD_ENTRY)
    s = suite.load(path)["s"]
    assert suite.expand(s.entries[0]) == [{"tokens": 4, "dim": 16}, {"tokens": 8, "dim": 16}]


def test_repository_suites_file_is_valid():
    suites = suite.load("suites.yaml")
    assert "quick" in suites


def test_list_costs_names_a_wrong_suite_instead_of_an_empty_table(tmp_path):
    path = write(tmp_path, "suites:\n  s:\n    entries:\n" + GOOD_ENTRY)
    args = ["list", "--costs", "rmsnorm", "--device", "cpu", "--suites", str(path)]
    unknown = CliRunner().invoke(main, [*args, "--suite", "x"])
    assert unknown.exit_code == 2 and "no suite named 'x'" in unknown.output, unknown.output
    other = CliRunner().invoke(main, ["list", "--costs", "matmul", "--device", "cpu", "--suites", str(path)])
    assert other.exit_code == 2 and "no suite has matmul points" in other.output, other.output
    elsewhere = CliRunner().invoke(main, [*args[:2], "matmul", *args[3:], "--suite", "s"])
    assert elsewhere.exit_code == 2, elsewhere.output
    assert "suite 's' has no matmul points; suites with matmul: none" in elsewhere.output, elsewhere.output
    ok = CliRunner().invoke(main, [*args, "--suite", "s"])
    assert ok.exit_code == 0 and "tokens=8,dim=16" in ok.output, ok.output


@pytest.mark.parametrize("spec, expected", [
    ("rmsnorm:eager", "expected COMPONENT:IMPL:MODE:DTYPE:k=v,k=v"),
    ("rmsnrom:eager:fwd:bf16:tokens=4,dim=8", "unknown component 'rmsnrom' (did you mean 'rmsnorm'?)"),
    ("rmsnorm:eagr:fwd:bf16:tokens=4,dim=8", "rmsnorm has no implementation 'eagr' (did you mean 'eager'?)"),
    ("rmsnorm:eager:step:bf16:tokens=4,dim=8", "rmsnorm has no mode 'step'"),
    ("rmsnorm:eager:fwd:fp8:tokens=4,dim=8", "rmsnorm does not take dtype 'fp8' (did you mean 'fp32'?)"),
    ("rmsnorm:eager:fwd:bf16:tokens=4", "--case 'rmsnorm:eager:fwd:bf16:tokens=4': dim: missing"),
    ("collectives:torch:fwd:bf16:op=all_reduce,mb=1,world_size=1", "collectives runs a process a rank"),
    # a choice axis and a flag parse as in a suite (int() of every value once refused causal=true)
    ("attention:sdpa:fwd:bf16:batch=1,heads=2,seq=64,head_dim=32,causal=true",
     "compares two GPU timers, but torch sees no CUDA GPU here"),
])
def test_crosscheck_checks_each_case_before_asking_for_a_gpu(spec, expected, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # on a GPU box too: nothing is timed here
    result = CliRunner().invoke(main, ["crosscheck", "--case", spec])
    assert result.exit_code == 2 and expected in result.output, result.output
    assert "Traceback" not in result.output
