"""The train step, the loop around it, and evaluation.

The step is exact under data parallelism: every replica normalises its loss by the
global count of examples or tokens (`Task.denominators`, all-reduced first), gradients
are summed over replicas and then clipped by their global norm, so N replicas follow
the trajectory of one device with the same global batch.

A step is a function of the weights, the batch and (seed, step number, replica): its
dropout masks and ELECTRA's samples are stateless draws seeded from those
(`zoo.layers.seeds`), and `TrainInput` keeps the input pipeline's position, which
checkpoints save. So a run resumed from a checkpoint repeats, step for step, the
losses of the run that was interrupted, on one device, several local replicas or
several workers. Not on a TPU: TensorFlow cannot save the position of its distributed
iterator, so a resumed TPU run starts a new shuffle (and says so at its start); its
random draws are still the interrupted run's.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tpu.optimization import make_optimizer
from tpu.tasks import get_task
from tpu.tasks.base import length_ladder
from zoo.layers import seeds
from zoo.logs import error_reason
from zoo.model_dir import MODEL_ROOT
from zoo.model_dir import OPTIMIZER_ROOT
from zoo.models import bucketing

if TYPE_CHECKING:
  from tpu.checkpointing import Checkpoints
  from tpu.checkpointing import SigtermFlag
  from tpu.config import TrainConfig
  from tpu.progress import Progress
  from tpu.progress import RunLog
  from tpu.strategy import Worker
  from tpu.tasks import Task

log = logging.getLogger("tpu.train")


class TrainingError(RuntimeError):
  """The run cannot go on (non-finite loss); the message says why and what was kept."""


def _model_inputs(model, features):
  return {name: features[name] for name in model.input}


class Trainer:
  """The model, optimizer and compiled train and eval functions of one run.

  Builds the model under `strategy.scope()` and the config's precision policy (the
  global policy is restored afterwards). `train_input` (a `TrainInput`) feeds the train
  function; a trainer without one evaluates only. `task` is the config's task object
  (`tpu.tasks.get_task`) when the caller has made it already (for the input pipeline).
  """

  def __init__(self, config: TrainConfig, strategy: Any, train_input: TrainInput | None = None,
               task: Task | None = None) -> None:
    self.config = config
    self.strategy = strategy
    self.task = task or get_task(config)
    previous_policy = keras.mixed_precision.global_policy()
    if config.mixed_precision == "bfloat16":
      keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
      with strategy.scope():
        self.model = self.task.build()
        self.optimizer, self.schedule = make_optimizer(config)
        items = dict(getattr(self.model, "checkpoint_items", {}))
        roots = {MODEL_ROOT: self.model, OPTIMIZER_ROOT: self.optimizer}
        self.checkpoint = tf.train.Checkpoint(**roots, **items)
        self.encoder = items.get("encoder")
        self.variables = self.model.trainable_variables
    finally:
      keras.mixed_precision.set_global_policy(previous_policy)
    # Length buckets: every replica of a step runs its batch at the ladder length that holds the step's
    # longest example (`zoo.models.bucketing`).
    ladder = length_ladder(config)
    self.capacities = [capacity for _, capacity in ladder] or None
    if ladder:
      self.task.encoder(self.model).use_length_buckets([length for length, _ in ladder],
                                                       padding_dependent=config.padding_dependent_buckets)
    # The forward and backward pass as a function of its own (off TPUs, which compile the whole
    # step anyway): the train function's first call creates the optimizer's slots, so TensorFlow
    # traces it twice, and the second trace reuses this function's graph instead of tracing the
    # model again.
    self._compute = self._compute_gradients
    self._forward, self._backward = self._outputs_at_bucket, self._gradients_of_outputs
    if not isinstance(strategy, tf.distribute.TPUStrategy):
      compiled = lambda fn: tf.function(fn, jit_compile=bool(config.jit_compile), autograph=False)  # noqa: E731
      self._compute, self._forward, self._backward = (compiled(self._compute_gradients),
                                                      compiled(self._outputs_at_bucket),
                                                      compiled(self._gradients_of_outputs))
    # A loss that all-gathers the replicas' outputs (the embed task's negatives): the collective runs in the
    # replica function itself, outside any nested function or switch, which MirroredStrategy requires.
    self._gathering = self.task.gathers_across_replicas and strategy.num_replicas_in_sync > 1
    self.stop_requested = False
    self.train_input = train_input
    self.train_steps = tf.function(self._train_steps, autograph=False)
    self.eval_step = tf.function(self._eval_step, autograph=False)

  @property
  def step(self) -> int:
    return int(self.optimizer.iterations.numpy())

  def learning_rate(self, step: int) -> float:
    """The learning rate the step after `step` - 1 used."""
    return float(self.schedule(step - 1))

  def _compute_gradients(self, features, denominators, seed, bucket=None):
    """The loss, statistics and gradients of the step; with `bucket` (length buckets), a `tf.switch_case`
    over the ladder lengths, each branch the whole forward and backward pass at its static length (so no
    gradient flows through the switch), and no gradient, as without buckets, for the variables the loss
    does not read (a tagger's pooler: the branches return zeros for them)."""
    return self._in_bucket(bucket, lambda index: self._gradients_at(features, denominators, seed, index))

  def _in_bucket(self, bucket, run):
    """`run(index)` -> `(values, gradients)` at ladder index `bucket` (a switch; None: `run(None)`)."""
    if bucket is None:
      return run(None)
    unread = []

    def branch(index):
      def at_index():
        *values, gradients = run(index)
        pattern = [gradient is None for gradient in gradients]
        if unread and unread != pattern:
          raise AssertionError(f"length bucket {index} reads other variables than bucket 0")
        unread[:] = pattern
        return (*values, [tf.zeros_like(variable) if gradient is None else gradient
                          for gradient, variable in zip(gradients, self.variables, strict=True)])
      return at_index

    *values, gradients = tf.switch_case(bucket, [branch(index) for index in range(len(self.capacities))])
    return (*values, [None if skip else gradient for gradient, skip in zip(gradients, unread, strict=True)])

  def _outputs_at_bucket(self, features, seed, bucket=None):
    """The model's training outputs (no tape), at ladder index `bucket` (a switch; None: `seq_length`)."""
    def at(index):
      with seeds.step_seeds(seed), bucketing.stepping(index):
        return self.model(_model_inputs(self.model, features), training=True)
    if bucket is None:
      return at(None)
    return tf.switch_case(bucket, [lambda index=index: at(index) for index in range(len(self.capacities))])

  def _gradients_of_outputs(self, features, seed, output_gradients, bucket=None):
    """The variables' gradients given the loss's gradient with respect to the model's outputs: the forward
    pass again with the same random draws, then its backward pass from `output_gradients`."""
    def run(index):
      with tf.GradientTape() as tape, seeds.step_seeds(seed), bucketing.stepping(index):
        outputs = self.model(_model_inputs(self.model, features), training=True)
      gradients = tape.gradient(outputs, self.variables, output_gradients=output_gradients)
      return ([None if gradient is None else tf.convert_to_tensor(gradient) for gradient in gradients],)
    return self._in_bucket(bucket, run)[0]

  def _gathering_gradients(self, features, denominators, seed, bucket):
    """The step's loss, statistics and gradients for a loss that all-gathers the replicas' outputs, in two
    passes (as GradCache and sentence-transformers' cached losses do): the outputs without a tape; the loss
    and its gradient with respect to this replica's outputs, in the replica function (the all-gather's
    gradient all-reduces, so it holds every replica's loss terms); the forward pass again, with the same
    random draws, and its backward pass from that gradient. The gradients are those of one pass, at the
    cost of a second forward pass."""
    outputs = self._forward(features, seed, bucket)
    with tf.GradientTape() as tape:
      tape.watch(outputs)
      loss, stats = self.task.loss_and_stats(features, outputs, denominators)
    output_gradients = tape.gradient(loss, outputs)
    return loss, stats, self._backward(features, seed, output_gradients, bucket)

  def _gradients_at(self, features, denominators, seed, index):
    """The forward and backward pass, the encoders at ladder index `index` (None: at `seq_length`)."""
    with tf.GradientTape() as tape, seeds.step_seeds(seed), bucketing.stepping(index):
      outputs = self.model(_model_inputs(self.model, features), training=True)
      loss, stats = self.task.loss_and_stats(features, outputs, denominators)
    gradients = tape.gradient(loss, self.variables)
    gradients = [None if gradient is None else tf.convert_to_tensor(gradient) for gradient in gradients]
    return loss, stats, gradients

  def _step_seed(self, context):
    """The seed of this step's random draws on this replica: (seed, step, replica)."""
    seed = tf.constant([self.config.seed, 0], tf.int64)
    seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(self.optimizer.iterations, tf.int64))
    return tf.random.experimental.stateless_fold_in(seed, tf.cast(context.replica_id_in_sync_group, tf.int64))

  def _replica_step(self, features):
    context = tf.distribute.get_replica_context()
    denominators = {name: context.all_reduce(tf.distribute.ReduceOp.SUM, value)
                    for name, value in self.task.denominators(features).items()}
    bucket = (None if self.capacities is None
              else bucketing.replicas_bucket(features["input_mask"], self.capacities))
    compute = self._gathering_gradients if self._gathering else self._compute
    loss, stats, gradients = compute(features, denominators, self._step_seed(context), bucket)
    pairs = [(gradient, variable) for gradient, variable in zip(gradients, self.variables, strict=True)
             if gradient is not None]
    summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [gradient for gradient, _ in pairs])
    clipped, _ = tf.clip_by_global_norm(summed, self.config.clip_norm)
    self.optimizer.apply_gradients(zip(clipped, [variable for _, variable in pairs], strict=True),
                                   experimental_aggregate_gradients=False)
    return loss, stats

  def _train_steps(self, iterator, num_steps, stop):
    """Runs `num_steps` steps; returns the sum of the losses and of the statistics over them, and
    the number of replicas whose worker passed `stop` = 1 (all-reduced, so every worker agrees)."""
    reduce = lambda value: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)   # noqa: E731

    def step(done, loss_sum, stats_sum):
      loss, stats = self.strategy.run(self._replica_step, args=(self.train_input.next(iterator),))
      stats_sum = tf.nest.map_structure(lambda total, value: total + reduce(value), stats_sum, stats)
      return done + 1, loss_sum + reduce(loss), stats_sum

    stats_sum = {name: (tf.constant(0.0), tf.constant(0.0)) for name in self.task.stat_names}
    _, loss_sum, stats_sum = tf.while_loop(lambda done, *_: done < num_steps, step,
                                           (tf.constant(0), tf.constant(0.0), stats_sum))
    stops = reduce(self.strategy.run(tf.identity, args=(stop,)))
    return loss_sum, stats_sum, stops

  def run_steps(self, count: int, stop: bool = False) -> dict[str, float]:
    """Runs `count` steps on the batches of the trainer's `train_input`; returns their mean loss and
    statistics as Python floats (NaN-checked).

    `stop` is this worker's wish to stop (SIGTERM); afterwards `stop_requested` says
    whether any worker of the cluster wished so, the same answer on every worker.
    """
    if self.train_input is None:
      raise ValueError("this Trainer has no train_input to train on")
    step = self.step
    loss_sum, stats_sum, stops = self.train_steps(self.train_input.iterator, tf.constant(count),
                                                  tf.constant(float(stop)))
    self.stop_requested = bool(stops.numpy() > 0)
    loss = float(loss_sum.numpy()) / count
    if not math.isfinite(loss):
      raise TrainingError(f"the loss became {loss} in steps {step + 1}..{step + count}")
    values = dict(loss=loss)
    for name, (numerator, denominator) in stats_sum.items():
      numerator, denominator = numerator.numpy(), denominator.numpy()
      values[name] = float(numerator / denominator) if denominator else float("nan")
    return values

  def _eval_step(self, features, stop):
    def replica(features):
      bucket = (None if self.capacities is None
                else bucketing.replicas_bucket(features["input_mask"], self.capacities))
      with bucketing.stepping(bucket):
        outputs = self.model(_model_inputs(self.model, features), training=False)
      return self.task.eval_outputs(features, outputs, self.task.denominators(features))
    stats, examples = self.strategy.run(replica, args=(features,))
    reduce = lambda value: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)   # noqa: E731
    stats = tf.nest.map_structure(reduce, stats)
    examples = tf.nest.map_structure(lambda value: self.strategy.gather(value, axis=0), examples)
    return stats, examples, reduce(self.strategy.run(tf.identity, args=(stop,)))

  def evaluate(self, dataset: Any, terminated: Callable[[], bool] = lambda: False) -> dict[str, float] | None:
    """Metrics over every example of a `pipeline.eval_dataset`, or of the distributed dataset of a
    `pipeline.eval_input_fn` (every worker gets the same metrics).

    `terminated()` is this worker's wish to stop (SIGTERM), all-reduced with every batch:
    when any worker wishes so, every worker stops evaluating and `stop_requested` is set
    (the result is then None).
    """
    totals: Any = None
    examples: dict[str, Any] = {}   # lists of arrays, then each concatenated
    self.stop_requested = False
    if isinstance(dataset, tf.data.Dataset):
      dataset = self.strategy.experimental_distribute_dataset(dataset)
    for features in dataset:
      stats, batch_examples, stops = self.eval_step(features, tf.constant(float(terminated())))
      if stops.numpy() > 0:
        self.stop_requested = True
        return None
      stats = tf.nest.map_structure(lambda value: value.numpy(), stats)
      totals = stats if totals is None else tf.nest.map_structure(np.add, totals, stats)
      for name, value in batch_examples.items():
        examples.setdefault(name, []).append(value.numpy())
    if totals is None:
      raise ValueError("the evaluation data holds no examples")
    examples = {name: np.concatenate(values) for name, values in examples.items()}
    return self.task.metrics(totals, examples)


