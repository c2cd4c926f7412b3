"""Session fixtures of the Keras 3 edition's tests: the tf_keras reference and one process per backend."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import shared_file
from tests.zoo.keras3 import twins

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BACKENDS = ("jax", "tensorflow", "torch")


def run_in_backend(backend, module, *args, timeout=900, cpu_devices=None):
  """Runs `python -m module args` with Keras on `backend` (and, under JAX, `cpu_devices` CPU devices);
  fails the test with its stderr."""
  env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
             PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
  if cpu_devices:
    env["XLA_FLAGS"] = " ".join(filter(None, [env.get("XLA_FLAGS"),
                                              f"--xla_force_host_platform_device_count={cpu_devices}"]))
  result = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
  if result.returncode:
    pytest.fail(f"{module} under {backend} failed:\n{result.stderr[-6000:]}", pytrace=False)
  return result


@pytest.fixture(scope="session")
def twin_reference(tmp_path_factory):
  """The tf_keras side of every case (weights by name, outputs), pickled once per run."""
  return shared_file(tmp_path_factory, "keras3_reference.pkl", twins.reference)


@pytest.fixture(scope="session")
def backend_report(twin_reference, tmp_path_factory):
  """`report(backend)`: the Keras 3 side under `backend`, run once per run and backend."""
  reports = {}

  def report(backend):
    if backend not in reports:
      def make(out):
        # Under JAX every eager operation compiles a program of its own: the layer cases run eagerly
        # under TensorFlow and PyTorch, and under JAX inside the encoders, which are compiled whole.
        run_in_backend(backend, "tests.zoo.keras3.twins", backend, twin_reference, out,
                       *(["--no-layer-cases"] if backend == "jax" else []))
      path = shared_file(tmp_path_factory, f"keras3_{backend}.json", make)
      with open(path) as file:
        reports[backend] = json.load(file)
    return reports[backend]
  return report
