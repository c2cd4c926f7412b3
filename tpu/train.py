"""The training job: pre-train (mlm, electra) or fine-tune (classify, regress, multiple_choice, embed,
tag, squad) a zoo model.

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
  eval_predictions.json  the final evaluation's predictions where an outside script
                      scores them (SQuAD's answers, eval_null_odds.json for v2.0; the
                      tags of every evaluation sentence)
  export/<version>/   the SavedModel for serving (`export.saved_model`)

With `--init-checkpoint DIR` (a pre-training run or a `python -m zoo.convert` output)
the encoder, its vocabulary and casing come from DIR; `--model` may be omitted, and one
that builds other weights is refused with the differing settings named.

Rerunning the same command resumes from the latest checkpoint (a changed model
setting is refused, and so is a changed input setting unless `--reset-input`). A rerun
of a run that has trained all its `--steps` evaluates and exports it again under the
same checks, and leaves config.json, the record of the settings it trained with, as it
is. A NaN or infinite loss stops the run without saving, so the last
checkpoint stays the last good one. SIGTERM (e.g. a preempted VM) saves a checkpoint
and exits with status 143; rerun to resume. Progress goes to stderr, the final metrics
as JSON to stdout.

On several machines, run the same command on each with a `TF_CONFIG` naming the
cluster (MultiWorkerMirroredStrategy): only the chief writes MODEL_DIR, SIGTERM to any
worker stops all of them after a checkpoint, and a lost worker makes the others exit
with status 1 naming it; rerun all workers to resume (tpu/README.md).

The job in parts: this module is the command line and `run`, which wires the rest
together: `tpu.prepare` (settings, data, vocabulary, model dir files), `tpu.trainer`
(the exact multi-replica step, the loop, evaluation), `tpu.optimization` (AdamW),
`tpu.checkpointing` (resume or initialise, SIGTERM), `tpu.progress` (progress bar,
summaries, history) and `tpu.serving` (the final export). The tasks are `tpu.tasks`.
TensorFlow is imported after the arguments are parsed: `--help` answers at once, and
TensorFlow's C++ log lines stay hidden unless `-v`.
"""

import argparse
import functools
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from tpu import data
from tpu import tasks
from tpu.config import MIXED_PRECISIONS
from tpu.config import TrainConfig
from zoo import presets
from zoo.logs import command_name
from zoo.logs import error_prefix

log = logging.getLogger("tpu.train")


def run(config: TrainConfig, strategy: Any = None, export: bool | None = None,
        reset_input: bool = False) -> dict[str, float]:
  """Runs the job of `config`; returns the final evaluation metrics (or {} without eval data).

  Args:
    config: a `TrainConfig`.
    strategy: the strategy to use; by default `get_strategy(config.tpu, config.fault_bounds())`.
    export: export a SavedModel at the end; by default `config.export`.
    reset_input: a resumed run whose saved input position belongs to other data settings
      continues the model with a new input stream (with a warning) instead of refusing.

  Raises:
    InputStreamChanged: (a ValueError) resuming with other data settings than the saved
      input position's, without `reset_input`; the message names each difference.
    TrainingError: the loss became NaN or infinite.
    Preempted: SIGTERM arrived on this or another worker (a checkpoint was saved first).
    WorkerLost: another worker of a multi-worker run stopped answering (killed, crashed), or the
      cluster did not form (the message names the workers that never registered).
    WorkerTooSlow: a collective timed out while every worker was alive (raise
      `collective_timeout`).
  """
  import tensorflow as tf

  from tpu import strategy as strategies
  from tpu.checkpointing import SigtermFlag

  with SigtermFlag() as signals:   # from the start: SIGTERM in any phase stops every worker alike
    # First: MultiWorkerMirroredStrategy can only be made before TensorFlow runs any op.
    strategy = strategy or strategies.get_strategy(config.tpu, config.fault_bounds())
    signals.arm()
    worker = strategies.worker(strategy)
    with strategies.lost_workers_named(worker):   # a lost peer: WorkerLost naming it, never a hang
      # The job's models, input pipelines and step functions are graph code without Python
      # control flow on tensors: AutoGraph stays off for all of them (3 s less CPU to start).
      try:
        return tf.autograph.experimental.do_not_convert(_run)(config, strategy, worker, export, signals,
                                                              reset_input)
      except tf.errors.OperatorNotAllowedInGraphError as error:
        error.add_note(f"python -m tpu.train runs task {config.task!r} and its data with AutoGraph off: "
                       "a branch or loop on a tensor's value needs tf.cond, tf.where or tf.while_loop "
                       "(DESIGN.md, \"TPU-friendly graphs\")")
        raise