class TrainInput:
  """This worker's training batches for the train step, and its input pipeline's position.

  `input_fn(context)` is `tpu.data.pipeline.train_input_fn`'s function. On one device,
  on several local replicas (`MirroredStrategy`) and on several workers
  (`MultiWorkerMirroredStrategy`) this worker's pipeline runs as a plain `tf.data`
  iterator, whose position `tf.train.Checkpoint` saves and restores (TensorFlow's
  distributed iterators cannot be checkpointed): the local replicas' batches come from
  it in turn, as a distributed iterator deals them. On a TPU the strategy's own
  distributed iterator feeds the chips (`checkpoint` is None: the position is not kept,
  and a resumed TPU run starts a new shuffle).

  A pipeline whose state TensorFlow cannot save (one fed by Python code: a data source
  registered by a user, TFDS's mock data) is found before the first step
  (`unsaved_reason`); its stream continues exactly all the same, by replay: a resumed run
  rebuilds it with the stream's seed and skips the `skip` batches the steps before took
  (each element of this worker's dataset is one step's batch), which costs the input
  work of those steps.
  """

  def __init__(self, strategy: Any, input_fn: Callable[..., Any], worker: Worker, skip: int = 0) -> None:
    replicas = strategy.num_replicas_in_sync
    self.strategy = strategy
    self.checkpoint: Any = None   # a `tf.train.Checkpoint` of the iterator, or None
    self.unsaved_reason: str | None = None
    self.local_replicas = 1
    if isinstance(strategy, tf.distribute.TPUStrategy):
      self.iterator = iter(strategy.distribute_datasets_from_function(input_fn))
      self.distributed = True
      self.unsaved_reason = "TensorFlow cannot save a TPU's distributed iterators"
      return
    self.distributed = False
    self.local_replicas = replicas // worker.count
    dataset = input_fn(tf.distribute.InputContext(worker.count, worker.index, replicas))
    if self.local_replicas > 1:
      dataset = dataset.batch(self.local_replicas, drop_remainder=True)   # one batch per local replica
    self.unsaved_reason = unsaved_reason(dataset)
    if skip:
      dataset = dataset.skip(skip)
    self.iterator = iter(dataset)
    if self.unsaved_reason is None:
      self.checkpoint = tf.train.Checkpoint(input=self.iterator)

  def next(self, iterator: Any) -> Any:
    """The next batch as `strategy.run` takes it (inside the train function)."""
    features = next(iterator)
    if self.distributed or self.local_replicas == 1:
      return features
    local = self.local_replicas
    return self.strategy.experimental_distribute_values_from_function(
        lambda context: tf.nest.map_structure(lambda value: value[context.replica_id_in_sync_group % local],
                                              features))

  def save(self, prefix: str) -> bool:
    """Writes the position under `prefix`; False (and no more positions: a resume replays) for a
    pipeline whose state TensorFlow cannot save after all."""
    try:
      self.checkpoint.write(prefix)
      return True
    except tf.errors.FailedPreconditionError as error:
      self.unsaved_reason = error_reason(error)
      log.warning("the input pipeline's position cannot be saved (%s): a resumed run replays its batches "
                  "from the stream's start", self.unsaved_reason)
      self.checkpoint = None
      for path in tf.io.gfile.glob(prefix + "*"):
        tf.io.gfile.remove(path)
      return False

  def restore(self, prefix: str) -> None:
    """Continues from the position saved under `prefix`; a ValueError says why it does not fit."""
    if self.checkpoint is None:
      raise ValueError(f"the input position {prefix} cannot be restored: this run's input pipeline cannot "
                       f"save or restore one ({self.unsaved_reason}); add --reset-input to continue the "
                       "model with a new input stream")
    try:
      self.checkpoint.read(prefix).assert_consumed()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
      reason = error_reason(error)
      raise ValueError(f"the input position {prefix} does not fit this run's input pipeline "
                       f"({type(error).__name__}: {reason}): rerun with the settings it was saved with, or "
                       "add --reset-input to continue the model with a new input stream") from None


