"""Training on several workers: `MultiWorkerMirroredStrategy` clusters of `python -m tpu.train`
processes on 127.0.0.1 (free loopback ports, every process bounded in time), against one device."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from tpu import strategy as strategies
from tpu import train
from tpu.config import TrainConfig
from tpu.data import pipeline
from tpu.prepare import prepare
from tpu.prepare import wait_for_vocab
from tpu.tasks import get_task
from zoo.model_dir import ModelDir
from zoo.text import TextEncoder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_FUNNEL = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1])
TINY_TRANSFORMER = dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2)
TIMEOUT = 300   # seconds any cluster may take (on a loaded machine; a quiet one takes far less)


def tiny_config(model_dir, **changes):
  values = dict(model="funnel_b4_4_4", model_overrides=TINY_FUNNEL, task="classify", data="demo",
                model_dir=str(model_dir), steps=6, batch_size=8, eval_batch_size=128, seq_length=16,
                vocab_size=200, checkpoint_every=2, export=False, learning_rate=3e-3, warmup_steps=0,
                dropout=0.0)
  values.update(changes)
  return TrainConfig(**values)


def free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  try:
    for s in sockets:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


class Cluster:
  """`python -m MODULE ARGS` (the training job by default) as every worker of a TF_CONFIG cluster on
  loopback ports, or as the first `started` of them (the others never start)."""

  def __init__(self, folder, args, workers=2, module="tpu.train", started=None):
    self.addresses = [f"127.0.0.1:{port}" for port in free_ports(workers)]
    self.logs = [os.path.join(folder, f"worker{i}-{time.monotonic_ns()}") for i in range(workers)]
    self.processes = []
    for index, log in enumerate(self.logs[:started]):
      tf_config = dict(cluster=dict(worker=self.addresses), task=dict(type="worker", index=index))
      env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(tf_config))
      with open(log + ".out", "w") as out, open(log + ".err", "w") as err:
        self.processes.append(subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT,
                                               env=env, stdout=out, stderr=err, text=True))

  def stderr(self, index):
    with open(self.logs[index] + ".err") as file:
      return file.read()

  def stdout(self, index):
    with open(self.logs[index] + ".out") as file:
      return file.read()

  def wait(self, timeout=TIMEOUT):
    """The exit codes; a worker still running after `timeout` seconds fails the test."""
    deadline = time.monotonic() + timeout
    for process in self.processes:
      try:
        process.wait(timeout=max(deadline - time.monotonic(), 0.1))
      except subprocess.TimeoutExpired:
        self.kill()
        raise AssertionError(f"the cluster ran over {timeout} s:\n" + self.stderr(0)[-3000:]) from None
    return [process.returncode for process in self.processes]

  def wait_for(self, predicate, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not predicate():
      ended = [i for i, process in enumerate(self.processes) if process.poll() is not None]
      if ended or time.monotonic() > deadline:
        self.kill()
        raise AssertionError(f"workers {ended} ended early or the wait timed out:\n"
                             + "\n".join(self.stderr(i)[-2000:] for i in range(len(self.processes))))
      time.sleep(0.05)

  def kill(self):
    for process in self.processes:
      if process.poll() is None:
        process.kill()
        process.wait()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.kill()


def config_file(tmp_path, config):
  path = tmp_path / f"config-{time.monotonic_ns()}.json"
  path.write_text(json.dumps(config.to_dict()), encoding="utf-8")
  return str(path)


def training_records(model_dir):
  return [record for record in ModelDir(str(model_dir)).read_history() if "loss" in record]


def latest_step(model_dir):
  latest = tf.train.latest_checkpoint(ModelDir(str(model_dir)).checkpoint_dir)
  return int(latest.rsplit("-", 1)[1]) if latest else None


def assert_one_set_of_files(model_dir, runs=1):
  entries = sorted(os.listdir(model_dir))
  assert [entry for entry in entries if entry.startswith(".") or "tmp" in entry or "worker" in entry] == []
  run_dir = ModelDir(str(model_dir))
  checkpoints = os.listdir(run_dir.checkpoint_dir)
  assert all(name in ("checkpoint", "input") or name.startswith("ckpt-") for name in checkpoints), checkpoints
  # Each worker's input positions, for the steps of the recorded checkpoints only.
  recorded = sorted(int(name[len("ckpt-"):-len(".index")]) for name in checkpoints
                    if name.startswith("ckpt-") and name.endswith(".index"))
  positions = os.listdir(os.path.join(run_dir.checkpoint_dir, "input"))
  assert sorted(positions) == ["worker-0-of-2", "worker-1-of-2"]
  for index in range(2):
    assert run_dir.input_state_steps(index, 2) == recorded
  # One summary file per run: the chief's.
  assert len(os.listdir(ModelDir(str(model_dir)).summaries_dir("train"))) == runs


# ---------------------------------------------------------------------------------------------
# Pieces, in this process.


def test_worker_of_a_single_process_strategy_is_the_chief():
  worker = strategies.worker(tf.distribute.get_strategy())
  assert (worker.index, worker.count, worker.is_chief, worker.multi_worker) == (0, 1, True, False)


def test_a_lost_worker_is_named_with_its_address():
  cluster = {"worker": ["127.0.0.1:1111", "127.0.0.1:2222"]}
  names = {f"/job:worker/task:{i}": strategies.worker_name(cluster, "worker", i) for i in range(2)}
  me = strategies.Worker(index=0, count=2, name=names["/job:worker/task:0"], device="/job:worker/task:0",
                         names_by_device=names)
  error = tf.errors.UnavailableError(None, None, (
      "Graph execution error:\nCollective ops is aborted by: Error reported from /job:worker/task:1: The "
      "following tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"))
  message = strategies.lost_worker_message(error, me)
  assert message.startswith("worker 0 (127.0.0.1:1111) lost worker 1 (127.0.0.1:2222): UnavailableError: "
                            "Collective ops is aborted")
  with pytest.raises(strategies.WorkerLost, match=r"lost worker 1 \(127.0.0.1:2222\)"):
    with strategies.lost_workers_named(me):
      raise error


def test_workers_wait_a_bounded_time_for_the_chiefs_vocabulary(tmp_path):
  worker = strategies.Worker(index=1, count=2, is_chief=False, name="worker 1 (127.0.0.1:2222)")
  with pytest.raises(RuntimeError, match=r"worker 1 \(127.0.0.1:2222\) waited 0 s for the chief's "
                                         r"vocabulary .*vocab.txt.*--vocab FILE"):
    wait_for_vocab(ModelDir(str(tmp_path)), worker, timeout=0.2)
  ModelDir(str(tmp_path)).write_vocab(["[PAD]", "[UNK]", "the"])
  assert wait_for_vocab(ModelDir(str(tmp_path)), worker, timeout=0.2) == ["[PAD]", "[UNK]", "the"]


def test_workers_other_than_the_chief_write_nothing(tmp_path):
  worker = strategies.Worker(index=1, count=2, is_chief=False, name="worker 1")
  ModelDir(str(tmp_path / "run")).write_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good"])
  prepare(tiny_config(tmp_path / "run"), worker=worker)
  assert os.listdir(tmp_path / "run") == ["vocab.txt"]   # the chief's, read; no config.json written


def test_evaluation_slices_cover_every_example_once_over_pipelines(tmp_path):
  """Each pipeline keeps its rows of the same padded global batches: as many batches everywhere,
  and together every example once."""
  config = tiny_config(tmp_path, eval_batch_size=64).validate()
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "plot", "was", "good"]
  encoder, task = TextEncoder(vocab, seq_length=16), get_task(config)
  from tpu import data
  source = data.load("demo", "validation")   # 500 examples: 7 batches of 64 + 52
  input_fn = pipeline.eval_input_fn(source, task, encoder, 64)
  parts = [list(input_fn(tf.distribute.InputContext(2, i, 2)).as_numpy_iterator()) for i in range(2)]
  assert [len(part) for part in parts] == [8, 8]
  whole = list(pipeline.eval_dataset(source, task, encoder, 64).as_numpy_iterator())
  for batch, first, second in zip(whole, *parts, strict=True):
    for key in batch:
      np.testing.assert_array_equal(np.concatenate([first[key], second[key]]), batch[key])
  assert sum(part["weight"].sum() for part in parts[0] + parts[1]) == 500


def test_a_multi_host_tpu_refuses_text_that_needs_tensorflow_text(tmp_path):
  tpu = object.__new__(tf.distribute.TPUStrategy)   # a stand-in with the one attribute the check reads
  tpu._extended = types.SimpleNamespace(num_hosts=4)
  prepared = types.SimpleNamespace(train=types.SimpleNamespace(spec="demo", metadata=None), evaluation=None)
  with pytest.raises(ValueError, match=r"demo is tokenized .*tensorflow-text.*4 hosts.*"
                                       r"python -m tpu.pretraining_data"):
    train._check_tpu_hosts(tpu, prepared)
  prepared.train = types.SimpleNamespace(spec="tfrecord:x/*.tfrecord", metadata={"seq_length": 16})
  train._check_tpu_hosts(tpu, prepared)   # pre-tokenized records run


# What TensorFlow 2.20's coordination service says when the cluster does not form in time.
UNFORMED = ("Barrier timed out. Id: [Init]Wait_for_all_tasks_to_register::0. This usually happens because a "
            "task triggered the barrier too early or too slowly.\n# of tasks that reached the barrier: 1/3.\n"
            "The first task at the barrier: /job:worker/replica:0/task:0. Some timed out task names:\n"
            "/job:worker/replica:0/task:2\n/job:worker/replica:0/task:1\n\nAdditional GRPC error information "
            "from remote target /job:worker/replica:0/task:0 while calling /tensorflow.CoordinationService/"
            "RegisterTask:\n:UNKNOWN:Error received from peer  {grpc_message:\"Barrier timed out. [...]\nThe "
            "first task at the barrier: /job:worker/replica:0/task:0. Some timed out task names:\n"
            "/job:worker/replica:0/task:2\n/job:worker/replica:0/task:1\n\"}")


def test_a_cluster_that_never_forms_names_the_workers_that_never_registered():
  tf_config = json.dumps(dict(cluster=dict(worker=["127.0.0.1:1111", "127.0.0.1:2222", "127.0.0.1:3333"]),
                              task=dict(type="worker", index=0)))
  error = tf.errors.DeadlineExceededError(None, None, UNFORMED)
  message = strategies.unformed_cluster_message(error, 90, tf_config)
  assert message.startswith("worker 0 (127.0.0.1:1111): the cluster of TF_CONFIG did not form within 90 s: "
                            "worker 2 (127.0.0.1:3333), worker 1 (127.0.0.1:2222) never registered")
  assert "--registration-timeout (now 90 s)" in message
  # A worker that cannot reach the coordination service names its host.
  other = tf_config.replace('"index": 0', '"index": 2')
  unreachable = tf.errors.UnavailableError(None, None, "RPC: RegisterTask")
  message = strategies.unformed_cluster_message(unreachable, 5, other)
  assert message.startswith("worker 2 (127.0.0.1:3333): the cluster of TF_CONFIG did not form within 5 s: "
                            "worker 0 (127.0.0.1:1111), which hosts the coordination service, never answered")


def test_a_collective_timeout_with_every_peer_alive_is_a_peer_too_slow_not_a_lost_one():
  me = strategies.Worker(index=1, count=2, name="worker 1 (127.0.0.1:2222)")   # no peers to ask: all alive
  error = tf.errors.DeadlineExceededError(None, None, "Collective has timed out waiting for other workers.")
  with pytest.raises(strategies.WorkerTooSlow) as slow:
    with strategies.lost_workers_named(me):
      raise error
  assert str(slow.value).startswith("worker 1 (127.0.0.1:2222) waited over 100 s in a collective (a train or "
                                    "evaluation step) for the other workers, which are alive")
  assert "Raise --collective-timeout (now 100 s)" in str(slow.value)


def test_fault_bounds_are_settings_with_todays_defaults(capsys):
  config = TrainConfig()
  assert config.fault_bounds() == strategies.FaultBounds(10, 100, 90)
  assert TrainConfig(collective_timeout=600).fault_bounds().collective_timeout == 600
  with pytest.raises(ValueError, match="heartbeat_timeout must be a positive number of seconds, got 0"):
    tiny_config("/tmp/x", heartbeat_timeout=0).validate()
  with pytest.raises(SystemExit):
    train.main(["--help"])
  text = " ".join(capsys.readouterr().out.split())
  for flag, default in (("--heartbeat-timeout", 10), ("--collective-timeout", 100),
                        ("--registration-timeout", 90)):
    assert re.search(rf"{flag} S [^(]*\((?:[^)]*; )?default {default}\)", text), flag
  assert "--reset-input" in text


# ---------------------------------------------------------------------------------------------
# Clusters of processes.

# Every surviving worker must exit within this many seconds of a peer's death or hang.
FAULT_BOUND_SECONDS = 120
RESUME_STEPS = 12


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  """Two workers training a classifier RESUME_STEPS steps without interruption, with an export:
  the run the one-device test checks. Evaluation batches of 64 (7 full, the last one padded)."""
  tmp_path = tmp_path_factory.mktemp("uninterrupted")
  model_dir = tmp_path / "cluster"
  config = tiny_config(model_dir, steps=RESUME_STEPS, checkpoint_every=3, export=True, eval_batch_size=64)
  with Cluster(str(tmp_path), ["--config", config_file(tmp_path, config)]) as cluster:
    codes = cluster.wait()
    assert codes == [0, 0], cluster.stderr(0)[-2000:] + cluster.stderr(1)[-2000:]
  return types.SimpleNamespace(model_dir=model_dir, config=config, cluster=cluster,
                               losses=np.array([record["loss"] for record in training_records(model_dir)]))


# The slow first checkpoint save of the chief in the resume tests' reference run: longer than the
# collective timeout that run sets, so it ends rc 0 only if the other worker waits for the
# write at the meeting point, not in the next step's collective.
SLOW_SAVE_SECONDS = 40
SHORT_COLLECTIVE_TIMEOUT = 20


class ElectraReference:
  """The reference run of the resume chain, started at once and waited for when first needed
  (`finished()`): its chief's slow save (SLOW_SAVE_SECONDS of waiting) overlaps the chain's
  own clusters instead of holding up the test process."""

  def __init__(self, tmp_path):
    self.config = tiny_config(tmp_path / "cluster", task="electra", model="realformer_small",
                              model_overrides=TINY_TRANSFORMER, steps=RESUME_STEPS, checkpoint_every=3,
                              steps_per_execution=2, dropout=0.1, eval_batch_size=64,
                              max_predictions_per_seq=3, collective_timeout=SHORT_COLLECTIVE_TIMEOUT)
    self.started = time.monotonic()
    args = [str(SLOW_SAVE_SECONDS), "--config", config_file(tmp_path, self.config)]
    self.cluster = Cluster(str(tmp_path), args, module="tests.tpu.slow_chief")
    self.took = self.records = self.losses = None

  def finished(self):
    if self.records is None:
      codes = self.cluster.wait()
      self.took = time.monotonic() - self.started
      assert codes == [0, 0], self.cluster.stderr(0)[-3000:] + self.cluster.stderr(1)[-3000:]
      self.records = training_records(self.config.model_dir)
      self.losses = np.array([record["loss"] for record in self.records])
    return self


@pytest.fixture(scope="module")
def electra_uninterrupted(tmp_path_factory):
  """The reference of the resume chain: two workers pre-training ELECTRA (a generator's masked
  LM and the discriminator) with dropout 0.1, two steps per execution, without interruption.

  Its chief's first checkpoint save takes SLOW_SAVE_SECONDS more (`tests.tpu.slow_chief`),
  twice the collective timeout the run sets: both workers must still finish every step."""
  reference = ElectraReference(tmp_path_factory.mktemp("electra"))
  yield reference
  reference.cluster.kill()


# The resumed runs' evaluation batches: 125 of them keep the final evaluation long enough for a
# signal to land in it (the uninterrupted run's size changes no training step).
RESUME_EVAL_BATCH_SIZE = 4


def resume_config(tmp_path, uninterrupted):
  model_dir = tmp_path / "run"
  config = uninterrupted.config.replace(model_dir=str(model_dir), eval_batch_size=RESUME_EVAL_BATCH_SIZE)
  return model_dir, ["--config", config_file(tmp_path, config)]


def stop_one(cluster, index, signum):
  """Sends `signum` to worker `index`; returns the exit codes of the others and the seconds they took."""
  cluster.processes[index].send_signal(signum)
  sent = time.monotonic()
  codes, took = {}, {}
  for other, process in enumerate(cluster.processes):
    if other == index:
      continue
    try:
      codes[other] = process.wait(timeout=max(FAULT_BOUND_SECONDS - (time.monotonic() - sent), 0.1))
    except subprocess.TimeoutExpired:
      cluster.kill()
      raise AssertionError(f"worker {other} still ran {FAULT_BOUND_SECONDS} s after worker {index} got "
                           f"signal {signum}:\n{cluster.stderr(other)[-3000:]}") from None
    took[other] = time.monotonic() - sent
  return codes, took


def assert_resumed_as_uninterrupted(model_dir, uninterrupted, stopped_at, cluster):
  for index in range(2):
    assert f"(step {stopped_at})" in cluster.stderr(index)
    assert f"the input pipeline continues from its position at step {stopped_at}" in cluster.stderr(index)
  records = training_records(model_dir)
  steps = [record["step"] for record in records]
  assert steps == [record["step"] for record in uninterrupted.records]   # each step once
  resumed = np.array([record["loss"] for record in records])
  print(f"stopped after step {stopped_at}; largest loss difference to the uninterrupted run:",
        np.abs(resumed - uninterrupted.losses).max())
  # Exact: the same batches, and the same dropout masks and generator samples on each replica.
  np.testing.assert_array_equal(resumed, uninterrupted.losses)
  assert latest_step(model_dir) == RESUME_STEPS


@pytest.mark.slow
def test_two_workers_follow_one_device_and_write_one_model_dir(uninterrupted, tmp_path, monkeypatch):
  """Two workers, one replica each, each reading its half of the examples (pipeline i of 2 keeps
  every 2nd example from the i-th, shuffles them with its own seed and makes batches of 4).
  The global batch of a step is worker 0's 4 examples and worker 1's 4.

  The baseline is one device in this process whose global batch of 8 is the concatenation of
  those two pipelines' batches (the same `train_input_fn` called with the two workers'
  `InputContext`s): the same examples in the same order, so with dropout off the loss must
  follow to 1e-5, and the final evaluation (each worker evaluating its slice of every padded
  batch) must equal the one device's over all 500 examples."""
  model_dir, cluster = uninterrupted.model_dir, uninterrupted.cluster
  assert "on 2 workers; this is worker 1 (127.0.0.1:" in cluster.stderr(1)
  results = [json.loads(cluster.stdout(i)) for i in range(2)]
  assert results[1]["examples"] == 500 and results[0]["loss"] == results[1]["loss"]

  # One copy of everything: the chief's.
  assert sorted(os.listdir(model_dir)) == ["checkpoints", "config.json", "eval", "eval_results.json",
                                          "export", "history.jsonl", "train", "vocab.txt"]
  assert_one_set_of_files(model_dir)
  assert len(ModelDir(str(model_dir)).export_versions()) == 1
  assert [record["step"] for record in training_records(model_dir)] == list(range(1, RESUME_STEPS + 1))
  assert latest_step(model_dir) == RESUME_STEPS

  original = pipeline.train_input_fn

  def one_device_input_fn(*args, **kwargs):
    make = original(*args, **kwargs)
    parts = tuple(make(tf.distribute.InputContext(2, i, 2)) for i in range(2))
    return lambda context=None: tf.data.Dataset.zip(parts).map(
        lambda first, second: tf.nest.map_structure(lambda a, b: tf.concat([a, b], 0), first, second))

  monkeypatch.setattr(pipeline, "train_input_fn", one_device_input_fn)
  baseline = tmp_path / "one"
  one_results = train.run(uninterrupted.config.replace(model_dir=str(baseline), export=False,
                                                       vocab=ModelDir(str(model_dir)).vocab_path),
                          strategy=tf.distribute.OneDeviceStrategy("/cpu:0"))
  one = np.array([record["loss"] for record in training_records(baseline)])
  assert len(one) == RESUME_STEPS and one[0] != one[-1]
  print("largest loss difference, 2 workers vs 1 device:", np.abs(uninterrupted.losses - one).max())
  np.testing.assert_allclose(uninterrupted.losses, one, atol=1e-5)
  for key in ("loss", "accuracy", "f1"):
    np.testing.assert_allclose(results[0][key], one_results[key], atol=1e-5)