def _run(config, strategy, worker, export, signals, reset_input):
  """The job under `strategy`, step by step. Nothing is written before every check has passed: the input
  stream to resume is checked before the model is built, and config.json is written only once the
  checkpoint and the input position are restored."""
  prepared = _checked_preparation(config, strategy, worker)
  start, stream, resume = _input_to_resume(prepared, strategy, worker, reset_input)
  text_encoder, train_input, trainer = _build_training(prepared, strategy, worker, resume)
  checkpoints = _restore(prepared, trainer, train_input, worker, start, stream, resume)
  _write_run_files(prepared, worker, start)
  eval_data = _evaluation_input(prepared, strategy, trainer, text_encoder)
  run_log = _run_log(prepared.model_dir, worker, start)
  evaluate = None
  if eval_data is not None:
    evaluate = functools.partial(_evaluate, trainer, eval_data, checkpoints, run_log, signals)
  _train(prepared.config, strategy, worker, trainer, checkpoints, run_log, signals, start, evaluate)
  return _finish(prepared, worker, trainer, evaluate, signals,
                 prepared.config.export if export is None else export)


def _checked_preparation(config, strategy, worker):
  """The `tpu.prepare.Prepared` run, its files not written yet, once the data and the batch size suit the
  strategy's devices and workers; seeds the initial weights."""
  import tf_keras as keras

  from tpu.data import pipeline
  from tpu.prepare import prepare

  prepared = prepare(config, worker=worker, write=False)   # written once the resume checks pass
  config = prepared.config
  _check_tpu_hosts(strategy, prepared)
  pipeline.check_input(prepared.train, worker.count)   # no input pipeline without examples
  keras.utils.set_random_seed(config.seed)   # initial weights
  if config.batch_size % strategy.num_replicas_in_sync:
    raise ValueError(f"batch_size {config.batch_size} must be divisible by the "
                     f"{strategy.num_replicas_in_sync} replicas")
  return prepared


def _input_to_resume(prepared, strategy, worker, reset_input):
  """`(start, stream, resume)`: the step the model directory's latest checkpoint holds (0 for none), this
  run's input stream (`tpu.checkpointing.input_stream`) and how its input continues (`Resume`).

  The input stream comes first: a resume whose saved stream differs from this run's is refused here,
  before the model is built (unless `reset_input`), and so is a rerun of a run that has trained all its
  steps (which only evaluates and exports it again).
  """
  import tensorflow as tf

  from tpu.checkpointing import Resume
  from tpu.checkpointing import check_finished_input
  from tpu.checkpointing import data_files
  from tpu.checkpointing import input_stream
  from tpu.checkpointing import resume_input

  config, model_dir = prepared.config, prepared.model_dir
  start = model_dir.latest_step()
  on_tpu = isinstance(strategy, tf.distribute.TPUStrategy)
  evaluation = None
  if prepared.evaluation is not None:
    spec = prepared.evaluation.spec
    evaluation = dict(spec=spec, files=data_files(spec, config.data_dir))
  stream = input_stream(config, prepared.vocab, worker.count, strategy.num_replicas_in_sync // worker.count,
                        files=data_files(config.data, config.data_dir), evaluation=evaluation)
  resume = Resume(config.seed)
  if on_tpu:
    log.warning("on a TPU the input pipeline's position is not saved with the checkpoints (TensorFlow cannot "
                "save its distributed iterators): a resumed run starts a new shuffle (seed + step), so its "
                "examples after the resume differ from an uninterrupted run's")
  if start and start < config.steps:   # refuses another stream, else continues this one (or a new one)
    resume = resume_input(model_dir, worker, start, stream, config.seed, reset_input, replayable=not on_tpu)
  elif start:   # a finished run, evaluated or exported again: its record holds all the same
    check_finished_input(model_dir, worker, start, stream, reset_input)
  return start, stream, resume