def unsaved_reason(dataset: Any) -> str | None:
  """Why TensorFlow cannot save the position of `dataset`'s iterators (a stateful op such as a
  Python function), or None when it can."""
  try:
    dataset._as_serialized_graph(external_state_policy=tf.data.experimental.ExternalStatePolicy.FAIL)
  except (tf.errors.FailedPreconditionError, tf.errors.UnimplementedError) as error:
    reason = re.sub(r"^\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\].*$", "", error_reason(error))
    return reason.replace("Failed to serialize the input pipeline graph: ", "").rstrip(".") or reason
  return None


def train_loop(trainer: Trainer, config: TrainConfig, checkpoints: Checkpoints, run_log: RunLog,
               progress: Progress, signals: SigtermFlag,
               evaluate: Callable[[int], Any] | None = None) -> None:
  """Trains from the trainer's step to `config.steps`.

  Executions of up to `steps_per_execution` steps never cross a checkpoint step; after
  each, the values are logged, a due checkpoint is saved, SIGTERM is honoured (save,
  then `Preempted`) and a due evaluation runs. Whether any worker got SIGTERM is
  all-reduced with the execution's losses, so all workers save the same step and stop.
  A non-finite loss raises `TrainingError` before anything is saved, so the last
  checkpoint stays the last good one.
  """
  from tpu.checkpointing import Preempted

  step = trainer.step
  while step < config.steps:
    count = min(config.steps_per_execution, config.steps - step, checkpoints.next_due(step) - step)
    try:
      values = trainer.run_steps(count, stop=signals.terminated)
    except TrainingError as error:
      kept = checkpoints.latest or "none saved yet"
      raise TrainingError(f"{error}; the run stopped without saving, so the last checkpoint ({kept}) is "
                          "the last good one. Lower --learning-rate, raise --warmup-steps, or check the "
                          "data") from None
    step = trainer.step
    run_log.training(step, trainer.learning_rate(step), values)
    progress.update(count, values)
    stop = trainer.stop_requested
    if step % config.checkpoint_every == 0 or step == config.steps or stop:
      checkpoints.save(step)
    if stop:
      who = "" if signals.terminated else " on another worker"
      raise Preempted(f"SIGTERM{who}: saved a checkpoint at step {step}; rerun the same command to resume")
    if evaluate is not None and config.eval_every and step % config.eval_every == 0 and step < config.steps:
      evaluate(step)
