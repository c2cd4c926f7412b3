"""One function that picks the `tf.distribute` strategy for the machine at hand."""

import json
import logging
import os

import tensorflow as tf

log = logging.getLogger(__name__)

# Initialised TPU systems, so a notebook that calls get_strategy twice connects once.
_TPU_STRATEGIES = {}


def get_strategy(tpu=None):
  """Returns the strategy to build and train under, and logs what it chose.

  - `tpu="local"` (Colab TPU runtimes, Cloud TPU VMs) or a TPU name / `grpc://`
    address: `TPUStrategy`, connecting and initialising the TPU system once.
  - otherwise, `TF_CONFIG` naming more than one worker: `MultiWorkerMirroredStrategy`;
  - otherwise, more than one GPU: `MirroredStrategy` over the GPUs;
  - otherwise the default strategy (one CPU or GPU).

  Raises:
    RuntimeError: a TPU was asked for and could not be reached; the message names the
      address tried and the underlying error.
  """
  if tpu:
    strategy = _tpu_strategy(tpu)
    kind = f"TPUStrategy ({tpu})"
  elif _num_workers() > 1:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
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
  except (ValueError, RuntimeError, tf.errors.OpError) as e:
    raise RuntimeError(
        f"could not reach the TPU {tpu!r} (tried TPUClusterResolver(tpu={tpu!r}) and "
        f"initialize_tpu_system): {e}. On Colab choose a TPU runtime; on a Cloud TPU VM use "
        "--tpu=local; elsewhere leave --tpu unset to train on the GPUs or CPU") from e
  strategy = tf.distribute.TPUStrategy(resolver)
  _TPU_STRATEGIES[tpu] = strategy
  return strategy
