"""The layers are a contract, checked: no module imports from a layer above its own, no import
cycle anywhere (import-linter, configured in pyproject.toml's [tool.importlinter]), and imports
stand at the top of each module, but for a few with a reason (an optional extra, a library that
must not load early)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "cardbench"
#: at most this many imports of cardbench modules inside functions (issue 30): each one a reason
MAX_LOCAL_CARDBENCH_IMPORTS = 10
LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))


def _lint(cwd: Path, src: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run([LINT, str(cwd / "pyproject.toml"), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_layer_contract_holds():
    r = _lint(ROOT, ROOT / "src")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 kept, 0 broken" in r.stdout


@pytest.mark.parametrize("module, line, broken", [
    # a bottom layer reaching up: units importing the CLI (a cycle too: the CLI imports units)
    ("units.py", "import cardbench.cli as _up\n", "layers"),
    # a cycle inside one layer: devices.sysfs importing devices.discovery (which imports sysfs)
    ("devices/sysfs.py", "from cardbench.devices import discovery as _cycle\n", "no import cycle"),
    # an upward import hidden in a function body counts too
    ("target.py", "def _hidden():\n    from cardbench import runner\n    return runner\n", "layers"),
])
def test_the_contract_catches_an_upward_import_and_a_cycle(tmp_path, module, line, broken):
    """The same check on a copy of the source with one bad import added fails, naming the
    contract that broke (a contract that cannot fail would prove nothing)."""
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "src" / "cardbench" / module, "a") as f:
        f.write("\n" + line)
    r = _lint(tmp_path, tmp_path / "src")
    assert r.returncode != 0, r.stdout[-2000:]
    broken_part = r.stdout.split("Broken contracts")[-1]
    assert broken in broken_part, broken_part


def _local_imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, module, has a reason) of every import inside a function of ``path`` (not under
    ``if TYPE_CHECKING``). The reason is a comment on the import's line, or on the line of the
    ``try:`` or of the comment just above it."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if isinstance(node, ast.ImportFrom) and node.level:
                module = "cardbench." + (module or "")
            near = lines[max(0, node.lineno - 4):node.lineno]
            reason = "#" in lines[node.lineno - 1] or any(
                ln.strip().startswith("#") or (ln.strip().startswith("try:") and "#" in ln) for ln in near[:-1])
            out.append((node.lineno, module or "", reason))
    return out


def test_imports_stand_at_the_top_but_for_a_few_with_a_reason():
    local, unexplained = [], []
    for path in sorted(SRC.rglob("*.py")):
        for line, module, reason in _local_imports(path):
            where = f"{path.relative_to(SRC.parent)}:{line} {module}"
            if module.startswith("cardbench"):
                local.append(where)
            if not reason:
                unexplained.append(where)
    assert not unexplained, "imports inside functions without a reason: " + ", ".join(unexplained)
    assert len(local) <= MAX_LOCAL_CARDBENCH_IMPORTS, local