@pytest.mark.slow
def test_a_preempted_then_killed_cluster_resumes_as_the_same_run(electra_uninterrupted, tmp_path):
  """ELECTRA with dropout, two steps per execution (`electra_uninterrupted`): three runs of the
  same command on every worker. The first is preempted: SIGTERM to worker 1
  after its first step, and both workers save the same step and exit with 143. The second continues
  from there and loses its chief, which hosts the coordination service, to kill -9 at a random
  moment after its first checkpoint: the other worker exits non-zero within the bound, naming
  it. The third continues both workers' data streams and repeats the uninterrupted losses; SIGTERM
  to worker 1 during its final evaluation then ends both workers with 143, the final checkpoint
  saved and no evaluation results written."""
  uninterrupted = electra_uninterrupted
  model_dir, args = resume_config(tmp_path, uninterrupted)
  with Cluster(str(tmp_path), args) as first:
    first.wait_for(lambda: len(training_records(model_dir)) >= 1)
    codes, took = stop_one(first, 1, signal.SIGTERM)   # a preempted VM
    codes[1] = first.processes[1].wait(timeout=FAULT_BOUND_SECONDS)
  assert codes == {0: 143, 1: 143}, first.stderr(0)[-2000:]
  assert "SIGTERM on another worker: saved a checkpoint at step" in first.stderr(0)
  assert "SIGTERM: saved a checkpoint at step" in first.stderr(1)
  preempted_at = training_records(model_dir)[-1]["step"]
  # Checkpoints come every 3 steps: the second run needs one after this step and before the last.
  assert 1 <= preempted_at < RESUME_STEPS - 3 and latest_step(model_dir) == preempted_at
  for index in range(2):   # every worker's input position of that step, for the rerun
    assert ModelDir(str(model_dir)).input_state_steps(index, 2)[-1] == preempted_at

  with Cluster(str(tmp_path), args) as second:
    second.wait_for(lambda: latest_step(model_dir) > preempted_at)
    time.sleep(np.random.default_rng().uniform(0, 0.5))
    codes, took = stop_one(second, 0, signal.SIGKILL)
  print(f"worker 1 exited {took[1]:.1f} s after the chief was killed")
  assert codes[1] not in (0, None)
  assert f"lost worker 0 ({second.addresses[0]})" in second.stderr(1), second.stderr(1)[-2000:]
  assert f"the input pipeline continues from its position at step {preempted_at}" in second.stderr(1)
  stopped_at = latest_step(model_dir)
  assert preempted_at < stopped_at < RESUME_STEPS

  with Cluster(str(tmp_path), args) as third:
    third.wait_for(lambda: f"trained to step {RESUME_STEPS}" in third.stderr(1))
    third.processes[1].send_signal(signal.SIGTERM)
    codes = third.wait(timeout=FAULT_BOUND_SECONDS)
  assert codes == [143, 143], third.stderr(0)[-2000:] + third.stderr(1)[-2000:]
  assert f"SIGTERM during the evaluation at step {RESUME_STEPS}" in third.stderr(1), third.stderr(1)[-2000:]
  assert f"SIGTERM on another worker during the evaluation at step {RESUME_STEPS}" in third.stderr(0)
  assert not os.path.exists(ModelDir(str(model_dir)).eval_results_path)
  assert_resumed_as_uninterrupted(model_dir, uninterrupted.finished(), stopped_at, third)
  assert_one_set_of_files(model_dir, runs=3)