def _build_training(prepared, strategy, worker, resume):
  """`(text_encoder, train_input, trainer)`: the vocabulary written (before the model: the other workers
  may wait for a learned one), then the task's text encoder, the training input (`TrainInput`, from the
  resumed seed) and the `Trainer` with its model."""
  import tensorflow as tf

  from tpu.data import pipeline
  from tpu.prepare import write_vocabulary
  from tpu.tasks import get_task
  from tpu.tasks.base import length_ladder
  from tpu.trainer import Trainer
  from tpu.trainer import TrainInput
  from zoo.text import text_encoder as make_text_encoder

  config = prepared.config
  write_vocabulary(prepared, worker)   # before the model: the other workers may wait for a learned one
  task = get_task(config)
  text_encoder = make_text_encoder(prepared.vocab, seq_length=config.seq_length,
                                   sentencepiece_model=prepared.sentencepiece, **config.text_encoder_args())
  ladder = length_ladder(config)
  train_input = TrainInput(strategy, pipeline.train_input_fn(
      prepared.train, task, text_encoder, config.batch_size, shuffle_buffer=config.shuffle_buffer,
      seed=resume.seed, worker_name=worker.name, capacities=[capacity for _, capacity in ladder] or None),
      worker, skip=resume.skip)
  if ladder:
    log.info("length buckets: batches of %s token(s) at most, at lengths %s",
             ", ".join(str(capacity) for _, capacity in ladder),
             ", ".join(str(length) for length, _ in ladder))
  if train_input.unsaved_reason and not isinstance(strategy, tf.distribute.TPUStrategy):
    log.info("the input pipeline of %s cannot save its position (%s): a resumed run replays the batches of "
             "the steps before it to continue the same stream", config.data, train_input.unsaved_reason)
  return text_encoder, train_input, Trainer(config, strategy, train_input, task=task)


def _restore(prepared, trainer, train_input, worker, start, stream, resume):
  """The run's `Checkpoints`, with the latest checkpoint (or the initial one) restored into `trainer` and
  the input position of step `start` into `train_input` (or the batches to replay told)."""
  from tpu.checkpointing import SINCE
  from tpu.checkpointing import Checkpoints

  since = resume.since()
  checkpoints = Checkpoints(trainer, prepared.model_dir, prepared.config, worker, stream if since is None
                            else dict(stream, **{SINCE: since}))
  checkpoints.remove_leftovers()
  checkpoints.restore_or_initialise(prepared.config.init_checkpoint)
  if trainer.step != start:
    raise ValueError(f"{checkpoints.latest} holds step {trainer.step}, not the step {start} its name says")
  if resume.prefix:
    train_input.restore(resume.prefix)
    log.info("the input pipeline continues from its position at step %d", start)
  elif resume.skip:
    log.info("the input pipeline replays the batches of steps %d to %d (its position could not be saved), so "
             "it continues the same stream", resume.origin + 1, start)
  return checkpoints


