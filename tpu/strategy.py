"""The one function that picks the `tf.distribute` strategy for the machine at hand, and who this worker is.

`get_strategy` is what the training job (`python -m tpu.train --tpu ...`) and the notebooks
(`get_strategy(tpu="auto")`) connect with. A TPU that was asked for, or whose chips this
machine has under `tpu="auto"`, and that TensorFlow cannot open raises `TPUUnavailableError`
with the same diagnostics on every path: TensorFlow's error, the chips' device files, the
devices TensorFlow sees, the installed TensorFlow builds and libtpu, and what to do
(`tpu.hardware`, which needs only the standard library, finds the chips and writes the text).

`MultiWorkerMirroredStrategy` must exist before TensorFlow runs any op (its collective
ops are configured at program startup), so the training job asks for the strategy
before it reads data or files, and `get_strategy` runs no TensorFlow op before making it.
"""

import contextlib
import dataclasses
import json
import logging
import os
import re
from collections.abc import Iterator
from typing import Any

from tpu import hardware
from tpu.hardware import TPUUnavailableError
from zoo.lazy import lazy_module
from zoo.logs import error_reason

tf = lazy_module("tensorflow")   # imported on first use: `python -m tpu.train --help` names the bounds

log = logging.getLogger(__name__)

# `get_strategy(tpu=AUTO)`: the TPU of this host where it has TPU chips, else as without a TPU.
AUTO = "auto"

# How a multi-worker run notices a fault (tpu/README.md, "Faults"); the defaults of `FaultBounds`,
# which `python -m tpu.train` sets with --heartbeat-timeout, --collective-timeout and
# --registration-timeout. Every surviving worker must exit within two minutes of a peer's
# death or hang, the chief included:
# - the coordination service (hosted by the chief) declares a worker lost when it sends no
#   heartbeat for HEARTBEAT_TIMEOUT_SECONDS and aborts every worker's collectives; a killed
#   peer is usually noticed sooner, by its closed connections. A stopped (SIGSTOP) or
#   frozen process sends none, so it is caught within this bound too; ten seconds ride
#   out a loaded machine's scheduling hiccups.
# - COLLECTIVE_TIMEOUT_SECONDS bounds a collective whose peer still sends heartbeats but
#   never joins (a process stuck outside TensorFlow). Workers only meet in collectives
#   inside train and eval steps and checkpoint saves, so the bound covers the slowest
#   step of a healthy run, not file writes (the workers wait for the chief's checkpoint
#   writes at a health-checked meeting point, `tpu.cluster`) or compilation before the
#   first step.
# - CLUSTER_REGISTER_TIMEOUT_SECONDS: how long the workers may take to start and connect
#   (start them all within this time of each other).
# - SHUTDOWN_BARRIER_TIMEOUT_SECONDS: how long a finished worker waits at exit for the others.
HEARTBEAT_TIMEOUT_SECONDS = 10
COLLECTIVE_TIMEOUT_SECONDS = 100
CLUSTER_REGISTER_TIMEOUT_SECONDS = 90
SHUTDOWN_BARRIER_TIMEOUT_SECONDS = 30


@dataclasses.dataclass(frozen=True)
class FaultBounds:
  """Seconds after which a multi-worker run gives up on a peer (see the comment above)."""

  heartbeat_timeout: float = HEARTBEAT_TIMEOUT_SECONDS
  collective_timeout: float = COLLECTIVE_TIMEOUT_SECONDS
  registration_timeout: float = CLUSTER_REGISTER_TIMEOUT_SECONDS

  def __post_init__(self):
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{field.name} must be a positive number of seconds, got {value!r}")


# The bounds of this process's cluster (one per process: the coordination service is configured once).
_BOUNDS = FaultBounds()

# Initialised TPU systems, so a notebook that calls get_strategy twice connects once.
_TPU_STRATEGIES: dict[str, Any] = {}


