"""The training job: pre-train (mlm, electra) or fine-tune (classify, regress) a zoo model.

  python -m tpu.train --model funnel_b4_4_4 --task classify --data tfds:glue/sst2 \\
      --model-dir gs://bucket/sst2 --tpu local --batch-size 128 --steps 5000

Runs under the strategy `tpu.strategy.get_strategy(--tpu)` picks (TPU, several GPUs,
several workers, or one device) through the same code. What it writes to MODEL_DIR:

  config.json         the resolved settings (defaults < --config FILE < flags) and the
                      data's metadata (classes, label names, sentence pairs)
  vocab.txt           the WordPiece vocabulary (given by --vocab, taken from the
                      --init-checkpoint's directory, or learned from the training text)
  checkpoints/        `tf.train.CheckpointManager` checkpoints: model, optimizer, step
  train/, eval/       TensorBoard summaries
  history.jsonl       one JSON line per logged training step and per evaluation
  eval_results.json   the final evaluation metrics
  export/<version>/   the SavedModel for serving (`export.saved_model`)

Rerunning the same command resumes from the latest checkpoint (a changed model
setting is refused). A NaN or infinite loss stops the run without saving, so the last
checkpoint stays the last good one. SIGTERM (e.g. a preempted VM) saves a checkpoint
and exits with status 143; rerun to resume. Progress goes to stderr, the final metrics
as JSON to stdout.

The step is exact under data parallelism: every replica normalises its loss by the
global count of examples or tokens, gradients are summed over replicas and then
clipped by their global norm, so N replicas follow the trajectory of one device with
the same global batch.
"""

import argparse
import json
import logging
import math
import os
import signal
import sys
import time

import tensorflow as tf
import tf_keras as keras

from tpu import data
from tpu import pipeline
from tpu import strategy as strategies
from tpu.checkpoints import find_checkpoint  # noqa: F401  (part of this module's interface)
from tpu.checkpoints import restore_encoder
from tpu.config import CHECKPOINT_DIR
from tpu.config import CONFIG_FILE
from tpu.config import EXPORT_DIR
from tpu.config import MIXED_PRECISIONS
from tpu.config import TASKS
from tpu.config import VOCAB_FILE
from tpu.config import TrainConfig
from tpu.config import check_resumable
from tpu.tasks import get_task
from zoo import presets
from zoo.text import TextEncoder
from zoo.text import learn_vocab
from zoo.text import load_vocab
from zoo.text import write_vocab

log = logging.getLogger("tpu.train")

HISTORY_FILE = "history.jsonl"
EVAL_RESULTS_FILE = "eval_results.json"
PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM
# Examples read to learn a vocabulary when none is given.
VOCAB_EXAMPLES = 200_000
# Weights without decay (BERT): layer-norm scales and offsets, and biases.
NO_WEIGHT_DECAY = ["norm/gamma", "norm/beta", "bias"]


class TrainingError(RuntimeError):
  """The run cannot go on (non-finite loss); the message says why and what was kept."""


class Preempted(RuntimeError):
  """SIGTERM arrived; a checkpoint was saved."""


# ---------------------------------------------------------------------------------------------
# Setting up: data, vocabulary, config.


def _load_kwargs(config, spec):
  kwargs = {}
  scheme = spec.partition(":")[0]
  if scheme in ("tsv", "csv", "jsonl"):
    kwargs.update(text_columns=config.text_columns, label_column=config.label_column)
    kwargs["task_type"] = {"classify": "classification", "regress": "regression"}.get(config.task, "text")
  if scheme == "tfds":
    kwargs.update(text_columns=config.text_columns, label_column=config.label_column,
                  data_dir=config.data_dir)
  return {key: value for key, value in kwargs.items() if value is not None}


def load_sources(config):
  """The training source and the evaluation source (None when there is none)."""
  task = get_task(config)
  train = data.load(config.data, "train", **_load_kwargs(config, config.data))
  if task.data_type != "text" and train.task_type != task.data_type:
    other = {"classification": "classify", "regression": "regress"}.get(train.task_type)
    hint = f": use --task {other}" if other else ""
    raise ValueError(f"task {config.task!r} needs {task.data_type} data, but {config.data} is "
                     f"{train.task_type}{hint}")
  spec = config.eval_data
  if spec is None and config.data.partition(":")[0] in ("tfds", "demo"):
    spec = config.data
  evaluation = None
  if spec is not None:
    kwargs = _load_kwargs(config, spec)
    if task.data_type == "classification" and spec.partition(":")[0] != "demo":
      kwargs["label_names"] = train.label_names
    evaluation = data.load(spec, "validation", **kwargs)
    if evaluation.sentence_pair != train.sentence_pair:
      raise ValueError(f"{spec} and {config.data} differ: one has sentence pairs, the other single texts")
  return train, evaluation