@pytest.mark.slow
def test_a_chief_whose_checkpoint_write_outlasts_the_collective_timeout_keeps_the_cluster(
    electra_uninterrupted):
  run = electra_uninterrupted.finished()
  assert "slow_chief: the save of" in run.cluster.stderr(0) and run.took > SLOW_SAVE_SECONDS
  # Every step, in executions of two that never cross a checkpoint (every 3 steps).
  assert [record["step"] for record in run.records] == [2, 3, 5, 6, 8, 9, 11, 12]
  assert latest_step(run.config.model_dir) == RESUME_STEPS
  results = [json.loads(run.cluster.stdout(i)) for i in range(2)]
  assert results[0] == results[1] and set(results[0]) >= {"mlm_loss", "disc_loss"}


@pytest.mark.slow
def test_a_peer_that_never_starts_is_named_when_the_cluster_does_not_form(tmp_path):
  config = tiny_config(tmp_path / "run", registration_timeout=5)
  started = time.monotonic()
  with Cluster(str(tmp_path), ["--config", config_file(tmp_path, config)], started=1) as cluster:
    [code] = cluster.wait(timeout=FAULT_BOUND_SECONDS)
  took = time.monotonic() - started
  print(f"worker 0 alone exited {code} after {took:.1f} s")
  assert code == 1
  expected = (f"tpu.train: error: worker 0 ({cluster.addresses[0]}): the cluster of TF_CONFIG did not form "
              f"within 5 s: worker 1 ({cluster.addresses[1]}) never registered")
  assert expected in cluster.stderr(0), cluster.stderr(0)
  assert not os.path.exists(config.model_dir)   # nothing written


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  """MLM pre-training data in 3 `tfrecord:` shards (`tpu.data.shard_writer`); their example counts."""
  from tpu.data import shard_writer
  from tpu.data.demo import demo_corpus
  from tpu.data.demo import demo_words
  from zoo.text import write_vocab
  tmp_path = tmp_path_factory.mktemp("shards")
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("\n\n".join(demo_corpus()[:300]) + "\n", encoding="utf-8")
  write_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + demo_words(), str(tmp_path / "vocab.txt"))
  metadata = shard_writer.write_pretraining_data([str(corpus)], str(tmp_path / "vocab.txt"), 16,
                                                 str(tmp_path / "shards"), 3, progress=False)
  return types.SimpleNamespace(spec=f"tfrecord:{tmp_path}/shards/*.tfrecord",
                               counts={shard["file"]: shard["examples"] for shard in metadata["shards"]})