def get_strategy(tpu: str | None = None, bounds: FaultBounds | None = None) -> Any:
  """Returns the strategy to build and train under, and logs what it chose.

  - `tpu="local"` (Colab TPU runtimes, Cloud TPU VMs) or a TPU name / `grpc://`
    address: `TPUStrategy`, connecting and initialising the TPU system once.
  - `tpu="auto"` (the notebooks): `"local"` where this machine has TPU chips
    (`tpu.hardware.tpu_device_files`), else as `tpu=None`. On a TPU machine it never
    falls back to the CPU unnoticed.
  - otherwise, `TF_CONFIG` naming more than one worker: `MultiWorkerMirroredStrategy`,
    made before any other TensorFlow op, with the fault bounds `bounds` (a `FaultBounds`;
    default: `FaultBounds()`);
  - otherwise, more than one GPU: `MirroredStrategy` over the GPUs;
  - otherwise the default strategy (one CPU or GPU).

  Raises:
    TPUUnavailableError: a TPU was asked for (or found) and TensorFlow could not open it.
      A `RuntimeError`; the message (`tpu.hardware.unavailable_message`) names the TPU and
      what was tried, holds TensorFlow's whole error, the TPU device files of this machine,
      the devices TensorFlow sees, the installed TensorFlow builds and libtpu, and what to do.
  """
  if tpu == AUTO:
    chips = hardware.tpu_device_files()
    tpu = "local" if chips else None
    log.info("TPU device files: %s", ", ".join(chips) if chips else "none, so no TPU")
  if tpu:
    strategy = _tpu_strategy(tpu)
    kind = f"TPUStrategy ({tpu})"
  elif _num_workers() > 1:
    global _BOUNDS
    _BOUNDS = bounds or FaultBounds()
    _configure_coordination_service(_BOUNDS)
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=_BOUNDS.collective_timeout)
    try:
      strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except tf.errors.OpError as error:   # a worker that never came, or died while the cluster formed
      raise WorkerLost(unformed_cluster_message(error, _BOUNDS.registration_timeout)) from None
    kind = f"MultiWorkerMirroredStrategy ({_num_workers()} workers from TF_CONFIG)"
  elif len(tf.config.list_logical_devices("GPU")) > 1:
    strategy = tf.distribute.MirroredStrategy()
    kind = "MirroredStrategy (GPUs)"
  else:
    strategy = tf.distribute.get_strategy()
    device = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    kind = f"default strategy (one {device})"
  log.info("distribution: %s, num_replicas_in_sync=%d", kind, strategy.num_replicas_in_sync)
  return strategy


@dataclasses.dataclass(frozen=True)
class Worker:
  """This process's place in the cluster: `index` of `count` workers; the chief writes the model dir."""

  index: int = 0
  count: int = 1
  is_chief: bool = True
  name: str = "the only worker"
  device: str = ""   # its device job in the cluster, "/job:worker/task:1"
  devices: tuple = ()   # every worker's device job, by index (the chief's first)
  # Every worker's name by its device job, for errors that name only the job.
  names_by_device: dict = dataclasses.field(default_factory=dict, compare=False)

  @property
  def multi_worker(self) -> bool:
    return self.count > 1


class WorkerLost(RuntimeError):
  """A worker of the cluster stopped answering (killed, crashed, unreachable); the run stops."""


_DEVICE_JOB = re.compile(r"/job:(\w+)/(?:replica:\d+/)?task:(\d+)")
_LEADER_SILENT = re.compile(r"deadline exceeded|heartbeat|coordination", re.IGNORECASE)


def lost_worker_message(error: BaseException, worker: Worker) -> str:
  """What a TensorFlow error about the cluster means for this worker, naming the lost ones."""
  mentioned = [f"/job:{job}/task:{index}" for job, index in _DEVICE_JOB.findall(str(error))]
  lost = [worker.names_by_device.get(device, device) for device in dict.fromkeys(mentioned)
          if device != worker.device]
  if not lost and worker.devices and not worker.is_chief and _LEADER_SILENT.search(str(error)):
    # Nobody named, and the calls to the coordination service timed out: its host, the chief.
    lost = [worker.names_by_device.get(worker.devices[0], worker.devices[0])]
  who = ", ".join(lost) if lost else "another worker"
  lines = str(error).strip().splitlines()
  reason = next((line for line in lines if "abort" in line.lower() or "unhealthy" in line.lower()),
                lines[0] if lines else type(error).__name__)
  return (f"{worker.name} lost {who}: {type(error).__name__}: {reason.strip().rstrip('.:')}. Every worker "
          "stops; rerun all workers with the same command to resume from the last checkpoint")