def _write_run_files(prepared, worker, start):
  """config.json (once the checkpoint and the input position are restored), and the input positions an
  interrupted run saved after step `start` removed.

  config.json records the settings the run trains with: a rerun that trains no step (the run has
  trained to `--steps` or past it: it evaluates and exports again) leaves the record as it is, and
  names the settings of its own that differ from it."""
  from tpu.prepare import write_files
  from zoo.model_dir import tokenizer_as_written

  config, model_dir = prepared.config, prepared.model_dir
  if start < config.steps or not model_dir.has_config():
    write_files(prepared, worker)   # config.json, once the checkpoint and the input position are restored
  elif worker.is_chief:
    recorded, ours = model_dir.read_config(), json.loads(json.dumps(config.recorded().to_dict()))
    recorded["tokenizer"] = tokenizer_as_written(recorded)   # a run recorded before the truncator was
    differing = [f"{name}: {json.dumps(recorded.get(name))} recorded, {json.dumps(value)} now"
                 for name, value in ours.items() if name != "model_dir" and recorded.get(name) != value]
    if differing:
      log.warning("the run in %s has trained all its %d steps, so this rerun trains none: config.json keeps "
                  "the settings it trained with, which the export reads (this rerun's differ: %s; raise "
                  "--steps to train with them)", model_dir.path, start, "; ".join(differing))
  model_dir.remove_input_states_after(worker.index, worker.count, start)   # an interrupted run's


def _evaluation_input(prepared, strategy, trainer, text_encoder):
  """The distributed evaluation batches (each worker evaluates its slice of every batch), or None without
  evaluation data."""
  from tpu.data import pipeline

  if prepared.evaluation is None:
    return None
  evaluation = trainer.task.prepare_evaluation(prepared.evaluation) or prepared.evaluation
  return strategy.distribute_datasets_from_function(pipeline.eval_input_fn(
      evaluation, trainer.task, text_encoder, prepared.config.eval_batch_size,
      seed=prepared.config.seed))


def _run_log(model_dir, worker, start):
  """The `RunLog` (the chief writes it), with the history lines after step `start` dropped: a run killed
  before its first checkpoint leaves lines of steps from 1 on, which this run logs again."""
  from tpu.progress import RunLog

  run_log = RunLog(model_dir, write=worker.is_chief)
  if worker.is_chief:
    dropped = model_dir.truncate_history(start)
    if dropped:
      log.info("history.jsonl: dropped %d record(s) after step %d, which this run logs again", dropped, start)
  return run_log


def _evaluate(trainer, eval_data, checkpoints, run_log, signals, step):
  """Evaluates the model at `step` and logs the metrics; returns them.

  Raises:
    Preempted: SIGTERM arrived on some worker during the evaluation (the checkpoint of `step` is saved).
  """
  from tpu.checkpointing import Preempted

  results = trainer.evaluate(eval_data, terminated=lambda: signals.terminated)
  if results is None:   # SIGTERM on some worker
    checkpoints.save_final(step)
    who = "" if signals.terminated else " on another worker"
    raise Preempted(f"SIGTERM{who} during the evaluation at step {step}: the checkpoint of step {step} "
                    "is saved; rerun the same command to resume")
  run_log.evaluation(step, results)
  return results


def _train(config, strategy, worker, trainer, checkpoints, run_log, signals, start, evaluate):
  """The training loop from step `start` to `config.steps` (`evaluate(step)` every `eval_every` steps,
  if not None), then the final checkpoint."""
  from tpu.progress import Progress
  from tpu.trainer import train_loop

  log.info("training %s on %s for %d steps (from step %d), global batch %d over %d replica(s)%s",
           config.model, config.data, config.steps, start, config.batch_size, strategy.num_replicas_in_sync,
           f" on {worker.count} workers; this is {worker.name}" if worker.multi_worker else "")
  progress = Progress(config.steps, start)
  started = time.monotonic()
  try:
    train_loop(trainer, config, checkpoints, run_log, progress, signals, evaluate=evaluate)
  finally:
    progress.close()
    run_log.flush()
  checkpoints.save_final(trainer.step)
  log.info("trained to step %d in %.1f s", trainer.step, time.monotonic() - started)