def _init_checkpoint_dir(path):
  return path if tf.io.gfile.isdir(path) else os.path.dirname(path)


def resolve_vocab(config, train):
  """The vocabulary: the model dir's (resuming), --vocab, the init checkpoint's, or learned."""
  saved = os.path.join(config.model_dir, VOCAB_FILE)
  if tf.io.gfile.exists(saved):
    return load_vocab(saved), saved
  if config.vocab:
    return load_vocab(config.vocab), config.vocab
  if config.init_checkpoint:
    for folder in (_init_checkpoint_dir(config.init_checkpoint),
                   os.path.dirname(_init_checkpoint_dir(config.init_checkpoint).rstrip("/"))):
      candidate = os.path.join(folder, VOCAB_FILE)
      if folder and tf.io.gfile.exists(candidate):
        return load_vocab(candidate), candidate
    raise ValueError(f"--init-checkpoint {config.init_checkpoint} has no {VOCAB_FILE} beside it: pass the "
                     "vocabulary the checkpoint was trained with as --vocab")
  texts = train.dataset.take(VOCAB_EXAMPLES)
  texts = texts.flat_map(lambda example: tf.data.Dataset.from_tensor_slices(
      tf.stack([example[key] for key in ("text_a", "text_b") if key in example])))
  progress = lambda message: log.info("vocabulary: %s", message)   # noqa: E731
  return learn_vocab(texts, config.vocab_size, lower_case=config.lower_case, progress=progress), None


def write_atomically(path, text):
  """Writes a small text file under a temporary name and renames it (local or gs:// paths)."""
  folder = os.path.dirname(path)
  temporary = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
  with tf.io.gfile.GFile(temporary, "w") as file:
    file.write(text)
  tf.io.gfile.rename(temporary, path, overwrite=True)