class WorkerTooSlow(RuntimeError):
  """A collective waited past its timeout for workers that are alive: a bound to raise."""


_COLLECTIVE_TIMED_OUT = re.compile(r"Collective has timed out", re.IGNORECASE)


# Seconds a peer has to answer a health check.
PEER_CHECK_SECONDS = 5


def peer_health_error(device: str) -> BaseException | None:
  """None if the worker of `device` ('/job:worker/task:1') answers a health check of the
  coordination service within PEER_CHECK_SECONDS, else TensorFlow's error."""
  from tensorflow.python.eager import context
  job, task = device.rsplit("/", 1)
  try:
    context.context().check_collective_ops_peer_health(f"{job}/replica:0/{task}",
                                                       timeout_in_ms=PEER_CHECK_SECONDS * 1000)
  except tf.errors.OpError as error:
    return error
  return None


def _silent_peers(worker):
  """The names of the other workers that do not answer a health check."""
  return [worker.names_by_device.get(device, device) for device in worker.devices
          if device != worker.device and peer_health_error(device) is not None]


def too_slow_message(worker: Worker, timeout: float) -> str:
  return (f"{worker.name} waited over {timeout:g} s in a collective (a train or evaluation step) for the "
          "other workers, which are alive: a peer too slow, not lost. Raise --collective-timeout (now "
          f"{timeout:g} s) above the slowest step; rerun all workers with the same command to resume from "
          "the last checkpoint")


@contextlib.contextmanager
def lost_workers_named(worker: Worker) -> Iterator[None]:
  """Turns the errors that a lost peer causes on a multi-worker run into `WorkerLost` naming it,
  and a collective that timed out while every peer is alive into `WorkerTooSlow`."""
  if not worker.multi_worker:
    yield
    return
  try:
    yield
  except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
          tf.errors.CancelledError) as error:
    log.debug("the cluster's error in full: %s", error)
    if _COLLECTIVE_TIMED_OUT.search(str(error)) and not _silent_peers(worker):
      raise WorkerTooSlow(too_slow_message(worker, _BOUNDS.collective_timeout)) from None
    raise WorkerLost(lost_worker_message(error, worker)) from None


_TIMED_OUT_TASKS = re.compile(r"timed out task names:(.*?)(?=timed out task names:|\Z)",
                              re.IGNORECASE | re.DOTALL)


def unformed_cluster_message(error: BaseException, timeout: float,
                             tf_config: str | None = None) -> str:
  """What an error while the cluster of TF_CONFIG formed means: the workers that never registered
  by name, or (where this worker could not reach the coordination service) its host."""
  cluster, task = _tf_config(tf_config)
  jobs = [(job, i) for job in ("chief", "worker") for i in range(len(cluster.get(job, [])))]
  names = {f"/job:{job}/task:{i}": worker_name(cluster, job, i) for job, i in jobs}
  me = worker_name(cluster, task.get("type", "worker"), int(task.get("index", 0))) if jobs else "this worker"
  missing = []
  for listed in _TIMED_OUT_TASKS.finditer(str(error)):   # the task names on the lines after the words
    for line in listed.group(1).split("\n")[1:]:
      task = _DEVICE_JOB.fullmatch(line.strip())
      if not task:
        break
      name = names.get(f"/job:{task.group(1)}/task:{task.group(2)}", line.strip())
      if name not in missing:
        missing.append(name)
  if missing:
    who = f"{', '.join(missing)} never registered"
  elif jobs and names.get(f"/job:{jobs[0][0]}/task:{jobs[0][1]}") != me:
    who = (f"{names[f'/job:{jobs[0][0]}/task:{jobs[0][1]}']}, which hosts the coordination service, never "
           "answered or the cluster did not form there")
  else:
    who = "the other workers never registered"
  first = error_reason(error)
  return (f"{me}: the cluster of TF_CONFIG did not form within {timeout:g} s: {who} ({type(error).__name__}: "
          f"{first}). Start every worker within --registration-timeout (now {timeout:g} s) of the others, "
          "with the same cluster in TF_CONFIG and its own task index")