@pytest.mark.slow
@pytest.mark.parametrize("index, signum", [(1, signal.SIGKILL), (0, signal.SIGSTOP)],
                         ids=["kill-9-of-a-worker", "sigstop-of-the-chief"])
def test_a_lost_or_hung_peer_ends_every_other_worker_in_bounded_time(tmp_path, shards, index, signum):
  """A killed worker, or a stopped chief (alive but silent: only missing heartbeats tell), ends
  the other worker within the bound, with an error naming the lost one.

  The workers pre-train MLM on 3 shards: worker 0 reads shards 0 and 2, worker 1 shard 1, as
  each logs."""
  model_dir = tmp_path / "run"
  config = tiny_config(model_dir, task="mlm", model_overrides=dict(TINY_FUNNEL, num_decoder_layers=1),
                       data=shards.spec, steps=10_000, checkpoint_every=1000, max_predictions_per_seq=2)
  with Cluster(str(tmp_path), ["--config", config_file(tmp_path, config)]) as cluster:
    cluster.wait_for(lambda: len(training_records(model_dir)) >= 1)
    codes, took = stop_one(cluster, index, signum)
    if signum == signal.SIGSTOP:
      cluster.processes[index].send_signal(signal.SIGCONT)
  other = 1 - index
  print(f"signal {signum} to worker {index}: worker {other} exited {codes[other]} after {took[other]:.1f} s")
  assert codes[other] == 1
  assert f"lost worker {index} ({cluster.addresses[index]})" in cluster.stderr(other), \
      cluster.stderr(other)[-2000:]
  named = [f"{name} ({shards.counts[name]} examples)" for name in sorted(shards.counts)]
  read = [re.search(r"reads the shards (.*)", cluster.stderr(i)).group(1) for i in range(2)]
  assert read == [f"{named[0]}, {named[2]}", named[1]]