def prepare(config):
  """Validates the config, loads the data and vocabulary, and writes the model dir's files.

  Returns:
    (config with data metadata and vocabulary size filled in, vocabulary, train source,
    evaluation source or None).
  """
  config = config.validate()
  train, evaluation = load_sources(config)
  vocab, vocab_path = resolve_vocab(config, train)
  if config.task == "classify":
    config = config.replace(num_classes=train.num_classes, label_names=list(train.label_names))
  elif config.task == "regress":
    config = config.replace(num_classes=1, label_names=None)
  config = config.replace(sentence_pair=train.sentence_pair, vocab_size=len(vocab))
  tf.io.gfile.makedirs(config.model_dir)
  saved_config = os.path.join(config.model_dir, CONFIG_FILE)
  if tf.io.gfile.exists(saved_config):
    check_resumable(TrainConfig.from_file(saved_config), config)
  if vocab_path != os.path.join(config.model_dir, VOCAB_FILE):
    write_vocab(vocab, os.path.join(config.model_dir, VOCAB_FILE))
  write_atomically(saved_config, json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
  return config, vocab, train, evaluation


# ---------------------------------------------------------------------------------------------
# Model, optimizer, checkpoints.


def make_optimizer(config):
  """AdamW (BERT's AdamWeightDecay) with linear warmup and linear decay, from Model Garden.

  Gradient clipping is done by the train step on the summed gradients, so the
  optimizer's own (per-replica) clipping is off.
  """
  from official.modeling import optimization

  optimization_config = optimization.OptimizationConfig({
      "optimizer": {"type": "adamw", "adamw": {
          "weight_decay_rate": config.weight_decay, "exclude_from_weight_decay": NO_WEIGHT_DECAY,
          "epsilon": 1e-6, "gradient_clip_norm": 0.0}},
      "learning_rate": {"type": "polynomial", "polynomial": {
          "initial_learning_rate": config.learning_rate, "decay_steps": config.steps,
          "end_learning_rate": config.end_learning_rate, "power": 1.0}},
      "warmup": {"type": "linear", "linear": {"warmup_steps": config.warmup_steps}},
  })
  factory = optimization.OptimizerFactory(optimization_config)
  schedule = factory.build_learning_rate()
  return factory.build_optimizer(schedule), schedule


# ---------------------------------------------------------------------------------------------
# Steps.


def _model_inputs(model, features):
  return {name: features[name] for name in model.input}


class Trainer:
  """The model, optimizer and compiled train and eval functions of one run."""

  def __init__(self, config, strategy):
    self.config = config
    self.strategy = strategy
    self.task = get_task(config)
    with strategy.scope():
      self.model = self.task.build()
      self.optimizer, self.schedule = make_optimizer(config)
      items = dict(getattr(self.model, "checkpoint_items", {}))
      self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, **items)
      self.encoder = items.get("encoder")
      self.variables = self.model.trainable_variables
      # Slots now, not on the first step: a tf.function that creates variables is traced twice.
      self.optimizer._create_all_weights(self.variables)
    compute = self._compute_gradients
    if config.jit_compile and not isinstance(strategy, tf.distribute.TPUStrategy):
      compute = tf.function(compute, jit_compile=True)   # TPUs compile the whole step anyway
    self._compute = compute
    self.train_steps = tf.function(self._train_steps)
    self.eval_step = tf.function(self._eval_step)

  @property
  def step(self):
    return int(self.optimizer.iterations.numpy())

  def _compute_gradients(self, features, denominators):
    with tf.GradientTape() as tape:
      outputs = self.model(_model_inputs(self.model, features), training=True)
      loss, stats = self.task.loss_and_stats(features, outputs, denominators)
    gradients = tape.gradient(loss, self.variables)
    gradients = [None if gradient is None else tf.convert_to_tensor(gradient) for gradient in gradients]
    return loss, stats, gradients

  def _replica_step(self, features):
    context = tf.distribute.get_replica_context()
    denominators = {name: context.all_reduce(tf.distribute.ReduceOp.SUM, value)
                    for name, value in self.task.denominators(features).items()}
    loss, stats, gradients = self._compute(features, denominators)
    pairs = [(gradient, variable) for gradient, variable in zip(gradients, self.variables, strict=True)
             if gradient is not None]
    summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [gradient for gradient, _ in pairs])
    clipped, _ = tf.clip_by_global_norm(summed, self.config.clip_norm)
    self.optimizer.apply_gradients(zip(clipped, [variable for _, variable in pairs], strict=True),
                                   experimental_aggregate_gradients=False)
    return loss, stats

  def _train_steps(self, iterator, num_steps):
    """Runs `num_steps` steps; returns the sum of the losses and of the statistics over them."""
    reduce = lambda value: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)   # noqa: E731
    loss_sum = tf.constant(0.0)
    stats_sum = {name: (tf.constant(0.0), tf.constant(0.0)) for name in self.task.stat_names}
    for _ in tf.range(num_steps):
      loss, stats = self.strategy.run(self._replica_step, args=(next(iterator),))
      loss_sum += reduce(loss)
      stats_sum = tf.nest.map_structure(lambda total, value: total + reduce(value), stats_sum, stats)
    return loss_sum, stats_sum

  def _eval_step(self, features):
    def replica(features):
      outputs = self.model(_model_inputs(self.model, features), training=False)
      return self.task.eval_outputs(features, outputs, self.task.denominators(features))
    stats, examples = self.strategy.run(replica, args=(features,))
    stats = tf.nest.map_structure(
        lambda value: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), stats)
    examples = tf.nest.map_structure(lambda value: self.strategy.gather(value, axis=0), examples)
    return stats, examples

  def evaluate(self, dataset):
    """Metrics over every example of a `pipeline.eval_dataset`."""
    import numpy as np

    totals, examples = None, {}
    for features in self.strategy.experimental_distribute_dataset(dataset):
      stats, batch_examples = self.eval_step(features)
      stats = tf.nest.map_structure(lambda value: value.numpy(), stats)
      totals = stats if totals is None else tf.nest.map_structure(np.add, totals, stats)
      for name, value in batch_examples.items():
        examples.setdefault(name, []).append(value.numpy())
    if totals is None:
      raise ValueError("the evaluation data holds no examples")
    examples = {name: np.concatenate(values) for name, values in examples.items()}
    return self.task.metrics(totals, examples)


# ---------------------------------------------------------------------------------------------
# The run.