def _tf_config(text=None):
  text = os.environ.get("TF_CONFIG", "") if text is None else text
  try:
    values = json.loads(text) if text else {}
  except json.JSONDecodeError:
    values = {}
  return values.get("cluster", {}), values.get("task", {})


def worker(strategy: Any) -> Worker:
  """The `Worker` this process is under `strategy` (one worker for every strategy but multi-worker ones)."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return Worker()
  resolver = strategy.cluster_resolver
  cluster = resolver.cluster_spec().as_dict()
  count = sum(len(cluster.get(job, [])) for job in ("chief", "worker"))
  if count <= 1:
    return Worker()
  task_type, task_id = resolver.task_type, resolver.task_id
  index = task_id + (len(cluster.get("chief", [])) if task_type == "worker" else 0)
  jobs = [(job, i) for job in ("chief", "worker") for i in range(len(cluster.get(job, [])))]
  names = {f"/job:{job}/task:{i}": worker_name(cluster, job, i) for job, i in jobs}
  return Worker(index=index, count=count, is_chief=bool(strategy.extended.should_checkpoint),
                name=worker_name(cluster, task_type, task_id), device=f"/job:{task_type}/task:{task_id}",
                devices=tuple(f"/job:{job}/task:{i}" for job, i in jobs), names_by_device=names)


def worker_name(cluster: dict[str, list[str]], task_type: str, task_id: int) -> str:
  """'worker 1 (127.0.0.1:2345)': a worker of the cluster (TF_CONFIG's task) named with its address."""
  addresses = cluster.get(task_type, [])
  if isinstance(addresses, dict):
    addresses = [addresses[key] for key in sorted(addresses)]
  address = f" ({addresses[task_id]})" if task_id < len(addresses) else ""
  return f"{task_type} {task_id}{address}"


def _configure_coordination_service(bounds):
  """The coordination service of a `TF_CONFIG` cluster with the fault bounds `bounds`.

  `MultiWorkerMirroredStrategy` configures the service itself unless one is configured
  already, with TensorFlow's defaults; this sets the same service (hosted by the chief,
  or else worker 0) with those timeouts.
  """
  from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
  from tensorflow.python.distribute import multi_worker_util
  from tensorflow.python.eager import context

  if context.context().coordination_service is not None:
    return
  cluster = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec()
  jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=cluster.num_tasks(job))
          for job in ("chief", "worker") if job in cluster.jobs]
  context.context().configure_coordination_service(
      service_type="standalone", service_leader=multi_worker_util.coordination_leader(cluster),
      coordinated_jobs=jobs, heartbeat_timeout_in_ms=int(bounds.heartbeat_timeout * 1000),
      cluster_register_timeout_in_ms=int(bounds.registration_timeout * 1000),
      shutdown_barrier_timeout_in_ms=SHUTDOWN_BARRIER_TIMEOUT_SECONDS * 1000)
  # Every worker, the chief too, waits at registration for all the others and fails after
  # the timeout (without it, a chief whose peers never come waits for ever). The setter
  # above has no argument for it.
  context.context().coordination_service.cluster_register_with_barrier = True


def _num_workers():
  config = os.environ.get("TF_CONFIG")
  if not config:
    return 0
  try:
    cluster = json.loads(config).get("cluster", {})
  except json.JSONDecodeError as e:
    raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from e
  return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def _tpu_strategy(tpu):
  if tpu in _TPU_STRATEGIES:
    return _TPU_STRATEGIES[tpu]
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    if tpu != "local":
      tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
  except Exception as error:   # whatever stops the TPU opening is reported with the diagnostics
    message = hardware.unavailable_message(tpu, error, hardware.tpu_device_files(), _visible_devices(),
                                           hardware.installed_versions())
    raise TPUUnavailableError(message) from error
  strategy = tf.distribute.TPUStrategy(resolver)
  _TPU_STRATEGIES[tpu] = strategy
  return strategy


def _visible_devices():
  """The physical devices TensorFlow sees, as `DEVICE_TYPE:N` names (e.g. `CPU:0`)."""
  try:
    devices = tf.config.list_physical_devices()
  except Exception as error:   # only feeds the error message
    return [f"(listing failed: {error})"]
  return [device.name.replace("/physical_device:", "") for device in devices]
