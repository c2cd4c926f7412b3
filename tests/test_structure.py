"""The project's structure: imports point one way, export/ knows no task, CLIs start without TensorFlow."""

import ast
import pathlib
import re
import subprocess
import sys

import pytest

from tpu import tasks

ROOT = pathlib.Path(__file__).resolve().parents[1]
# A package may import only the packages to its left: zoo <- tpu <- export.
LAYERS = ("zoo", "tpu", "export")
CLIS = ("tpu.train", "export.saved_model", "export.predict", "zoo.convert")


def imported_packages(path):
  """The top-level names a module imports anywhere (module level or inside functions), with line numbers."""
  tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name.split(".")[0], node.lineno
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      yield node.module.split(".")[0], node.lineno


def direction_violations(root=ROOT):
  violations = []
  for rank, package in enumerate(LAYERS):
    forbidden = set(LAYERS[rank + 1:])
    for path in sorted((root / package).rglob("*.py")):
      for name, line in imported_packages(path):
        if name in forbidden:
          violations.append(f"{path.relative_to(root)}:{line}: {package} imports {name}")
  return violations


def test_imports_point_one_way():
  modules = [path for package in LAYERS for path in (ROOT / package).rglob("*.py")]
  assert len(modules) > 30
  assert direction_violations() == []


def test_the_direction_check_catches_a_local_import(tmp_path):
  for package in LAYERS:
    (tmp_path / package).mkdir()
  (tmp_path / "tpu" / "job.py").write_text("def run():\n  from export import saved_model\n")
  (tmp_path / "zoo" / "layer.py").write_text("import tpu.train\nfrom zoo import models\n")
  assert direction_violations(tmp_path) == ["zoo/layer.py:1: zoo imports tpu",
                                            "tpu/job.py:2: tpu imports export"]


def test_export_holds_no_task_name():
  names = tasks.names()
  assert {"mlm", "classify"} <= set(names)
  pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
  hits = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
          for path in sorted((ROOT / "export").rglob("*.py"))
          for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
          if pattern.search(line)]
  assert hits == [], "export/ must ask the task, not name it"


HELP_PROBE = """
import contextlib, io, runpy, sys
sys.argv = [sys.argv[1], "--help"]
output = io.StringIO()
with contextlib.redirect_stdout(output):
  try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
  except SystemExit as exit:
    code = exit.code
print(code, "tensorflow" in sys.modules, len(output.getvalue()))
"""


@pytest.mark.parametrize("module", CLIS)
def test_help_imports_no_tensorflow(module):
  result = subprocess.run([sys.executable, "-c", HELP_PROBE, module], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
  code, tensorflow_loaded, help_length = result.stdout.split()
  assert (code, tensorflow_loaded) == ("0", "False"), result.stderr
  assert int(help_length) > 200
  assert result.stderr == ""   # no TensorFlow log lines either


def test_task_choices_come_from_the_registry(capsys):
  from tpu import train
  for name in tasks.names():
    assert train.parser().parse_args(["--task", name]).task == name
  with pytest.raises(SystemExit):
    train.parser().parse_args(["--task", "nothing"])
  assert "choose from " + ", ".join(f"'{name}'" for name in tasks.names()) in capsys.readouterr().err
