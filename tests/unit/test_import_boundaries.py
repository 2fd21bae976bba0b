"""Import boundaries, measured: a module that does not itself import a framework loads none;
and the layers: the stages import nothing from the layers above them, nor the engine from QA.

Frameworks: torch, confluent_kafka, faust, aiokafka, minio. A module whose own top-level
imports name one of them (an adapter, a runner, the engine) may load what it needs. Every
other module of ``pipeline`` must load none: they are imported one after another in one
fresh interpreter, recording after each import which frameworks ``sys.modules`` holds
(imports only add modules, so a framework loaded by any of them shows up against the
first that loads it). On a failure each offender is imported alone again, to name it
without doubt. The table is printed (``pytest -s``).

Layers, read from the source (imports at top level, inside a function or under TYPE_CHECKING):
no module under ``pipeline/stages`` imports from the runners (``run``), the adapters, the
operator's commands (``ops``) or the command line (``cli``): a stage is used by all of them,
so what it needs lives beside it or below it. ``pipeline/asr`` imports nothing from
``pipeline/qa``, and ``pipeline/numbers`` (the number knowledge both share) neither of them. The
runners (``run``), the adapters and ``pipeline/runtime`` (what running stages need: health,
endpoint, backlog) import neither ``ops`` nor ``cli``; the adapters and runtime not ``run`` either,
and runtime not the adapters.
"""

from __future__ import annotations

import ast
import graphlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

FRAMEWORKS = ("torch", "confluent_kafka", "faust", "aiokafka", "minio")
ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import importlib, json, sys, time
rows = []
for name in sys.argv[1:]:
    started = time.perf_counter()
    importlib.import_module(name)
    rows.append([name, round(time.perf_counter() - started, 3), [m for m in FRAMEWORKS if m in sys.modules]])
print(json.dumps(rows))
""".replace("FRAMEWORKS", repr(FRAMEWORKS))


def modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages([str(ROOT / "pipeline")], "pipeline.")]
    return sorted(n for n in names if not n.rsplit(".", 1)[-1].startswith("__"))


def source_of(name: str) -> Path:
    path = ROOT / Path(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def own_frameworks(name: str) -> set[str]:
    """Frameworks named by the module's top-level imports (not those inside functions or TYPE_CHECKING)."""
    tree = ast.parse(source_of(name).read_text())
    named = set()
    for node in tree.body:
        body = node.body + node.handlers if isinstance(node, ast.Try) else [node]  # type: ignore[operator]
        for stmt in body:
            if isinstance(stmt, ast.Import):
                named |= {a.name.split(".")[0] for a in stmt.names}
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                named.add(stmt.module.split(".")[0])
    return named & set(FRAMEWORKS)


