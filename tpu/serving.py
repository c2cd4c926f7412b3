"""The SavedModel of a training run, for TensorFlow Serving: raw text in, predictions out.

The training job's final export and `python -m export.saved_model` both write it
through `export(model_dir, out)`. The model is rebuilt from the model directory's
`config.json` in float32 outside any distribution strategy and restored from a
checkpoint: a checkpoint holds plain variable values, whatever strategy and mixed
precision policy wrote it, so a TPU-trained model exports and serves on CPU and GPU.

What the signatures return is the task's (`tpu.tasks.Task.serving_outputs`); the
SavedModel also holds `label_names` and `prediction_fields`, which tell
`export.predict` how to print the outputs without knowing the task.

Versions: `out/<version>/` in TensorFlow Serving's layout, one more than the highest
numeric version in `out`, starting at 1. The SavedModel is written under a temporary,
non-numeric name and renamed at the end, so an interrupted export leaves no version
TF Serving would load (both rules: `zoo.model_dir.write_version_atomically`).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING
from typing import Any

import tensorflow as tf
import tf_keras as keras
from tensorflow.core.protobuf import saved_model_pb2

from tpu.config import TrainConfig
from tpu.tasks import get_task
from zoo.graphs.kit import INPUT_NAMES
from zoo.model_dir import MODEL_ROOT
from zoo.model_dir import SAVED_MODEL_FILE
from zoo.model_dir import ModelDir
from zoo.model_dir import find_checkpoint
from zoo.model_dir import write_version_atomically
from zoo.text import text_encoder as make_text_encoder

if TYPE_CHECKING:
  from zoo.text import TextEncoder

MODEL_INFO_FILE = "model_info.json"
MODEL_INFO_FORMAT = "zoo-export/1"
SIGNATURES = ("serving_default", "from_token_ids", "encode")


def restore_model(config: TrainConfig, checkpoint: str) -> Any:
  """The Keras model of `config`, built in float32 and restored from the checkpoint prefix.

  Raises:
    RuntimeError: called inside a distribution strategy's scope.
    ValueError: the checkpoint does not hold this model's variables.
  """
  if tf.distribute.has_strategy():
    raise RuntimeError("export builds its own float32 copy of the model outside any distribution strategy: "
                       "call it outside `strategy.scope()`")
  previous_policy = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy("float32")
  try:
    model = get_task(config).build()
  finally:
    keras.mixed_precision.set_global_policy(previous_policy)
  try:
    restored = tf.train.Checkpoint(**{MODEL_ROOT: model}).restore(checkpoint)
    restored.expect_partial().assert_existing_objects_matched()
  except (AssertionError, ValueError) as error:
    raise ValueError(f"checkpoint {checkpoint} does not hold the model of its config.json (preset "
                     f"{config.model}, task {config.task}): {error}") from None
  return model


class ServingModule(tf.Module):
  """What the SavedModel holds: the model's variables, the text encoder and three signatures.

  Only the variables of the Keras model are tracked, not the model: the SavedModel then
  holds just the signature graphs, without Keras's per-layer call graphs, which halves
  its size and makes saving and loading several times faster. The Keras model comes
  back from the checkpoint (`restore_model`).

  Attributes kept in the SavedModel: `label_names` (string `[C]` variable, empty for
  tasks without classes), `prediction_fields` (a JSON string variable, see
  `Task.prediction_fields`), `text_inputs` (a JSON string variable: the names of the
  string inputs, `Task.serving_text_inputs`), `text_encoder`, `model_variables` and the functions
  `serving_default`, `from_token_ids`, `encode` and `encoder_from_token_ids`. The text
  signatures tokenize and then call the token-id functions, so each model graph is
  traced and stored once.

  Args:
    model: the Keras model of `config`'s task, restored.
    config: the run's `TrainConfig`.
    text_encoder: a `zoo.text.TextEncoder` (a `SentencePieceEncoder` for a SentencePiece model) with the
      run's vocabulary and `seq_length`.
    length_buckets: `bucket_plan`'s plan: the encoder runs each text of a call at the smallest ladder length
      that holds it, a sub-batch per length (`zoo.models.EncoderModel.use_length_buckets(per_text=True)`);
      None: every call at `seq_length`.
  """

  def __init__(self, model: Any, config: TrainConfig, text_encoder: TextEncoder,
               length_buckets: dict[str, Any] | None = None) -> None:
    super().__init__(name="zoo_export")
    task = get_task(config)
    encoder = task.encoder(model)
    if length_buckets:
      encoder.use_length_buckets(length_buckets["lengths"], per_text=True,
                                 padding_dependent=length_buckets["padding_dependent"])
    network = task.serving_network(model)
    self.model_variables = list(network.variables)
    self.text_encoder = text_encoder
    self.label_names = tf.Variable(tf.constant(task.label_names(), tf.string), trainable=False,
                                   name="label_names")
    self.prediction_fields = tf.Variable(json.dumps([list(field) for field in task.prediction_fields]),
                                         trainable=False, name="prediction_fields")
    input_names = tuple(task.serving_text_inputs())
    self.text_inputs = tf.Variable(json.dumps(list(input_names)), trainable=False, name="text_inputs")
    # Plain functions are not tracked, so the Keras models stay out of the object graph.
    self._outputs = lambda features: task.serving_outputs(network, features, self.label_names)
    self._encoder_outputs = lambda features: task.encoder_outputs(encoder, features)
    named = lambda texts: dict(zip(input_names, texts, strict=True))   # noqa: E731
    self._text_outputs = lambda texts: task.serving_from_text(named(texts), text_encoder, self.from_token_ids,
                                                              self.label_names)
    self._encode_text = lambda texts: task.encode_text(named(texts), text_encoder)

    shapes = task.serving_text_shapes()
    texts = [tf.TensorSpec(shapes.get(name, [None]), tf.string, name=name) for name in input_names]
    token_ids = [tf.TensorSpec(task.token_id_shape(), tf.int32, name=name) for name in INPUT_NAMES]
    # No AutoGraph: the tokenizer and the zoo models have no Python control flow on tensors, and
    # converting tensorflow-text's and Keras's code took half of the export time.
    self.from_token_ids: Any = tf.function(self._from_token_ids, input_signature=token_ids, autograph=False)
    self.encoder_from_token_ids = (self.from_token_ids if network is encoder
                                   else tf.function(self._encoder_from_token_ids, input_signature=token_ids,
                                                    autograph=False))
    self.serving_default = tf.function(self._from_text, input_signature=texts, autograph=False)
    self.encode = tf.function(self._encode, input_signature=texts, autograph=False)
    self._aliases = dict(task.serving_signature_aliases())

  def signatures(self) -> dict[str, Any]:
    """`{name: tf.function}` for `tf.saved_model.save`, with the task's aliases
    (`Task.serving_signature_aliases`)."""
    signatures = {name: getattr(self, name) for name in SIGNATURES}
    signatures.update({alias: signatures[name] for alias, name in self._aliases.items()})
    return signatures

  def _from_token_ids(self, input_word_ids, input_mask, input_type_ids):
    return self._outputs(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                              input_type_ids=input_type_ids))

  def _encoder_from_token_ids(self, input_word_ids, input_mask, input_type_ids):
    return self._encoder_outputs(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                                      input_type_ids=input_type_ids))

  def _from_text(self, *texts):
    return self._text_outputs(texts)

  def _encode(self, *texts):
    return self.encoder_from_token_ids(**self._encode_text(texts))


def bucket_plan(model: Any, config: TrainConfig, length_buckets: str | list[int] | None = None,
                padding_dependent: bool = False) -> dict[str, Any]:
  """How the export runs calls of short texts, for `ServingModule` and `model_info.json`.

  `length_buckets`: "auto" (`zoo.length_buckets.default_ladder` with two lengths per doubling from 8: 8,
  12, 16, 24, 32, 48, ..., T, those the encoder takes; each text runs at the shortest that holds it), "off",
  lengths ("32,64" or a list), or None: the run's own `length_buckets` (and `padding_dependent_buckets`)
  when it trained with a ladder, else "auto". An encoder whose pooling reads padding (a Funnel under
  Hugging Face's or the authors' pooling semantics) runs every call at `seq_length` unless
  `padding_dependent` asks for buckets: each length then holds only the texts whose pooling windows it
  holds whole (`zoo.length_buckets.funnel_capacity`), so the outputs stay those of `seq_length`.

  Returns a dict: `lengths` and `capacities` (the most real tokens each length runs with the outputs of
  `seq_length`; `[]` without buckets), `padding_dependent`, and `reason` (why there are none, or null).
  """
  from zoo.length_buckets import AUTO
  from zoo.length_buckets import SERVING_PER_OCTAVE
  from zoo.length_buckets import SERVING_SHORTEST
  from zoo.length_buckets import describe_ladder
  from zoo.length_buckets import parse_ladder

  encoder = get_task(config).encoder(model)
  if length_buckets is None:   # the run's own ladder (and its --padding-dependent-buckets), else "auto"
    trained = config.length_buckets
    length_buckets = trained if trained not in (None, "off", []) else AUTO
    padding_dependent = padding_dependent or config.padding_dependent_buckets
  dependence = encoder.padding_dependence()
  plan = dict(setting=describe_ladder(length_buckets), lengths=[], capacities=[],
              padding_dependent=bool(dependence), reason=None)
  lengths = parse_ladder(length_buckets, config.seq_length, SERVING_PER_OCTAVE, SERVING_SHORTEST)
  if length_buckets == AUTO:   # the lengths this encoder takes (a Funnel needs a few tokens per block)
    lengths = [length for length in lengths if encoder.length_problem(length) is None]
  if dependence and not padding_dependent:
    if length_buckets != AUTO and lengths:
      raise ValueError(f"length buckets {describe_ladder(length_buckets)} for a model whose pooling reads "
                       f"padding are taken only when asked for: {dependence}. Export with "
                       "--padding-dependent-buckets to take them, or with --length-buckets off")
    lengths = []
    plan["reason"] = (f"off: {dependence}; --padding-dependent-buckets takes them (outputs unchanged, fewer "
                      "texts per length)")
  elif len(lengths) <= 1:
    plan["reason"] = "off: every call runs at seq_length"
  if lengths and len(lengths) > 1:
    encoder.use_length_buckets(lengths, padding_dependent=padding_dependent)
    ladder = encoder.length_buckets
    encoder.use_length_buckets(None)
    plan.update(lengths=[length for length, _ in ladder], capacities=[capacity for _, capacity in ladder])
  return plan


def model_info(config: TrainConfig, checkpoint: str,
               length_buckets: dict[str, Any] | None = None) -> dict[str, Any]:
  """What was exported and from where, for `model_info.json`."""
  info = dict(format=MODEL_INFO_FORMAT, model=config.model, model_overrides=config.model_overrides,
              seq_length=config.seq_length, lower_case=config.lower_case, tokenizer=config.tokenizer,
              sentence_pair=config.sentence_pair,
              vocab_size=config.vocab_size, num_classes=None, label_names=None, checkpoint=checkpoint,
              length_buckets=length_buckets)
  info.update(get_task(config).export_info())
  return info


def saved_signatures(path: str) -> dict[str, dict[str, dict[str, str]]]:
  """`{signature: {"inputs": {name: "int32 [None, 128]", ...}, "outputs": {...}}}` of a written SavedModel.

  Read from `saved_model.pb`, as `saved_model_cli show` prints them (None: any size).
  """
  with tf.io.gfile.GFile(os.path.join(path, SAVED_MODEL_FILE), "rb") as file:
    meta_graph = saved_model_pb2.SavedModel.FromString(file.read()).meta_graphs[0]

  def describe(tensors):
    return {name: f"{tf.dtypes.as_dtype(tensor.dtype).name} {tf.TensorShape(tensor.tensor_shape).as_list()}"
            for name, tensor in sorted(tensors.items())}

  return {name: dict(inputs=describe(signature.inputs), outputs=describe(signature.outputs))
          for name, signature in sorted(meta_graph.signature_def.items()) if not name.startswith("__")}


def write_saved_model(module: ServingModule, base: str, info: dict[str, Any]) -> str:
  """Saves `module` as `base/<next version>` through a temporary directory; returns the version dir.

  `model_info.json` beside `saved_model.pb` holds `info` and the saved signatures.
  """
  def write(folder):
    tf.saved_model.save(module, folder, signatures=module.signatures())
    with tf.io.gfile.GFile(os.path.join(folder, MODEL_INFO_FILE), "w") as file:
      file.write(json.dumps(dict(info, signatures=saved_signatures(folder)), indent=2) + "\n")

  return write_version_atomically(base, write)


def export(model_dir: str, out: str | None = None, checkpoint: str | None = None,
           length_buckets: str | list[int] | None = None, padding_dependent_buckets: bool = False) -> str:
  """Exports a training run's model as a SavedModel version for TensorFlow Serving.

  Args:
    model_dir: the `--model-dir` of a `tpu.train` run (local or gs://): `config.json`,
      `vocab.txt` and `checkpoints/`.
    out: the model base path; the SavedModel goes to `out/<version>` (default: the
      model directory's `export/`).
    checkpoint: a checkpoint prefix or directory; default the latest of `model_dir`.
    length_buckets: the ladder of lengths the signatures run calls at ("auto", "off", lengths; see
      `bucket_plan`); None: the run's own, else "auto".
    padding_dependent_buckets: take a named ladder for a model whose outputs depend on padding.

  Returns:
    The written version directory.

  Raises:
    FileNotFoundError: no such model dir, config, vocabulary or checkpoint.
    ValueError: the files do not fit together.
    RuntimeError: called inside a distribution strategy's scope.
  """
  directory = ModelDir(model_dir)
  if not directory.exists():
    raise FileNotFoundError(f"model dir {directory.path} does not exist")
  config = TrainConfig.from_model_dir(directory)
  if not config.task:
    raise ValueError(f"{directory.config_path} names no task: a converted checkpoint is a starting point "
                     "for `python -m tpu.train --init-checkpoint`, not a trained model to export")
  if not directory.has_vocab():
    raise FileNotFoundError(f"{directory.path} holds no vocab.txt: is it the --model-dir of a training run?")
  vocab = directory.read_vocab()
  if len(vocab) != config.vocab_size:
    raise ValueError(f"{directory.vocab_path} has {len(vocab)} tokens, but config.json says vocab_size="
                     f"{config.vocab_size}")
  prefix = find_checkpoint(checkpoint or directory.path)
  model = restore_model(config, prefix)
  text_encoder = make_text_encoder(vocab, seq_length=config.seq_length,
                                   sentencepiece_model=directory.read_sentencepiece(),
                                   **config.text_encoder_args())
  plan = bucket_plan(model, config, length_buckets, padding_dependent_buckets)
  module = ServingModule(model, config, text_encoder, length_buckets=plan if plan["lengths"] else None)
  return write_saved_model(module, out or directory.export_dir, model_info(config, prefix, plan))
