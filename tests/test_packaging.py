"""The zoo installs like any Python package: `pip install .` gives zoo, tpu and export, their data
files and the zoo-* commands, importable from any folder without the checkout."""

import configparser
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
  """`(target folder, wheel)`: the project's wheel, built from the checkout as pip builds it, installed
  (without its dependencies, which this environment has) into a folder of its own."""
  # The files git tracks, as a clone has them (setuptools writes build/ and *.egg-info into the source).
  source = tmp_path_factory.mktemp("source")
  tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
  for name in filter(None, tracked.decode().split("\0")):
    if not (ROOT / name).is_file():   # deleted in the working tree, not yet in git
      continue
    (source / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / name, source / name)
  build = tmp_path_factory.mktemp("wheel")
  subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                  "--wheel-dir", str(build), str(source)], check=True, cwd=build, timeout=300)
  (wheel,) = build.glob("*.whl")
  target = tmp_path_factory.mktemp("site")
  subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                  str(target), str(wheel)], check=True, timeout=300)
  return target, wheel


def _run_elsewhere(code, target, cwd):
  """`code` in a new interpreter in `cwd`, with the installed folder as its only project path."""
  env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
  env["PYTHONPATH"] = str(target)
  return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=300)


def test_the_wheel_holds_every_module_and_the_demo_config(installed):
  _, wheel = installed
  names = set(zipfile.ZipFile(wheel).namelist())
  tracked = subprocess.run(["git", "ls-files", "zoo", "tpu", "export"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
  modules = {name for name in tracked if name.endswith(".py") and "tensorflow-tpu-alias" not in name}
  assert len(modules) > 100 and sorted(modules - names) == []
  assert "tpu/configs/demo.json" in names
  assert not any(name.startswith(("tests/", "benchmarks/", "notebooks/")) for name in names)


def test_the_packages_and_commands_import_from_another_folder(installed, tmp_path):
  target, wheel = installed
  with zipfile.ZipFile(wheel) as archive:
    (entry_points,) = [name for name in archive.namelist() if name.endswith("entry_points.txt")]
    scripts = configparser.ConfigParser()
    scripts.read_string(archive.read(entry_points).decode())
  commands = dict(scripts["console_scripts"])
  declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
  assert commands == declared and {"zoo-train", "zoo-convert", "zoo-export", "zoo-predict"} <= set(commands)
  code = "\n".join([
      "import importlib, pathlib, sys",
      "import zoo, tpu, export",
      f"assert all(pathlib.Path(m.__file__).is_relative_to({str(target)!r}) for m in (zoo, tpu, export))",
      *[f"assert callable(getattr(importlib.import_module({value.split(':')[0]!r}), {value.split(':')[1]!r}))"
        for value in commands.values()],
      "print('ok')"])
  result = _run_elsewhere(code, target, tmp_path)
  assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_every_command_names_itself_in_its_usage_and_answers_help_without_tensorflow(tmp_path):
  """Each `zoo-*` command's usage names it as typed (`zoo-train ...`), `python -m MODULE` its module;
  `--help` imports no TensorFlow (it answers in well under a second)."""
  declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
  code = "\n".join([
      "import contextlib, importlib, io, json, sys",
      f"declared = {declared!r}",
      "usages = {}",
      "for command, target in declared.items():",
      "  module, function = target.split(':')",
      "  for program in (f'/venv/bin/{command}', f'/zoo/{module.replace(\".\", \"/\")}.py'):",
      "    sys.argv[0], out = program, io.StringIO()",
      "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):",
      "      getattr(importlib.import_module(module), function)(['--help'])",
      "    usages[program] = out.getvalue().split('\\n')[0]",
      "print(json.dumps(dict(usages=usages, tensorflow='tensorflow' in sys.modules)))"])
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  printed = json.loads(result.stdout)
  assert not printed["tensorflow"], "--help imported TensorFlow"
  for command, target in declared.items():
    module = target.split(":")[0].removesuffix(".__main__")
    assert printed["usages"][f"/venv/bin/{command}"].startswith(f"usage: {command} ")
    assert printed["usages"][f"/zoo/{target.split(':')[0].replace('.', '/')}.py"].startswith(
        f"usage: python -m {module} ")
  # The installed command itself, where this environment has it (`pip install -e .`, as `make` does).
  script = pathlib.Path(sys.executable).parent / "zoo-convert"
  if script.exists():
    result = subprocess.run([str(script), "hf-bert", "--help"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("usage: zoo-convert hf-bert "), result.stderr
    # Its errors are named after it too, and a missing path is one line within seconds (no TensorFlow).
    missing = str(tmp_path / "missing")
    result = subprocess.run([str(script), "hf-bert", missing, "--out", str(tmp_path / "out")], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"zoo-convert: error: {missing}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
