"""TPU detection and the diagnostics of a TPU that does not open: fake device files in a temporary
directory, no TensorFlow. `tests/tpu/test_strategy.py` tests `get_strategy`, which raises with them."""

import os
import subprocess
import sys

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


def test_message_holds_everything_and_its_advice_depends_on_the_case():
  error = RuntimeError("TPU initialization failed:\nDevice or resource busy")
  plain = hardware.unavailable_message("local", error, ["/dev/accel0", "/dev/accel1"], ["CPU:0"],
                                       {"tensorflow-tpu": None, "tensorflow": "2.20.0", "libtpu": None})
  assert plain.splitlines() == [
      "could not reach the TPU 'local' (tried TPUClusterResolver(tpu='local') and initialize_tpu_system).",
      "Error: TPU initialization failed:", "Device or resource busy",
      "TPU device files on this machine: 2 (/dev/accel0, /dev/accel1).",
      "Devices TensorFlow sees: CPU:0.",
      "Installed: tensorflow-tpu not installed, tensorflow 2.20.0, libtpu not installed.",
      plain.splitlines()[-1]]
  assert plain.splitlines()[-1].startswith("What to do: TensorFlow's TPU build is not installed")
  assert "requirements-tpu.txt" in plain

  tpu_build = hardware.unavailable_message("local", "boom", ["/dev/vfio/0"], [],
                                           {"tensorflow-tpu": "2.20.0", "libtpu": "0.0.14"})
  assert "Devices TensorFlow sees: none." in tpu_build
  assert "one process at a time" in tpu_build and "TPU build is not installed" not in tpu_build

  no_chips = hardware.unavailable_message("local", "boom", [], ["CPU:0"], {"tensorflow-tpu": None})
  assert "TPU device files on this machine: none." in no_chips
  assert "What to do: this machine has no TPU chips" in no_chips and "leave --tpu unset" in no_chips

  address = "grpc://10.0.0.2:8470"
  named = hardware.unavailable_message(address, "boom", [], ["CPU:0"], {"tensorflow-tpu": None})
  assert named.startswith(f"could not reach the TPU '{address}'")
  assert f"What to do: check that the TPU '{address}' exists" in named


def test_installed_versions_reports_missing_distributions():
  versions = hardware.installed_versions(("tf-keras", "surely-not-installed-zoo-dist"))
  assert versions["tf-keras"].startswith("2.20")
  assert versions["surely-not-installed-zoo-dist"] is None


def test_device_files_are_found_without_tensorflow(tmp_path):
  """An install step asks before TensorFlow is installed: the module, diagnostics included, needs only the
  standard library."""
  root = _device_root(tmp_path, "vfio/0")
  script = ("import sys; sys.modules['tensorflow'] = None\n"   # importing tensorflow now raises
            f"from tpu import hardware; print(hardware.tpu_device_files({root!r}))\n"
            "print(hardware.unavailable_message('local', 'boom', [], [], hardware.installed_versions()))")
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=60, check=False)
  assert result.returncode == 0, result.stderr
  files, *message = result.stdout.splitlines()
  assert files == repr([str(tmp_path / "dev" / "vfio" / "0")])
  assert message[0].startswith("could not reach the TPU 'local'") and message[-1].startswith("What to do:")
