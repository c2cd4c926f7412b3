"""Is there a TPU on this machine, and why can TensorFlow not open it? The standard library only.

TPU chips show up as device files: `/dev/accel0`, `/dev/accel1`, ... on TPU v2 to v4
hosts and `/dev/vfio/0`, `/dev/vfio/1`, ... (beside the `/dev/vfio/vfio` control file)
on v5e, v5p and v6e hosts, Colab TPU runtimes included. This module imports no
TensorFlow, so an install step (the notebooks' first cell) can ask `tpu_device_files`
which stack to install before TensorFlow is installed.

The strategy itself comes from `tpu.strategy.get_strategy`, the one entry point: with
`tpu="auto"` it connects to this machine's chips where `tpu_device_files` finds some,
and a TPU it cannot open raises `TPUUnavailableError` with `unavailable_message`'s text.
"""

import glob
import importlib.metadata
import os
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any

# Under the device root: one file per TPU chip.
TPU_DEVICE_PATTERNS = ("dev/accel[0-9]*", "dev/vfio/[0-9]*")
# The distributions whose versions the error message reports.
STACK_DISTRIBUTIONS = ("tensorflow-tpu", "tensorflow", "libtpu", "tensorflow-cpu")


class TPUUnavailableError(RuntimeError):
  """A TPU was asked for (or found by `tpu="auto"`) and TensorFlow could not open it."""


def tpu_device_files(root: str = "/") -> list[str]:
  """The TPU chips' device files under `root` (sorted); empty on a machine without TPUs.

  `root` is `/` but for tests, which point it at a directory of fake device files.
  """
  files = []
  for pattern in TPU_DEVICE_PATTERNS:
    files.extend(glob.glob(os.path.join(root, pattern)))
  return sorted(files)


def installed_versions(names: Iterable[str] = STACK_DISTRIBUTIONS) -> dict[str, str | None]:
  """{distribution: version or None} for the TensorFlow builds and libtpu."""
  versions: dict[str, str | None] = {}
  for name in names:
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      versions[name] = None
  return versions


def _advice(tpu, device_files, versions):
  if tpu != "local":
    return (f"check that the TPU {tpu!r} exists and that this machine can reach it (its name or address, "
            "zone and network), or use --tpu=local (tpu=\"local\") on the TPU host itself.")
  if not device_files:
    return ("this machine has no TPU chips: on Colab choose a TPU runtime (Runtime -> Change runtime "
            "type); on a Cloud TPU VM check that the VM has TPUs; elsewhere leave --tpu unset "
            "(tpu=None) to train on the GPUs or the CPU.")
  if not versions.get("tensorflow-tpu"):
    return ("TensorFlow's TPU build is not installed (no tensorflow-tpu distribution): from the zoo's "
            "checkout run `pip install -r requirements-tpu.txt` in an environment without another "
            "TensorFlow, then restart the Python process (Colab: Runtime -> Restart session).")
  return ("tensorflow-tpu is installed. A TPU is opened by one process at a time: stop other Python "
          "processes or notebook kernels using it (`sudo lsof -w /dev/accel* /dev/vfio/*` lists them) "
          "and restart this one (Colab: Runtime -> Restart session). If it still fails, reinstall with "
          "`pip install -r requirements-tpu.txt`, which pins the libtpu release tensorflow-tpu "
          "was built against.")


def unavailable_message(tpu: str | None, error: BaseException, device_files: Sequence[str],
                        devices: Sequence[Any], versions: dict[str, str | None]) -> str:
  """The text of `TPUUnavailableError`: what was tried, what failed, what exists, what to do.

  Args:
    tpu: the TPU asked for: "local" or a TPU name / `grpc://` address.
    error: the exception (or text) of the failed connection, reported whole.
    device_files: this machine's TPU device files (`tpu_device_files()`).
    devices: the physical devices TensorFlow sees, as `CPU:0`-style names.
    versions: `installed_versions()`.
  """
  chips = f"{len(device_files)} ({', '.join(device_files)})" if device_files else "none"
  installed = ", ".join(f"{name} {version or 'not installed'}" for name, version in versions.items())
  return (f"could not reach the TPU {tpu!r} (tried TPUClusterResolver(tpu={tpu!r}) and "
          f"initialize_tpu_system).\n"
          f"Error: {error}\n"
          f"TPU device files on this machine: {chips}.\n"
          f"Devices TensorFlow sees: {', '.join(devices) or 'none'}.\n"
          f"Installed: {installed}.\n"
          f"What to do: {_advice(tpu, device_files, versions)}")
