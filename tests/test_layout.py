"""Layout rules: kernels/ imports only torch and triton; reports/ never imports torch."""
import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_kernels_import_only_torch_and_triton():
    allowed = {"torch", "triton", "__future__", "os", "math", "functools", "kernels"}  # kernels: its own helpers
    for f in (ROOT / "kernels").glob("*.py"):
        bad = imports(f) - allowed
        assert not bad, f"{f.name} imports {bad}"


def test_reports_never_import_torch():
    for f in (ROOT / "reports").glob("*.py"):
        found = imports(f) & {"torch", "triton", "impls", "kernels"}
        assert not found, f"{f.name} imports {found}"