class _Progress:
  """Progress on stderr: a tqdm bar on a terminal, else a log line every `LOG_SECONDS` (for log files)."""

  LOG_SECONDS = 10.0

  def __init__(self, total, initial):
    self.total, self.step, self.initial = total, initial, initial
    self.bar = None
    if sys.stderr.isatty():
      from tqdm import tqdm
      self.bar = tqdm(total=total, initial=initial, unit="step", file=sys.stderr, dynamic_ncols=True)
    self.started = self.last_log = time.monotonic()

  def update(self, steps, values):
    self.step += steps
    shown = " ".join(f"{name}={value:.4g}" for name, value in values.items())
    if self.bar is not None:
      self.bar.set_postfix_str(shown, refresh=False)
      self.bar.update(steps)
      return
    now = time.monotonic()
    if now - self.last_log >= self.LOG_SECONDS or self.step == self.total:
      rate = (self.step - self.initial) / max(now - self.started, 1e-9)
      remaining = (self.total - self.step) / rate if rate else float("inf")
      print(f"step {self.step}/{self.total} ({100 * self.step // self.total}%), {rate:.2f} steps/s, "
            f"{remaining:.0f} s left: {shown}", file=sys.stderr, flush=True)
      self.last_log = now

  def close(self):
    if self.bar is not None:
      self.bar.close()


class _Signals:
  """Turns SIGTERM into a flag the loop checks between executions (main thread only)."""

  def __init__(self):
    self.terminated = False
    self._previous = None

  def __enter__(self):
    import threading
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    return self

  def _handle(self, signum, frame):
    self.terminated = True

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


def _append_history(model_dir, record):
  with tf.io.gfile.GFile(os.path.join(model_dir, HISTORY_FILE), "a") as file:
    file.write(json.dumps(record) + "\n")


