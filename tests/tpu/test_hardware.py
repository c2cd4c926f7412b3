"""TPU detection: fake device files in a temporary directory, a fake TPU initialisation."""

import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from tpu import hardware

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _device_root(tmp_path, *names):
  for name in names:
    path = tmp_path / "dev" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
  return str(tmp_path)


def test_device_files_of_v4_and_v5e_v6e_hosts(tmp_path):
  assert hardware.tpu_device_files(_device_root(tmp_path / "none", "null", "vfio/vfio")) == []
  v4 = _device_root(tmp_path / "v4", *(f"accel{index}" for index in range(4)))
  assert [path[len(v4):] for path in hardware.tpu_device_files(v4)] == [f"/dev/accel{i}" for i in range(4)]
  # v5e/v6e: one numbered file per chip beside the vfio control file, which is not a chip.
  v5e = _device_root(tmp_path / "v5e", "vfio/vfio", "vfio/0")
  assert hardware.tpu_device_files(v5e) == [str(tmp_path / "v5e" / "dev" / "vfio" / "0")]


def test_no_tpu_hardware_falls_back_to_the_cpu_without_connecting(tmp_path):
  def connect(tpu):
    raise AssertionError("connect must not be called without TPU hardware")

  strategy = hardware.select_strategy(device_root=_device_root(tmp_path, "null"), connect=connect)
  assert strategy is tf.distribute.get_strategy()
  assert not isinstance(strategy, tf.distribute.TPUStrategy)


def test_tpu_hardware_connects_and_returns_its_strategy(tmp_path):
  calls = []
  sentinel = object()

  def connect(tpu):
    calls.append(tpu)
    return sentinel

  assert hardware.select_strategy(device_root=_device_root(tmp_path, "accel0"), connect=connect) is sentinel
  assert calls == ["local"]


@pytest.mark.parametrize("chip", ["accel0", "vfio/0"])
def test_tpu_hardware_that_does_not_initialise_fails_loudly(tmp_path, chip):
  root = _device_root(tmp_path, chip, "vfio/vfio")
  failure = RuntimeError("could not reach the TPU 'local': TPU initialization failed: open(/dev/vfio/0): "
                         "Device or resource busy")

  def connect(tpu):
    raise failure

  with pytest.raises(hardware.TPUUnavailableError) as raised:
    hardware.select_strategy(device_root=root, connect=connect)
  message = str(raised.value)
  assert raised.value.__cause__ is failure
  assert f"1 TPU device file(s) ({tmp_path / 'dev' / chip})" in message
  assert str(failure) in message                       # the whole error, not its first clause
  assert "Devices TensorFlow sees: CPU:0" in message
  assert "tensorflow-tpu " in message and "libtpu " in message
  assert "What to do:" in message and "requirements-tpu.txt" in message


def test_advice_depends_on_whether_the_tpu_build_is_installed():
  plain = hardware.unavailable_message(["/dev/accel0"], "boom", ["CPU:0"],
                                       {"tensorflow-tpu": None, "tensorflow": "2.20.0", "libtpu": None})
  assert "tensorflow-tpu not installed" in plain and "TPU build is not installed" in plain
  tpu_build = hardware.unavailable_message(["/dev/accel0"], "boom", ["CPU:0"],
                                           {"tensorflow-tpu": "2.20.0", "libtpu": "0.0.14"})
  assert "one process at a time" in tpu_build and "TPU build is not installed" not in tpu_build


def test_installed_versions_reports_missing_distributions():
  versions = hardware.installed_versions(("tf-keras", "surely-not-installed-zoo-dist"))
  assert versions["tf-keras"].startswith("2.20")
  assert versions["surely-not-installed-zoo-dist"] is None


@pytest.mark.slow
def test_plain_tensorflow_on_tpu_hardware_raises_with_tensorflows_own_error(tmp_path):
  """The real connection path (`tpu.strategy.get_strategy`) on fake TPU device files, in a fresh
  process: this TensorFlow has no TPU kernels, as on a TPU host where the plain build was installed."""
  root = _device_root(tmp_path, "accel0")
  script = textwrap.dedent(f"""
      from tpu import hardware
      try:
        hardware.select_strategy(device_root={root!r})
      except hardware.TPUUnavailableError as error:
        print(error)
      else:
        raise SystemExit("no error")
  """)
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
  assert result.returncode == 0, result.stdout + result.stderr
  message = result.stdout
  assert "could not reach the TPU 'local'" in message     # tpu.strategy's error, kept whole
  assert "ConfigureDistributedTPU" in message             # ...down to TensorFlow's own
  assert "Devices TensorFlow sees: CPU:0" in message
  assert "tensorflow-tpu not installed" in message and "requirements-tpu.txt" in message


def test_device_files_are_found_without_tensorflow(tmp_path):
  """An install step asks before TensorFlow is installed: the module needs only the standard library."""
  root = _device_root(tmp_path, "vfio/0")
  script = ("import sys; sys.modules['tensorflow'] = None\n"   # importing tensorflow now raises
            f"from tpu import hardware; print(hardware.tpu_device_files({root!r}))")
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=60, check=False)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == repr([str(tmp_path / "dev" / "vfio" / "0")])