def _finish(prepared, worker, trainer, evaluate, signals, export):
  """The final evaluation (its metrics and predictions written by the chief) and the chief's export;
  returns the metrics, with the export's path. The workers end together (the others wait for the
  chief's export), and SIGTERM on any of them in these last phases ends every one (`Preempted`)."""
  from tpu import cluster
  from tpu import serving
  from tpu.checkpointing import Preempted

  model_dir, results = prepared.model_dir, {}
  if evaluate is not None:
    results = evaluate(trainer.step)
    if worker.is_chief:
      model_dir.write_eval_results(dict(step=trainer.step, **results))
      predictions = trainer.task.eval_predictions()
      if predictions is not None:
        model_dir.write_eval_predictions(*predictions)
  if export and worker.is_chief:
    path = serving.export(model_dir.path)
    log.info("exported the SavedModel to %s", path)
    results = dict(results, export=path)
  if cluster.sync(worker, "end", signals.terminated):
    who = "" if signals.terminated else " on another worker"
    raise Preempted(f"SIGTERM{who} after training to step {trainer.step} (its checkpoint is saved): "
                    "rerun the same command to finish")
  return results


def _check_tpu_hosts(strategy, prepared):
  """Refuses input pipelines with tensorflow-text ops on a multi-host TPU: its hosts' TensorFlow
  servers, which run the per-host pipelines, lack those ops."""
  import tensorflow as tf

  from tpu.data.records import RecordsSource
  if not isinstance(strategy, tf.distribute.TPUStrategy) or strategy.extended.num_hosts <= 1:
    return
  for source in (prepared.train, prepared.evaluation):
    if source is not None and source.metadata is None:
      raise ValueError(
          f"{source.spec} is tokenized in the input pipeline with tensorflow-text ops, which the hosts of a "
          f"multi-host TPU ({strategy.extended.num_hosts} hosts) cannot run: write it as pre-tokenized "
          "records with `python -m tpu.pretraining_data` and train on --data "
          f"{RecordsSource.usage}")


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


def parser() -> argparse.ArgumentParser:
  defaults = TrainConfig()
  p = argparse.ArgumentParser(
      prog=command_name("tpu.train"), description=__doc__.split("\n\n")[0],
      epilog="Settings can also come from --config FILE (a JSON object with the same names, "
             "underscores for dashes); flags override the file.")
  add = p.add_argument
  add("--config", metavar="FILE", help="JSON file of settings")
  add("--model", metavar="PRESET", help=f"encoder preset (default with --init-checkpoint DIR: DIR's "
      f"encoder); one of: {', '.join(presets.names())}")
  add("--model-override", dest="model_overrides", action="append", type=_key_value, metavar="KEY=VALUE",
      help="encoder argument over the preset's (JSON value), e.g. hidden_size=256; repeatable")
  add("--task", choices=tasks.names(),
      help="what to train: " + "; ".join(f"{name}: {task.description}" for name, task in tasks.TASKS.items()))
  add("--data", metavar="SPEC", help=f"training data: {', '.join(data.usages())} (see tpu/README.md)")
  add("--eval-data", metavar="SPEC",
      help="evaluation data (default: the validation split of data that has one: "
           f"{', '.join(source.scheme for source in data.SOURCES.values() if source.splits)})")
  add("--text-columns", nargs="+", metavar="NAME", help="one or two text columns of table files")
  add("--label-column", metavar="NAME", help="label column of table files (default: label)")
  add("--documents", choices=("line", "blank-line"),
      help="what separates the documents of text: files: the end of each line (default) or a blank line "
           "(BERT's format, as `python -m tpu.pretraining_data` reads by default)")
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
  add("--lower-case", action=argparse.BooleanOptionalAction, default=None,
      help="uncased text (default: the init checkpoint's, else on)")
  add("--dropout", type=float, help="dropout of the encoder and head (default: the preset's, 0.1)")
  add("--length-buckets", metavar="LADDER",
      help="fine-tuning tasks: batches of examples of similar length, each run at the smallest of these "
           "lengths that holds its longest example: 'auto' (16, 32, 64, ... up to --seq-length), lengths "
           "such as '32,64' (--seq-length is added) or 'off' (default: every batch at --seq-length). One "
           "compiled branch per length; evaluation batches run at their own longest example's length")
  add("--padding-dependent-buckets", action=argparse.BooleanOptionalAction, default=None,
      help="length buckets for a Funnel whose pooling reads padding (pooling_semantics 'huggingface' or "
           "'funnel_authors', the presets'): each length then holds only the examples whose pooling "
           "windows it holds whole")
  add("--seed", type=int, help="shuffling, masking and initialisation seed (default 0)")
  add("--export", action=argparse.BooleanOptionalAction, default=None,
      help="export a SavedModel at the end (default: on)")
  add("--reset-input", action="store_true",
      help="resuming: continue the model from its checkpoint with this run's input settings (a new shuffle), "
           "where the saved input position belongs to other ones (data, batch size, workers, replicas, seed, "
           "shuffle buffer, ...), which are otherwise refused")
  faults = p.add_argument_group("fault bounds of a multi-worker run (TF_CONFIG), in seconds")
  faults.add_argument("--heartbeat-timeout", type=float, metavar="S",
                      help="a worker without heartbeats for this long is lost, and every worker stops "
                           f"(default {defaults.heartbeat_timeout:g})")
  faults.add_argument("--collective-timeout", type=float, metavar="S",
                      help="a train or evaluation step's collective waits this long for a peer that is alive "
                           f"(above the slowest step; default {defaults.collective_timeout:g})")
  faults.add_argument("--registration-timeout", type=float, metavar="S",
                      help="every worker must start and connect within this time of the others "
                           f"(default {defaults.registration_timeout:g})")
  add("-v", "--verbose", action="store_true", help="log more, including TensorFlow's own log lines")
  _add_task_settings(p)
  return p