def run(config, strategy=None, export=None):
  """Runs the job of `config`; returns the final evaluation metrics (or {} without eval data).

  Args:
    config: a `TrainConfig`.
    strategy: the strategy to use; by default `get_strategy(config.tpu)`.
    export: export a SavedModel at the end; by default `config.export`.

  Raises:
    TrainingError: the loss became NaN or infinite.
    Preempted: SIGTERM arrived (a checkpoint was saved first).
  """
  config, vocab, train_source, eval_source = prepare(config)
  strategy = strategy or strategies.get_strategy(config.tpu)
  keras.utils.set_random_seed(config.seed)   # initial weights, dropout and ELECTRA's sampling
  if config.batch_size % strategy.num_replicas_in_sync:
    raise ValueError(f"batch_size {config.batch_size} must be divisible by the "
                     f"{strategy.num_replicas_in_sync} replicas")
  previous_policy = keras.mixed_precision.global_policy()
  if config.mixed_precision == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    trainer = Trainer(config, strategy)
  finally:
    keras.mixed_precision.set_global_policy(previous_policy)
  manager = tf.train.CheckpointManager(trainer.checkpoint, os.path.join(config.model_dir, CHECKPOINT_DIR),
                                       max_to_keep=config.keep_checkpoints,
                                       step_counter=trainer.optimizer.iterations)
  if manager.latest_checkpoint:
    trainer.checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
    log.info("resumed from %s (step %d)", manager.latest_checkpoint, trainer.step)
  elif config.init_checkpoint:
    if trainer.encoder is None:
      raise ValueError(f"--init-checkpoint needs a model with an encoder; {config.task} has none")
    prefix = restore_encoder(trainer.encoder, config.init_checkpoint)
    log.info("encoder initialised from %s", prefix)

  text_encoder = TextEncoder(vocab, seq_length=config.seq_length, lower_case=config.lower_case)
  eval_data = None
  if eval_source is not None:
    eval_data = pipeline.eval_dataset(eval_source.dataset, trainer.task, text_encoder, config.eval_batch_size,
                                      seed=config.seed)
  start = trainer.step
  train_data = pipeline.train_dataset(train_source.dataset, trainer.task, text_encoder, config.batch_size,
                                      shuffle_buffer=config.shuffle_buffer, seed=config.seed + start)
  iterator = iter(strategy.experimental_distribute_dataset(train_data))
  writer = tf.summary.create_file_writer(os.path.join(config.model_dir, "train"))
  eval_writer = tf.summary.create_file_writer(os.path.join(config.model_dir, "eval"))

  def evaluate(step):
    results = trainer.evaluate(eval_data)
    with eval_writer.as_default(step=step):
      for name, value in results.items():
        tf.summary.scalar(name, value)
    _append_history(config.model_dir, dict(step=step, eval=results))
    return results

  log.info("training %s on %s for %d steps (from step %d), global batch %d over %d replica(s)",
           config.model, config.data, config.steps, start, config.batch_size, strategy.num_replicas_in_sync)
  progress = _Progress(config.steps, start)
  started = time.monotonic()
  with _Signals() as signals:
    try:
      step = start
      while step < config.steps:
        next_checkpoint = (step // config.checkpoint_every + 1) * config.checkpoint_every
        count = min(config.steps_per_execution, config.steps - step, next_checkpoint - step)
        loss_sum, stats_sum = trainer.train_steps(iterator, tf.constant(count))
        loss = float(loss_sum.numpy()) / count
        if not math.isfinite(loss):
          kept = manager.latest_checkpoint or "none saved yet"
          raise TrainingError(f"the loss became {loss} in steps {step + 1}..{step + count}; the run stopped "
                              f"without saving, so the last checkpoint ({kept}) is the last good one. Lower "
                              "--learning-rate, raise --warmup-steps, or check the data")
        step = trainer.step
        values = dict(loss=loss)
        values.update({name: float(numerator / denominator) if denominator else float("nan")
                       for name, (numerator, denominator) in tf.nest.map_structure(
                           lambda value: value.numpy(), stats_sum).items()})
        learning_rate = float(trainer.schedule(step - 1))
        with writer.as_default(step=step):
          for name, value in values.items():
            tf.summary.scalar(name, value)
          tf.summary.scalar("learning_rate", learning_rate)
        _append_history(config.model_dir, dict(step=step, learning_rate=learning_rate, **values))
        progress.update(count, values)
        if step % config.checkpoint_every == 0 or step == config.steps or signals.terminated:
          manager.save(checkpoint_number=step)
        if signals.terminated:
          raise Preempted(f"SIGTERM: saved a checkpoint at step {step}; rerun the same command to resume")
        if (config.eval_every and eval_data is not None and step % config.eval_every == 0
            and step < config.steps):
          evaluate(step)
    finally:
      progress.close()
      writer.flush()
  if manager.latest_checkpoint is None or not manager.latest_checkpoint.endswith(f"-{trainer.step}"):
    manager.save(checkpoint_number=trainer.step)
  elapsed = time.monotonic() - started
  log.info("trained to step %d in %.1f s", trainer.step, elapsed)

  results = {}
  if eval_data is not None:
    results = evaluate(trainer.step)
    write_atomically(os.path.join(config.model_dir, EVAL_RESULTS_FILE),
                     json.dumps(dict(step=trainer.step, **results), indent=2) + "\n")
  if config.export if export is None else export:
    from export import saved_model
    path = saved_model.export(config.model_dir, os.path.join(config.model_dir, EXPORT_DIR))
    log.info("exported the SavedModel to %s", path)
    results = dict(results, export=path)
  return results


# ---------------------------------------------------------------------------------------------
# Command line.


def _key_value(text):
  key, separator, value = text.partition("=")
  if not separator or not key:
    raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
  try:
    return key, json.loads(value)
  except json.JSONDecodeError:
    return key, value


def parser():
  defaults = TrainConfig()
  p = argparse.ArgumentParser(
      prog="python -m tpu.train", description=__doc__.split("\n\n")[0],
      epilog="Settings can also come from --config FILE (a JSON object with the same names, "
             "underscores for dashes); flags override the file.")
  add = p.add_argument
  add("--config", metavar="FILE", help="JSON file of settings")
  add("--model", metavar="PRESET", help=f"encoder preset; one of: {', '.join(presets.names())}")
  add("--model-override", dest="model_overrides", action="append", type=_key_value, metavar="KEY=VALUE",
      help="encoder argument over the preset's (JSON value), e.g. hidden_size=256; repeatable")
  add("--task", choices=TASKS, help="what to train")
  add("--data", metavar="SPEC", help="training data: tfds:NAME[/CONFIG], tsv:PATH, csv:PATH, jsonl:PATH, "
      "text:GLOB or demo (see tpu/README.md)")
  add("--eval-data", metavar="SPEC",
      help="evaluation data (default: the validation split of tfds and demo data)")
  add("--text-columns", nargs="+", metavar="NAME", help="one or two text columns of table files")
  add("--label-column", metavar="NAME", help="label column of table files (default: label)")
  add("--data-dir", metavar="DIR", help="TFDS data directory")
  add("--model-dir", metavar="DIR", help="where checkpoints, summaries, config and export go (local or gs://)")
  add("--tpu", metavar="NAME", help="'local' (Colab, TPU VM) or a TPU name/address; omit for GPU/CPU")
  add("--steps", type=int, help=f"total training steps (default {defaults.steps})")
  add("--batch-size", type=int, help=f"GLOBAL batch size over all replicas (default {defaults.batch_size})")
  add("--eval-batch-size", type=int, help="global evaluation batch size (default: --batch-size)")
  add("--seq-length", type=int, help=f"tokens per example, static (default {defaults.seq_length})")
  add("--learning-rate", type=float, help=f"peak learning rate (default {defaults.learning_rate})")
  add("--warmup-steps", type=int, help="linear warmup steps (default: 10%% of --steps)")
  add("--weight-decay", type=float, help=f"AdamW weight decay (default {defaults.weight_decay})")
  add("--clip-norm", type=float, help=f"global gradient-norm clip (default {defaults.clip_norm})")
  add("--mixed-precision", choices=MIXED_PRECISIONS, help="compute dtype policy (default float32)")
  add("--steps-per-execution", type=int, help="steps per host call of the compiled loop (default 1; "
      "raise it on TPUs)")
  add("--jit-compile", action=argparse.BooleanOptionalAction, default=None,
      help="XLA-compile the forward and backward pass on CPU/GPU (TPUs always compile)")
  add("--checkpoint-every", type=int, help=f"steps between checkpoints (default {defaults.checkpoint_every})")
  add("--keep-checkpoints", type=int, help=f"checkpoints kept (default {defaults.keep_checkpoints})")
  add("--eval-every", type=int, help="steps between evaluations during training (default 0: at the end)")
  add("--init-checkpoint", metavar="PATH", help="initialise the encoder from a pre-training model dir, "
      "a `python -m zoo.convert` output dir or a checkpoint prefix")
  add("--vocab", metavar="FILE", help="WordPiece vocabulary (default: the init checkpoint's, else learned "
      "from the training text)")
  add("--vocab-size", type=int, help=f"size of a learned vocabulary (default {defaults.vocab_size})")
  add("--lower-case", action=argparse.BooleanOptionalAction, default=None, help="uncased text (default: on)")
  add("--max-predictions-per-seq", type=int, help="MLM predictions per sequence (default: 15%% of "
      "--seq-length, rounded up)")
  add("--whole-word-masking", action=argparse.BooleanOptionalAction, default=None, help="mask whole words")
  add("--discriminator-weight", type=float, help="ELECTRA's λ (default 50)")
  add("--dropout", type=float, help="dropout of the encoder and head (default: the preset's, 0.1)")
  add("--seed", type=int, help="shuffling, masking and initialisation seed (default 0)")
  add("--export", action=argparse.BooleanOptionalAction, default=None,
      help="export a SavedModel at the end (default: on)")
  add("-v", "--verbose", action="store_true", help="log more")
  return p


def config_from_args(args):
  """defaults < --config FILE < flags."""
  config = TrainConfig.from_file(args.config) if args.config else TrainConfig()
  values = {key: value for key, value in vars(args).items()
            if value is not None and key not in ("config", "verbose")}
  if "model_overrides" in values:
    values["model_overrides"] = {**config.model_overrides, **dict(values["model_overrides"])}
  return config.replace(**values)


def main(argv=None):
  args = parser().parse_args(argv)
  logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                      format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
  for noisy in ("absl", "tensorflow"):
    logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
  try:
    results = run(config_from_args(args))
  except Preempted as error:
    print(f"tpu.train: {error}", file=sys.stderr)
    return PREEMPTED_EXIT_CODE
  except (ValueError, FileNotFoundError, TrainingError, data.DataError, RuntimeError) as error:
    print(f"tpu.train: error: {error}", file=sys.stderr)
    return 2 if isinstance(error, (ValueError, FileNotFoundError)) else 1
  json.dump(results, sys.stdout, indent=2)
  print()
  return 0


if __name__ == "__main__":
  sys.exit(main())
