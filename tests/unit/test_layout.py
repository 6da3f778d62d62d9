"""The package's layout is the data flow, and stays so: each folder imports only the stages
upstream of it, no module imports one that imports it back, and the command line starts
without the heavy libraries. Checked from the source (``ast``), not by convention."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.tools import ROOT

PACKAGE = ROOT / "monitor"

# Stage -> the stages it may import (at module level or inside a function: a lazy import that
# closes a circle is still a circle; type-only imports under TYPE_CHECKING are not counted).
# Read upwards:
# model <- config <- rules <- store <- ingest, evaluate <- serve, record <- pipeline <- service.
ALLOWED: dict[str, set[str]] = {
    "monitor": set(),  # the package's __init__ (its version, importable by all)
    "model": set(),
    "logs": set(),
    "runtime": set(),
    "config": {"model"},
    "rules": {"model"},
    "store": {"config", "model", "rules"},
    "ingest": {"config", "logs", "model", "rules", "store"},
    "evaluate": {"config", "model", "rules", "store"},
    "record": {"config", "model", "store"},
    "serve": {"config", "evaluate", "ingest", "model", "rules", "store"},
    "pipeline": {"config", "evaluate", "ingest", "model", "record", "store"},
    "service": {"config", "evaluate", "ingest", "logs", "model", "record", "runtime", "serve",
                "store", "supervisor"},
    "dev": {"config", "ingest", "logs", "model", "runtime", "service"},
    # acting on what ingest made (failover plan|apply): a command, at the top like cli
    "failover": {"config", "ingest", "logs", "model", "rules", "serve"},
    "supervisor": set(),  # restarts the service's process; knows nothing of what it does
    # the top; serve: the HTTP front of ``run``, in the supervisor's process
    "cli": {"config", "failover", "logs", "pipeline", "service", "dev", "serve", "supervisor"},
    "__main__": {"cli"},
}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts).removesuffix(".__init__")] = path
    return out


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def runtime_imports(path: Path, name: str) -> set[str]:
    """``monitor`` modules ``path`` imports at run time, anywhere in it (relative imports
    resolved)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.startswith("monitor"):
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("monitor"))
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: runtime_imports(path, name) & set(mods) for name, path in mods.items()}


def stage(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_every_stage_imports_only_the_stages_upstream_of_it() -> None:
    wrong = []
    for name, deps in graph().items():
        here = stage(name)
        assert here in ALLOWED, f"{name}: a new stage; say what it may import in ALLOWED"
        wrong += [f"{name} imports {d}" for d in deps
                  if d != "monitor" and stage(d) != here and stage(d) not in ALLOWED[here]]
    assert not wrong, wrong


def test_no_module_imports_one_that_imports_it_back() -> None:
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            # A package importing its own modules (its re-exports) is not a circle.
            if len(component) > 1 and not all(c.startswith(min(component)) for c in component):
                cycles.append(sorted(component))

    for v in g:
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_every_folder_says_what_flows_in_and_out() -> None:
    bare = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("__init__.py")
            if ast.get_docstring(ast.parse(p.read_text())) is None and p.parent != PACKAGE]
    assert not bare, bare


@pytest.mark.parametrize("args", [["--help"], ["check-config", "--help"]])
def test_the_command_line_starts_without_the_heavy_libraries(args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "monitor", *args],
        capture_output=True, text=True, timeout=60, check=True,
    )
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "monitor" in imported  # the check reads what it thinks it reads
    heavy = imported & {"numpy", "confluent_kafka", "pyspark", "aiohttp", "pyarrow"}
    assert not heavy, heavy




# --------------------------------------------------------------------------- the tests' own


TESTS = ROOT / "tests"


def test_the_unit_tests_mirror_the_package() -> None:
    """A module's unit tests are where the module is: every folder of tests/unit/ is a folder
    of monitor/ (or the top-level dashboards/), and no test module lies loose in tests/."""
    packages = {p.relative_to(PACKAGE) for p in PACKAGE.rglob("*") if p.is_dir()
                and (p / "__init__.py").is_file()}
    unit = TESTS / "unit"
    folders = {p.relative_to(unit) for p in unit.rglob("*") if p.is_dir()
               and p.name != "__pycache__"}
    strays = sorted(str(f) for f in folders if f not in packages and f.parts[0] != "dashboards")
    assert not strays, f"tests/unit/ folders with no package of that name: {strays}"
    loose = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert not loose, f"test modules belong in tests/unit/ or tests/integration/: {loose}"


def test_tests_share_helpers_through_the_harness_only() -> None:
    """Helpers live in tests/harness/; a test module importing another test module would run
    or break with it."""
    wrong = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            wrong += [f"{path.relative_to(ROOT)} imports {n}" for n in names
                      if n.startswith(("tests.unit", "tests.integration", "tests.test_"))]
    assert not wrong, wrong