def _add_task_settings(p):
  """A flag for every setting a task declares (`tpu.tasks.Setting`), in a group of their own."""
  group = p.add_argument_group("task settings", "each applies to the tasks it names (config.json: the same "
                               "names, underscores for dashes)")
  for name, (setting, owners) in tasks.declared_settings().items():
    if not setting.flag:
      continue
    default = "" if setting.default is None else f" (default {setting.default})"
    help_text = f"{', '.join(owners)}: {setting.help}{default}".replace("%", "%%")
    if setting.type is bool:
      group.add_argument(setting.flag_name, dest=name, action=argparse.BooleanOptionalAction, default=None,
                         help=help_text)
    else:
      metavar = ("{" + ",".join(setting.choices) + "}" if setting.choices
                 else {int: "N", float: "X"}.get(setting.type, "VALUE"))
      group.add_argument(setting.flag_name, dest=name, type=setting.type, choices=setting.choices,
                         metavar=metavar, help=help_text)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
  """defaults < --config FILE < flags."""
  config = TrainConfig.from_file(args.config) if args.config else TrainConfig()
  values = {key: value for key, value in vars(args).items()
            if value is not None and key not in ("config", "verbose", "reset_input")}
  if "model_overrides" in values:
    values["model_overrides"] = {**config.model_overrides, **dict(values["model_overrides"])}
  return config.replace(**values)


def main(argv: Sequence[str] | None = None) -> int:
  args = parser().parse_args(argv)
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow(args.verbose)
  logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                      format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
  # A download's retries (TFDS, the hub) are one line each in urllib3's log: the outcome is what counts.
  logging.getLogger("urllib3").setLevel(logging.DEBUG if args.verbose else logging.ERROR)
  from tpu.checkpointing import PREEMPTED_EXIT_CODE
  from tpu.checkpointing import Preempted
  from tpu.trainer import TrainingError
  try:
    results = run(config_from_args(args), reset_input=args.reset_input)
  except Preempted as error:
    print(f"{error_prefix('tpu.train')}: {error}", file=sys.stderr)
    return PREEMPTED_EXIT_CODE
  except (ValueError, FileNotFoundError, TrainingError, data.DataError, RuntimeError) as error:
    print(f"{error_prefix('tpu.train')}: error: {error}", file=sys.stderr)
    return 2 if isinstance(error, (ValueError, FileNotFoundError)) else 1
  json.dump(results, sys.stdout, indent=2)
  print()
  return 0


if __name__ == "__main__":
  sys.exit(main())