def probe(names: list[str]) -> list[tuple[str, float, list[str]]]:
    """Import ``names`` in order in one fresh interpreter: (module, seconds, frameworks loaded so far)."""
    out = subprocess.run([sys.executable, "-c", PROBE, *names], cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise AssertionError(f"importing {names} failed:\n{out.stderr[-2000:]}")
    return [(name, seconds, loaded) for name, seconds, loaded in json.loads(out.stdout.strip().splitlines()[-1])]


def test_no_module_loads_a_framework_it_does_not_import_itself() -> None:
    names = modules()
    own = {name: own_frameworks(name) for name in names}
    pure = [n for n in names if not own[n]]
    measured = {name: (seconds, loaded) for name, seconds, loaded in probe(pure)}
    leaks = [name for name in pure if measured[name][1]]
    if leaks:  # name each offender for sure: alone in a fresh interpreter
        leaks = [f"{name} loads {probe([name])[0][2]}" for name in leaks if probe([name])[0][2]]
    print(f"\n{'module':<34} {'own framework imports':<24} {'loads (measured)':<18} import s (incremental)")
    for name in names:
        if own[name]:
            print(f"{name:<34} {','.join(sorted(own[name])):<24} {'(adapter/runner)':<18}")
        else:
            seconds, loaded = measured[name]
            print(f"{name:<34} {'-':<24} {','.join(loaded) or 'none':<18} {seconds:6.2f}")
    print(f"{len(pure)} modules import no framework and load none; {len(names) - len(pure)} import one themselves")
    assert not leaks, leaks


# (package, the packages it may not import): each layer is used by those above it, so what it
# needs lives beside it or below it
MAY_NOT_IMPORT = {
    "pipeline/stages": ("pipeline.ops", "pipeline.run", "pipeline.adapters", "pipeline.cli"),
    # the engine shares the number knowledge with QA below both: importing pipeline.qa would load
    # the QA engine and its report (pipeline/qa/__init__.py) into every ASR worker
    "pipeline/asr": ("pipeline.qa",),
    "pipeline/numbers": ("pipeline.asr", "pipeline.qa"),
    # what a running stage needs (health, endpoint, backlog, replay watch) is below the runners;
    # the operator's commands (ops) and the command line are above everything that runs a stage
    "pipeline/runtime": ("pipeline.ops", "pipeline.run", "pipeline.adapters", "pipeline.cli"),
    "pipeline/adapters": ("pipeline.ops", "pipeline.run", "pipeline.cli"),
    "pipeline/run": ("pipeline.ops", "pipeline.cli"),
    # ops/cli.py registers the replay commands: the replay commands take what they share from
    # ops/cli_common.py, not from ops/cli.py (no circle)
    "pipeline/ops/replay_cli.py": ("pipeline.ops.cli",),
}


def crosses(module: str, layers: tuple[str, ...]) -> bool:
    return any(module == layer or module.startswith(layer + ".") for layer in layers)


def imported_modules(path: Path, layers: tuple[str, ...], root: Path = ROOT) -> set[str]:
    """Every module an ``import`` statement anywhere in the file names (relative ones resolved)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    named = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            named |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            named.add(module)
            if not crosses(module, layers):  # `from pipeline import ops`: a name may be a module
                named |= {f"{module}.{a.name}" for a in node.names}
    return named


def sources_of(package: str, root: Path = ROOT) -> list[Path]:
    path = root / package
    return [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


def crossings(package: str, root: Path = ROOT) -> list[str]:
    layers = MAY_NOT_IMPORT[package]
    sources = sources_of(package, root)
    return [
        f"{path.relative_to(root)} imports {module}"
        for path in sources
        for module in sorted(imported_modules(path, layers, root))
        if crosses(module, layers)
    ]


@pytest.mark.parametrize("package", sorted(MAY_NOT_IMPORT))
def test_no_package_imports_a_layer_it_may_not(package: str) -> None:
    assert len(sources_of(package)) > (0 if package.endswith(".py") else 5)  # the scan reads the package
    assert not crossings(package)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ``pipeline`` it imports anywhere (inside functions and under
    TYPE_CHECKING too: a lazy import only hides a circle until the function runs). A package's name
    stands for its ``__init__``; ``from pkg import submodule`` in a module of ``pkg`` is an edge to the
    submodule only (Python has begun the package's ``__init__`` before any of its modules runs)."""
    paths = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted((root / "pipeline").rglob("*.py"))
    }
    graph = {}
    for name, path in paths.items():
        named = imported_modules(path, (), root)

        def only_submodules(package: str) -> bool:
            below = [n for n in named if n.startswith(package + ".") and n.count(".") == package.count(".") + 1]
            return bool(below) and all(n in paths for n in below)

        graph[name] = {
            m for m in named if m in paths and m != name and not (name.startswith(m + ".") and only_submodules(m))
        }
    return graph


def test_no_import_circles() -> None:
    graph = import_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the scan reads the tree
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_the_circle_check_sees_a_lazy_circle(tmp_path: Path) -> None:
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "a.py").write_text("from pipeline.b import f\n")
    (tmp_path / "pipeline" / "b.py").write_text("def f() -> None:\n    from pipeline import a\n")
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter(import_graph(tmp_path)).static_order())


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("import pipeline.qa.engine", "pipeline.qa.engine"),
        ("from pipeline.qa import engine", "pipeline.qa"),
        ("from ..qa.model import CallText", "pipeline.qa.model"),
        ("from pipeline import qa", "pipeline.qa"),
    ],
)
def test_the_scan_sees_every_spelling_of_a_crossing(tmp_path: Path, line: str, named: str) -> None:
    """An import inside a function, in any spelling, is a crossing (so the test above can fail)."""
    (tmp_path / "pipeline" / "asr").mkdir(parents=True)
    (tmp_path / "pipeline" / "asr" / "probe.py").write_text(f"def later() -> None:\n    {line}\n")
    assert named in {c.split(" imports ")[1] for c in crossings("pipeline/asr", tmp_path)}
