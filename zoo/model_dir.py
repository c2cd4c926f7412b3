"""The model directory: one layout for training runs and converted checkpoints.

Everything that reads or writes a model directory goes through `ModelDir`: the
training job (`tpu.train`), the exporter (`export.saved_model`), the checkpoint
converters (`zoo.convert`) and the tests' fixtures. Paths may be local or `gs://`.

  config.json         the settings that rebuild the model: the preset and its
                      overrides, task, sequence length, vocabulary size, the tokenizer
                      settings (casing, `tokenizer`: the special tokens' names, [CLS]'s
                      token type; absent in older directories: BERT's; its `truncator`,
                      how text pairs are trimmed: absent in directories written before
                      it was recorded, which trimmed them "round_robin", see
                      `tokenizer_as_written`), and the data's metadata (classes, label
                      names, sentence pairs)
  vocab.txt           the WordPiece vocabulary, one token per line (with a SentencePiece
                      tokenizer: the model's pieces in id order)
  spiece.model        the SentencePiece model, when the tokenizer is one (ALBERT's)
  checkpoints/        `tf.train.CheckpointManager` checkpoints
    input/worker-I-of-N/ckpt-<step>
                      the position of worker I's input pipeline at each checkpoint
                      (a `tf.data` iterator checkpoint), so a resumed run continues
                      the data stream where the checkpoint left it
  train/, eval/       TensorBoard summaries
  history.jsonl       one JSON line per logged training step and per evaluation
  eval_results.json   the final evaluation metrics
  eval_predictions.json, eval_null_odds.json
                      the final evaluation's predictions where an outside script scores
                      them (SQuAD: `{question id: answer}` and, for v2.0, `{question id:
                      null score - best span score}`, the official scripts' inputs)
  source.json         where a converted checkpoint came from (converters only)
  export/<version>/   SavedModels for TensorFlow Serving

Files are written atomically (`zoo.atomic_files`: `atomic_file`, `atomic_path`,
`write_atomically`): a reader sees the old file or the new one, never half of one.
Checkpoints are atomic through `CheckpointManager`, which records a checkpoint only once
all of its files are written. An export version is written under a temporary,
non-numeric name and renamed to its number at the end (`write_version_atomically`).

Checkpoint roots (the names of `tf.train.Checkpoint(**{root: object})`): a training
run saves its task model under `model`, its encoder also under `encoder`, its optimizer
under `optimizer` and a masked-LM head under `masked_lm`; a converter saves the encoder
under `encoder` (and a masked-LM head it converted under `masked_lm`). Converted
directories written before that hold the encoder under `model`: `encoder_root` tells.

Export versions: the numeric directories of an export base path (`export/` or any
`--out`); the next one is one more than the highest (`next_export_version`), the one
to serve the highest holding a `saved_model.pb` (`latest_export`).

Example:
  >>> import tempfile
  >>> run = ModelDir(tempfile.mkdtemp())
  >>> run.write_config({"model": "bert_small", "seq_length": 16})
  >>> run.read_config()["seq_length"]
  16
  >>> run.append_history({"step": 1, "loss": 2.5})
  >>> run.read_history()
  [{'step': 1, 'loss': 2.5}]
  >>> run.latest_checkpoint() is None
  True
  >>> run.next_export_version(), run.latest_export()
  (1, None)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any

from zoo.atomic_files import is_temporary
from zoo.atomic_files import write_atomically
from zoo.lazy import lazy_module

if TYPE_CHECKING:   # the type checker reads TensorFlow's names; annotations are not evaluated
  import tensorflow as tf
else:
  tf = lazy_module("tensorflow")   # imported on first use: command-line `--help` stays light

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
SENTENCEPIECE_FILE = "spiece.model"
CHECKPOINT_DIR = "checkpoints"
INPUT_STATE_DIR = "input"
CHECKPOINT_STATE_FILE = "checkpoint"   # in checkpoints/: which checkpoints there are
TRAIN_SUMMARIES = "train"
EVAL_SUMMARIES = "eval"
HISTORY_FILE = "history.jsonl"
EVAL_RESULTS_FILE = "eval_results.json"
EVAL_PREDICTIONS_FILE = "eval_predictions.json"
EVAL_NULL_ODDS_FILE = "eval_null_odds.json"
SOURCE_FILE = "source.json"
EXPORT_DIR = "export"
SAVED_MODEL_FILE = "saved_model.pb"
# An export version being written: `.tmp-<version>-<pid>`, a name TensorFlow Serving skips.
EXPORT_TEMPORARY_PREFIX = ".tmp-"
# Attempts at renaming into a version number that another export may take first.
RENAME_ATTEMPTS = 10

# Checkpoint roots (see the module docstring).
MODEL_ROOT = "model"            # a training run's task model
ENCODER_ROOT = "encoder"        # the encoder: training runs and converted checkpoints
MASKED_LM_ROOT = "masked_lm"    # a masked-LM head: masked-LM runs, converted BERT checkpoints with one
OPTIMIZER_ROOT = "optimizer"    # a training run's optimizer
# ELECTRA's discriminator head (its dense layer and logits): ELECTRA runs, converted Funnel discriminators.
DISCRIMINATOR_HEAD_ROOT = "discriminator_head"
# A multiple-choice scoring layer: multiple-choice runs, converted ...ForMultipleChoice checkpoints.
CHOICE_HEAD_ROOT = "choice_head"
# The heads a run starts from when its init checkpoint holds them.
HEAD_ROOTS = (MASKED_LM_ROOT, DISCRIMINATOR_HEAD_ROOT, CHOICE_HEAD_ROOT)
# An ELECTRA run's generator encoder and its masked-LM head.
GENERATOR_ROOT = "generator"
GENERATOR_MASKED_LM_ROOT = "generator_masked_lm"
# Where converted directories written before the converters used ENCODER_ROOT hold the encoder.
LEGACY_CONVERTED_ENCODER_ROOT = MODEL_ROOT


# The folder a checkpoint save writes before its files are complete (TensorFlow's sharded saves).
INTERRUPTED_SAVE = re.compile(r"ckpt-\d+_temp")


def checkpoint_roots(prefix: str) -> set[str]:
  """The root names under which the checkpoint `prefix` holds variables (`{"model", "encoder", ...}`)."""
  return {name.split("/", 1)[0] for name, _ in tf.train.list_variables(prefix) if "/" in name}


def encoder_root(prefix: str) -> str:
  """The root under which the checkpoint `prefix` holds an encoder: `encoder`, else `model`.

  Training runs and converted directories save the encoder under `encoder`. The fallback
  is for converted directories written before the converters did so: they hold the
  encoder (and nothing else but a masked-LM head) under `model`, the root that means the
  whole task model in a training run. A checkpoint without an `encoder` root is read as
  one of those.
  """
  return ENCODER_ROOT if ENCODER_ROOT in checkpoint_roots(prefix) else LEGACY_CONVERTED_ENCODER_ROOT


def export_versions(base: str) -> list[int]:
  """The version numbers of an export base path, ascending: its numeric names ([] for none or no `base`).

  Example:
    >>> import tempfile
    >>> base = tempfile.mkdtemp()
    >>> export_versions(base), next_export_version(base)
    ([], 1)
    >>> for name in ("3", "12", ".tmp-13-4242", "notes"):
    ...   tf.io.gfile.makedirs(os.path.join(base, name))
    >>> export_versions(base), next_export_version(base)
    ([3, 12], 13)
    >>> latest_export(base) is None   # no saved_model.pb in either
    True
    >>> tf.io.gfile.rmtree(base)
  """
  if not tf.io.gfile.isdir(base):
    return []
  names = (name.rstrip("/") for name in tf.io.gfile.listdir(base))
  return sorted(int(name) for name in names if re.fullmatch(r"[0-9]+", name))


def next_export_version(base: str) -> int:
  """One more than the highest version in `base` (1 for none or no `base`)."""
  return max(export_versions(base), default=0) + 1


def latest_export(base: str) -> str | None:
  """The directory of the highest version in `base` that holds a `saved_model.pb`, or None."""
  for version in reversed(export_versions(base)):
    path = os.path.join(base, str(version))
    if tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
      return path
  return None


def write_version_atomically(base: str, write: Callable[[str], object]) -> str:
  """Writes the next export version of `base` through a temporary folder and a rename; returns its path.

  `write(folder)` fills `base/.tmp-<version>-<pid>`, which is then renamed to
  `base/<version>`. If another export took that number meanwhile, the next free one is
  taken (up to `RENAME_ATTEMPTS` times). Whatever fails, the temporary folder is removed,
  so an interrupted export leaves no version TensorFlow Serving would load (a killed
  process leaves its `.tmp-*` folder, which serving skips). On local disks the rename is
  atomic; on `gs://` it copies the objects one by one.
  """
  tf.io.gfile.makedirs(base)
  version = next_export_version(base)
  temporary = os.path.join(base, f"{EXPORT_TEMPORARY_PREFIX}{version}-{os.getpid()}")
  try:
    write(temporary)
    for _ in range(RENAME_ATTEMPTS):
      target = os.path.join(base, str(version))
      try:
        tf.io.gfile.rename(temporary, target)
        return target
      except tf.errors.AlreadyExistsError:   # another export took this version meanwhile
        version = next_export_version(base)
    raise RuntimeError(f"could not find a free version number in {base} after {RENAME_ATTEMPTS} attempts")
  except BaseException:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.rmtree(temporary)
    raise


def read_json(path: str) -> dict[str, Any]:
  """A JSON object from `path`; errors name the file (and line for malformed JSON)."""
  try:
    with tf.io.gfile.GFile(path) as file:
      values = json.load(file)
  except json.JSONDecodeError as error:
    raise ValueError(f"{path}:{error.lineno}: not valid JSON: {error.msg}") from None
  except tf.errors.NotFoundError:
    raise FileNotFoundError(f"{path} does not exist") from None
  if not isinstance(values, dict):
    raise ValueError(f"{path}: expected a JSON object, got {type(values).__name__}")
  return values


# How a config.json whose `tokenizer` records no `truncator` trimmed text pairs: the zoo's rule before its
# default became transformers' "longest_first" (`zoo.text.packing`) and directories recorded it.
TRUNCATOR_AS_WRITTEN = "round_robin"


def tokenizer_as_written(settings: dict[str, Any]) -> dict[str, Any]:
  """The `tokenizer` settings a model directory's config.json `settings` mean: its own, with the
  `truncator` of text pairs `TRUNCATOR_AS_WRITTEN` when it records none (written before the default
  changed), so a resumed run, an export or a Keras 3 loader trims pairs as the run trained."""
  return {**(settings.get("tokenizer") or {}),
          "truncator": (settings.get("tokenizer") or {}).get("truncator", TRUNCATOR_AS_WRITTEN)}


def find_checkpoint(path: str) -> str:
  """A checkpoint prefix from a prefix, a directory of checkpoints, or a model directory.

  Raises:
    FileNotFoundError: naming where it looked.
  """
  if tf.io.gfile.isdir(path):
    for folder in (os.path.join(path, CHECKPOINT_DIR), path):
      latest = tf.train.latest_checkpoint(folder)
      if latest:
        return latest
    raise FileNotFoundError(f"{path} holds no checkpoint (looked in {path} and "
                            f"{os.path.join(path, CHECKPOINT_DIR)})")
  if not tf.io.gfile.exists(path + ".index"):
    raise FileNotFoundError(f"checkpoint {path} does not exist (no {path}.index)")
  return path


def containing_model_dir(path: str) -> ModelDir | None:
  """The model directory a checkpoint path belongs to, or None.

  `path` may be a model directory, its `checkpoints/` folder, or a checkpoint prefix in
  either; the first of those folders holding a `config.json` is the answer.
  """
  folder = path if tf.io.gfile.isdir(path) else os.path.dirname(path)
  for candidate in (folder, os.path.dirname(folder.rstrip("/"))):
    if candidate and tf.io.gfile.exists(os.path.join(candidate, CONFIG_FILE)):
      return ModelDir(candidate)
  return None


class ModelDir:
  """One model directory (see the module docstring for the layout).

  Args:
    path: local path or `gs://` URL; it need not exist yet.
  """

  def __init__(self, path: str | os.PathLike[str]) -> None:
    self.path = str(path)

  def __repr__(self) -> str:
    return f"ModelDir({self.path!r})"

  def join(self, *parts: str) -> str:
    return os.path.join(self.path, *parts)

  @property
  def config_path(self) -> str:
    return self.join(CONFIG_FILE)

  @property
  def vocab_path(self) -> str:
    return self.join(VOCAB_FILE)

  @property
  def sentencepiece_path(self) -> str:
    return self.join(SENTENCEPIECE_FILE)

  @property
  def checkpoint_dir(self) -> str:
    return self.join(CHECKPOINT_DIR)

  @property
  def export_dir(self) -> str:
    return self.join(EXPORT_DIR)

  @property
  def history_path(self) -> str:
    return self.join(HISTORY_FILE)

  @property
  def eval_results_path(self) -> str:
    return self.join(EVAL_RESULTS_FILE)

  @property
  def eval_predictions_path(self) -> str:
    return self.join(EVAL_PREDICTIONS_FILE)

  @property
  def eval_null_odds_path(self) -> str:
    return self.join(EVAL_NULL_ODDS_FILE)

  @property
  def source_path(self) -> str:
    return self.join(SOURCE_FILE)

  def summaries_dir(self, name: str) -> str:
    """TensorBoard log directory of `name` ("train" or "eval")."""
    if name not in (TRAIN_SUMMARIES, EVAL_SUMMARIES):
      raise ValueError(f"unknown summaries {name!r}; choose {TRAIN_SUMMARIES!r} or {EVAL_SUMMARIES!r}")
    return self.join(name)

  def exists(self) -> bool:
    return tf.io.gfile.isdir(self.path)

  def makedirs(self) -> None:
    tf.io.gfile.makedirs(self.path)

  # config.json
  def has_config(self) -> bool:
    return tf.io.gfile.exists(self.config_path)

  def read_config(self) -> dict[str, Any]:
    """The settings dict of `config.json`.

    Raises:
      FileNotFoundError: there is none (the message says what a model directory is).
      ValueError: malformed JSON, naming the file and line.
    """
    if not self.has_config():
      raise FileNotFoundError(f"{self.path} holds no {CONFIG_FILE}: is it the --model-dir of a training "
                              "run or the output of `python -m zoo.convert`?")
    return read_json(self.config_path)

  def write_config(self, values: Mapping[str, Any]) -> None:
    write_atomically(self.config_path, json.dumps(values, indent=2, sort_keys=True) + "\n")

  # vocab.txt
  def has_vocab(self) -> bool:
    return tf.io.gfile.exists(self.vocab_path)

  def read_vocab(self) -> list[str]:
    """The vocabulary's tokens (`zoo.text.load_vocab`: errors name the file and line)."""
    from zoo.text import load_vocab
    if not self.has_vocab():
      raise FileNotFoundError(f"{self.path} holds no {VOCAB_FILE}")
    return load_vocab(self.vocab_path)

  def write_vocab(self, tokens: Iterable[str]) -> None:
    write_atomically(self.vocab_path, "".join(f"{token}\n" for token in tokens))

  # spiece.model
  def has_sentencepiece(self) -> bool:
    return tf.io.gfile.exists(self.sentencepiece_path)

  def read_sentencepiece(self) -> bytes | None:
    """The serialized SentencePiece model, or None when the directory has none."""
    if not self.has_sentencepiece():
      return None
    with tf.io.gfile.GFile(self.sentencepiece_path, "rb") as file:
      return file.read()

  def write_sentencepiece(self, model: bytes) -> None:
    write_atomically(self.sentencepiece_path, bytes(model))

  def copy_vocab_from(self, path: str) -> None:
    """Copies a vocabulary file into the directory (checked first), unless it is already ours."""
    from zoo.text import load_vocab
    if os.path.abspath(path) != os.path.abspath(self.vocab_path):
      self.write_vocab(load_vocab(path))

  # checkpoints/
  def latest_checkpoint(self) -> str | None:
    """The prefix of the latest recorded checkpoint, or None."""
    return tf.train.latest_checkpoint(self.checkpoint_dir)

  def latest_step(self) -> int:
    """The step of the latest recorded checkpoint of a training run (`ckpt-<step>`), 0 for none."""
    latest = self.latest_checkpoint()
    return int(latest.rsplit("-", 1)[1]) if latest else 0

  def checkpoint_manager(self, checkpoint: tf.train.Checkpoint, max_to_keep: int | None = 1,
                         step_counter: tf.Variable | None = None,
                         directory: str | None = None) -> tf.train.CheckpointManager:
    """A `tf.train.CheckpointManager` of `checkpoint` in `checkpoints/` (or `directory`)."""
    return tf.train.CheckpointManager(checkpoint, directory or self.checkpoint_dir, max_to_keep=max_to_keep,
                                      step_counter=step_counter)

  def write_checkpoint(self, checkpoint: tf.train.Checkpoint, number: int = 1) -> str:
    """Writes `checkpoint` once as `checkpoints/ckpt-<number>` (a converted checkpoint); returns its prefix.

    The state file that records it (written last, atomically) holds no timestamps, unlike
    `CheckpointManager`'s: the same weights give the same bytes, file for file.
    """
    name = f"ckpt-{number}"
    checkpoint.save_counter.assign(number - 1)   # saved with the checkpoint, as CheckpointManager's are
    prefix = checkpoint.save(os.path.join(self.checkpoint_dir, "ckpt"))
    if os.path.basename(prefix) != name:
      raise RuntimeError(f"wrote {prefix}, expected {name}")
    # The `CheckpointState` text proto `tf.train.latest_checkpoint` reads, paths relative to the folder.
    write_atomically(os.path.join(self.checkpoint_dir, CHECKPOINT_STATE_FILE),
                     f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
    return prefix

  def remove_leftovers(self) -> list[str]:
    """Removes what killed writers left in the run's own folders (the directory, `checkpoints/`
    and each worker's input positions): temporary files of atomic writes (`is_temporary`) and the
    `ckpt-N_temp/` folders of interrupted checkpoint saves. Export versions being written (the
    export folder's temporary folders, which TensorFlow Serving skips) are left to their writer.
    Returns the removed paths."""
    folders = [self.path, self.checkpoint_dir]
    inputs = self.join(CHECKPOINT_DIR, INPUT_STATE_DIR)
    if tf.io.gfile.isdir(inputs):
      folders += [os.path.join(inputs, name.rstrip("/")) for name in tf.io.gfile.listdir(inputs)]
    removed = []
    for folder in folders:
      if not tf.io.gfile.isdir(folder):
        continue
      for name in tf.io.gfile.listdir(folder):
        name = name.rstrip("/")
        path = os.path.join(folder, name)
        if INTERRUPTED_SAVE.fullmatch(name) and tf.io.gfile.isdir(path):
          tf.io.gfile.rmtree(path)
        elif is_temporary(name) and not tf.io.gfile.isdir(path):
          tf.io.gfile.remove(path)
        else:
          continue
        removed.append(path)
    return removed

  def input_state_prefix(self, worker: int, workers: int, step: int) -> str:
    """The checkpoint prefix of the input position of worker `worker` of `workers` at `step`."""
    return self.join(CHECKPOINT_DIR, INPUT_STATE_DIR, f"worker-{worker}-of-{workers}", f"ckpt-{step}")

  def input_state_steps(self, worker: int, workers: int) -> list[int]:
    """The steps whose input position (or stream record) worker `worker` of `workers` saved, in order."""
    folder = os.path.dirname(self.input_state_prefix(worker, workers, 0))
    if not tf.io.gfile.isdir(folder):
      return []
    steps = set()
    for name in tf.io.gfile.listdir(folder):   # a position, or the record of a stream saved without one
      for suffix in (".index", ".stream.json"):
        if name.startswith("ckpt-") and name.endswith(suffix) and name[len("ckpt-"):-len(suffix)].isdigit():
          steps.add(int(name[len("ckpt-"):-len(suffix)]))
    return sorted(steps)

  def remove_input_state(self, worker: int, workers: int, step: int) -> None:
    for path in tf.io.gfile.glob(self.input_state_prefix(worker, workers, step) + ".*"):
      tf.io.gfile.remove(path)

  def remove_input_states_after(self, worker: int, workers: int, step: int) -> None:
    """Removes the positions worker `worker` of `workers` saved after `step` (an interrupted run
    writes its position before its checkpoint is recorded)."""
    for later in self.input_state_steps(worker, workers):
      if later > step:
        self.remove_input_state(worker, workers, later)

  # history.jsonl, eval_results.json, source.json
  def truncate_history(self, step: int) -> int:
    """Keeps the records up to `step` (atomically): a run resumed from the checkpoint of `step`
    logs the later steps again. A line cut short by a kill goes too."""
    records = self.read_history()
    kept = [record for record in records if record.get("step", 0) <= step]
    if tf.io.gfile.exists(self.history_path):
      write_atomically(self.history_path, "".join(json.dumps(record) + "\n" for record in kept))
    return len(records) - len(kept)

  def append_history(self, record: Mapping[str, Any]) -> None:
    """Appends one JSON line (an append, not atomic: a partial last line is skipped on reading)."""
    with tf.io.gfile.GFile(self.history_path, "a") as file:
      file.write(json.dumps(record) + "\n")

  def read_history(self) -> list[dict[str, Any]]:
    """The records of `history.jsonl` ([] when there is none); a truncated last line is dropped."""
    if not tf.io.gfile.exists(self.history_path):
      return []
    with tf.io.gfile.GFile(self.history_path) as file:
      lines = file.read().splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
      if not line.strip():
        continue
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        if number == len(lines):   # a write cut short by a kill
          break
        raise ValueError(f"{self.history_path}:{number}: not valid JSON") from None
    return records

  def write_eval_results(self, results: Mapping[str, Any]) -> None:
    write_atomically(self.eval_results_path, json.dumps(results, indent=2) + "\n")

  def read_eval_results(self) -> dict[str, Any]:
    return read_json(self.eval_results_path)

  def write_eval_predictions(self, predictions: Mapping[str, Any],
                             null_odds: Mapping[str, float] | None = None) -> None:
    """`eval_predictions.json` (and `eval_null_odds.json` when given): `{example id: value}`."""
    text = json.dumps(predictions, indent=2, ensure_ascii=False)
    write_atomically(self.eval_predictions_path, text + "\n")
    if null_odds is not None:
      write_atomically(self.eval_null_odds_path, json.dumps(null_odds, indent=2) + "\n")

  def write_source(self, source: Mapping[str, Any]) -> None:
    write_atomically(self.source_path, json.dumps(source, indent=2, sort_keys=True) + "\n")

  def read_source(self) -> dict[str, Any]:
    return read_json(self.source_path)

  # export/<version>/
  def export_version_dir(self, version: int) -> str:
    """The directory of export version `version` in `export/`."""
    return self.join(EXPORT_DIR, str(int(version)))

  def export_versions(self) -> list[int]:
    """The version numbers in `export/`, ascending (`export_versions`)."""
    return export_versions(self.export_dir)

  def next_export_version(self) -> int:
    return next_export_version(self.export_dir)

  def latest_export(self) -> str | None:
    """The highest version directory in `export/` holding a SavedModel, or None (`latest_export`)."""
    return latest_export(self.export_dir)
