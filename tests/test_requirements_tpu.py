"""requirements-tpu.txt: what pip resolves it to, and the `tensorflow` alias it installs.

The slow test asks pip for the resolution (`pip install --dry-run --report`, nothing is
installed) and needs the package index: an unreachable index fails it, with a message.
"""

import json
import os
import platform
import re
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPU_REQUIREMENTS = os.path.join(ROOT, "requirements-tpu.txt")
ALIAS_DIR = os.path.join(ROOT, "tpu", "tensorflow-tpu-alias")
# The project's target (pyproject.toml, README): CPython 3.11 on Linux x86_64, as on Colab and TPU VMs.
TARGET = ("CPython", "3.11", "Linux", "x86_64")
INDEX_URL = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")


def _requirements(path):
  """{canonical name: Requirement} of a requirements file's own lines (no -r, options or paths)."""
  requirements = {}
  with open(path) as file:
    for line in file:
      line = line.split("#", 1)[0].strip()
      if line and not line.startswith(("-", ".", "/")):
        requirement = Requirement(line)
        requirements[canonicalize_name(requirement.name)] = requirement
  return requirements


def _pinned_version(requirement):
  (specifier,) = requirement.specifier
  assert specifier.operator == "==" and "*" not in specifier.version, f"{requirement} is not an exact pin"
  return specifier.version


def test_tpu_build_and_libtpu_are_pinned_exactly_and_the_alias_matches():
  own = _requirements(TPU_REQUIREMENTS)
  tensorflow_tpu = _pinned_version(own["tensorflow-tpu"])
  _pinned_version(own["libtpu"])
  assert "tensorflow" not in own, "a plain `tensorflow` line would install the wheel without TPU support"
  with open(TPU_REQUIREMENTS) as file:
    lines = [line.strip() for line in file]
  assert "-r requirements.txt" in lines and "./tpu/tensorflow-tpu-alias" in lines
  with open(os.path.join(ALIAS_DIR, "pyproject.toml"), "rb") as file:
    project = tomllib.load(file)["project"]
  assert project["name"] == "tensorflow" and project["version"] == tensorflow_tpu
  assert project["dependencies"] == [f"tensorflow-tpu=={tensorflow_tpu}"]
  # requirements.txt's `tensorflow` line must accept the alias's version.
  base = _requirements(os.path.join(ROOT, "requirements.txt"))
  assert base["tensorflow"].specifier.contains(tensorflow_tpu)


def _index_reachable():
  try:
    with urllib.request.urlopen(f"{INDEX_URL.rstrip('/')}/tensorflow-tpu/", timeout=60) as response:
      return response.status == 200, f"HTTP {response.status}"
  except (urllib.error.URLError, OSError) as error:
    return False, str(error)


def _pip(command):
  return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
                        env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))


@pytest.fixture(scope="module")
def resolution(tmp_path_factory):
  """pip's report of `pip install -r requirements-tpu.txt` into an empty environment:
  {canonical name: report entry}."""
  here = (platform.python_implementation(), ".".join(platform.python_version_tuple()[:2]), platform.system(),
          platform.machine())
  if here != TARGET:
    # Resolving for another interpreter needs --only-binary=:all:, and two of Model Garden's
    # dependencies (seqeval, promise) publish source distributions only.
    pytest.fail(f"the TPU stack is resolved for {TARGET}, and this interpreter is {here}: run this test "
                "with Python 3.11 on Linux x86_64", pytrace=False)
  reachable, reason = _index_reachable()
  if not reachable:
    pytest.fail(f"the package index {INDEX_URL} is unreachable ({reason}); this test asks it how "
                "requirements-tpu.txt resolves and needs network access", pytrace=False)
  report = tmp_path_factory.mktemp("pip") / "report.json"
  command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
             "--report", str(report), "-r", "requirements-tpu.txt"]
  # libtpu's and tensorflow-tpu's wheels come without separate metadata files on the index, so a
  # plain dry run downloads them whole (about 1.2 GB of temporary files). fast-deps reads each
  # wheel's metadata with HTTP range requests instead (a few MB) and resolves the same set.
  result = _pip(command[:4] + ["--use-feature=fast-deps"] + command[4:])
  if result.returncode and "fast-deps" in result.stderr and "invalid choice" in result.stderr:
    result = _pip(command)  # a pip that no longer has the feature
  if result.returncode:
    pytest.fail(f"{' '.join(result.args)} failed (exit {result.returncode}):\n{result.stderr[-4000:]}",
                pytrace=False)
  with open(report) as file:
    install = json.load(file)["install"]
  return {canonicalize_name(entry["metadata"]["name"]): entry for entry in install}


def _requires(entry, name):
  """The requirement on `name` among an entry's unconditional dependencies."""
  for line in entry["metadata"].get("requires_dist", []):
    requirement = Requirement(line)
    if canonicalize_name(requirement.name) == name and not requirement.marker:
      return requirement
  raise AssertionError(f"{entry['metadata']['name']} does not require {name}")


@pytest.mark.slow
def test_resolution_has_the_tpu_build_with_its_libtpu_and_no_plain_tensorflow(resolution):
  own = _requirements(TPU_REQUIREMENTS)
  tensorflow_tpu, libtpu = _pinned_version(own["tensorflow-tpu"]), _pinned_version(own["libtpu"])

  assert resolution["tensorflow-tpu"]["metadata"]["version"] == tensorflow_tpu
  assert resolution["libtpu"]["metadata"]["version"] == libtpu
  # The libtpu pin satisfies what tensorflow-tpu's own metadata asks for.
  assert _requires(resolution["tensorflow-tpu"], "libtpu").specifier.contains(libtpu)

  # The one `tensorflow` is the alias of the same version, built from the repository: no plain wheel.
  tensorflow = resolution["tensorflow"]
  assert tensorflow["metadata"]["version"] == tensorflow_tpu
  url = tensorflow["download_info"]["url"]
  assert url.startswith("file://") and url.rstrip("/").endswith("tpu/tensorflow-tpu-alias"), url
  assert [str(Requirement(line)) for line in tensorflow["metadata"]["requires_dist"]] == [
      f"tensorflow-tpu=={tensorflow_tpu}"]
  other_builds = sorted(name for name in resolution
                        if re.fullmatch(r"tensorflow-(cpu|intel|macos|gpu)|tf-nightly.*", name))
  assert not other_builds, f"other TensorFlow builds in the resolution: {other_builds}"


@pytest.mark.slow
def test_resolution_keeps_the_versions_of_requirements_txt(resolution):
  base = _requirements(os.path.join(ROOT, "requirements.txt"))
  for name in ("tf-keras", "tensorflow-text", "tf-models-official", "tensorflow-datasets"):
    version = resolution[name]["metadata"]["version"]
    assert base[name].specifier.contains(version), f"{name} {version}, requirements.txt: {base[name]}"
  # What makes them need `tensorflow` is met by the alias's version.
  for name in ("tf-keras", "tensorflow-text", "tf-models-official"):
    assert _requires(resolution[name], "tensorflow").specifier.contains(
        resolution["tensorflow"]["metadata"]["version"])
