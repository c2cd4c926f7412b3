"""Meeting points of a multi-worker run outside its collectives, bounded by the peers' health.

Workers meet in collective ops inside train and eval steps; elsewhere (a worker waiting
for the chief's vocabulary, for its export, for every worker's input state before a
checkpoint is committed) they meet here, through the coordination service's key-value
store (`tf.distribute`'s own, hosted by the chief). A wait polls the store every
`POLL_SECONDS` and, between polls, asks the awaited worker's server whether it is alive
(`check_collective_ops_peer_health`), so a killed, restarted or stopped (SIGSTOP) peer
ends the wait within seconds with `WorkerLost` naming it; a blocking barrier would not
notice a stopped chief.

`sync` also tells every worker whether any of them got SIGTERM, so all of them stop in
the same way (status 143) wherever the signal arrived. On one worker every function
returns at once.
"""

import time

import tensorflow as tf

from tpu.strategy import Worker
from tpu.strategy import WorkerLost
from tpu.strategy import peer_health_error
from zoo.logs import error_reason

# Seconds between two polls of a waiting worker.
POLL_SECONDS = 2
# Values a worker publishes at a sync point.
_GOING_ON, _TERMINATED = "going on", "SIGTERM"
_PREFIX = "tpu.train"


def _context():
  from tensorflow.python.eager import context
  return context.context()


def check_alive(worker: Worker, index: int, waiting_for: str) -> None:
  """Raises `WorkerLost` unless worker `index` of the cluster answers a health check
  (`tpu.strategy.peer_health_error`)."""
  if not worker.devices or index == worker.index:
    return
  device = worker.devices[index]
  error = peer_health_error(device)
  if error is not None:
    name = worker.names_by_device.get(device, device)
    reason = error_reason(error)
    raise WorkerLost(f"{worker.name} lost {name} while waiting for {waiting_for}: {type(error).__name__}: "
                     f"{reason}. Every worker stops; rerun all workers with the same command to resume "
                     "from the last checkpoint")


def publish(key: str, value: str) -> None:
  """Sets `key` in the cluster's key-value store (once per key and run)."""
  _context().set_config_key_value(f"{_PREFIX}/{key}", value)


def wait_for(worker: Worker, key: str, index: int, waiting_for: str, timeout: float | None = None) -> str:
  """The value of `key` once worker `index` has published it; `WorkerLost` if that worker dies
  or stops answering first, `RuntimeError` after `timeout` seconds."""
  deadline = None if timeout is None else time.monotonic() + timeout
  while True:
    try:
      return _context().get_config_key_value(f"{_PREFIX}/{key}", POLL_SECONDS * 1000)
    except tf.errors.DeadlineExceededError:
      pass   # not published yet
    except tf.errors.OpError:
      check_alive(worker, 0, waiting_for)   # the store's host
      raise
    check_alive(worker, index, waiting_for)
    if deadline is not None and time.monotonic() > deadline:
      raise RuntimeError(f"{worker.name} waited {timeout:.0f} s for {waiting_for}")


def sync(worker: Worker, name: str, terminated: bool) -> bool:
  """Waits until every worker reaches the sync point `name`; returns whether any got SIGTERM.

  `terminated` is this worker's flag; one that rises while it waits counts at the next
  sync point.
  """
  if not worker.multi_worker:
    return terminated
  publish(f"{name}/{worker.index}", _TERMINATED if terminated else _GOING_ON)
  values = [wait_for(worker, f"{name}/{index}", index, f"every worker at '{name}'")
            for index in range(worker.count) if index != worker.index]
  return terminated or _TERMINATED in values
