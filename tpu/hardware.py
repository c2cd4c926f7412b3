"""Is there a TPU on this machine, and can TensorFlow use it?

The notebooks connect through `select_strategy`: TPU chips present means the run is
meant for them, so a TPU that TensorFlow cannot initialise is an error that says why
and what to do, not a silent fall-back to the CPU. Without TPU chips it returns the
GPU or CPU strategy of `tpu.strategy.get_strategy()`.

TPU chips show up as device files: `/dev/accel0`, `/dev/accel1`, ... on TPU v2 to v4
hosts and `/dev/vfio/0`, `/dev/vfio/1`, ... (beside the `/dev/vfio/vfio` control file)
on v5e, v5p and v6e hosts, Colab TPU runtimes included. `tpu_device_files` needs only
the standard library, so an install step can ask it before TensorFlow is installed.
"""

import glob
import importlib.metadata
import logging
import os

log = logging.getLogger(__name__)

# Under the device root: one file per TPU chip.
TPU_DEVICE_PATTERNS = ("dev/accel[0-9]*", "dev/vfio/[0-9]*")
# The distributions whose versions the error message reports.
STACK_DISTRIBUTIONS = ("tensorflow-tpu", "tensorflow", "libtpu", "tensorflow-cpu")


class TPUUnavailableError(RuntimeError):
  """This machine has TPU chips, and TensorFlow could not initialise them."""


def tpu_device_files(root="/"):
  """The TPU chips' device files under `root` (sorted); empty on a machine without TPUs.

  `root` is `/` but for tests, which point it at a directory of fake device files.
  """
  files = []
  for pattern in TPU_DEVICE_PATTERNS:
    files.extend(glob.glob(os.path.join(root, pattern)))
  return sorted(files)


def installed_versions(names=STACK_DISTRIBUTIONS):
  """{distribution: version or None} for the TensorFlow builds and libtpu."""
  versions = {}
  for name in names:
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      versions[name] = None
  return versions


def visible_devices():
  """The physical devices TensorFlow sees, as `DEVICE_TYPE:N` names (e.g. `CPU:0`)."""
  import tensorflow as tf

  try:
    devices = tf.config.list_physical_devices()
  except Exception as error:   # only feeds the error message
    return [f"(listing failed: {error})"]
  return [device.name.replace("/physical_device:", "") for device in devices]


def _advice(versions):
  if not versions.get("tensorflow-tpu"):
    return ("TensorFlow's TPU build is not installed (no tensorflow-tpu distribution): from the zoo's "
            "checkout run `pip install -r requirements-tpu.txt` in an environment without another "
            "TensorFlow, then restart the Python process (Colab: Runtime -> Restart session).")
  return ("tensorflow-tpu is installed. A TPU is opened by one process at a time: stop other Python "
          "processes or notebook kernels using it (`sudo lsof -w /dev/accel* /dev/vfio/*` lists them) "
          "and restart this one (Colab: Runtime -> Restart session). If it still fails, reinstall with "
          "`pip install -r requirements-tpu.txt`, which pins the libtpu release tensorflow-tpu "
          "was built against.")


def unavailable_message(device_files, error, devices, versions):
  """The text of `TPUUnavailableError`: what exists, what failed, what TensorFlow sees, what to do."""
  installed = ", ".join(f"{name} {version or 'not installed'}" for name, version in versions.items())
  return (f"this machine has {len(device_files)} TPU device file(s) ({', '.join(device_files)}) but "
          f"TensorFlow could not initialise the TPU.\n"
          f"Error: {error}\n"
          f"Devices TensorFlow sees: {', '.join(devices) or 'none'}.\n"
          f"Installed: {installed}.\n"
          f"What to do: {_advice(versions)}")


def select_strategy(tpu="local", device_root="/", connect=None):
  """The strategy for this machine: TPUStrategy where there are TPU chips, else GPU/CPU.

  Args:
    tpu: what `connect` is given on a TPU machine; "local" is the TPU of this host (a
      Colab TPU runtime or a Cloud TPU VM).
    device_root: where to look for the chips' device files (tests pass a directory).
    connect: `connect(tpu)` returns a TPUStrategy or raises; default
      `tpu.strategy.get_strategy`.

  Raises:
    TPUUnavailableError: TPU device files exist and `connect` failed. The message holds
      the full error, the devices TensorFlow sees, the installed TensorFlow builds and
      libtpu, and what to do.
  """
  from tpu import strategy as strategy_lib  # imports TensorFlow

  connect = connect or (lambda name: strategy_lib.get_strategy(tpu=name))
  device_files = tpu_device_files(device_root)
  if not device_files:
    log.info("no TPU device files under %s: using the GPUs or the CPU", device_root)
    return strategy_lib.get_strategy()
  try:
    return connect(tpu)
  except Exception as error:
    raise TPUUnavailableError(
        unavailable_message(device_files, error, visible_devices(), installed_versions())) from error
