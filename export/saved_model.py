"""SavedModel export of a training run for TensorFlow Serving: raw text in, predictions out.

  python -m export.saved_model --model-dir MODEL_DIR [--out BASE] [--checkpoint PATH]

Rebuilds the model of `MODEL_DIR/config.json` in float32 outside any distribution
strategy, restores the latest checkpoint of `MODEL_DIR/checkpoints/` (or `--checkpoint`)
and writes `BASE/<version>/` in TensorFlow Serving's layout (BASE defaults to
`MODEL_DIR/export`). A version is one more than the highest numeric version in BASE,
starting at 1. The SavedModel is written under a temporary, non-numeric name in BASE
and renamed at the end, so an interrupted export leaves no version TF Serving would
load. The written version directory goes to stdout, errors to stderr.

Exporting from the checkpoint in a strategy-free process is the supported path for
TPU-trained models: a checkpoint holds plain variable values, whatever strategy and
mixed precision policy wrote it, and the exported graph runs on CPU and GPU.

Axes: B batch, T the trained `seq_length`, T' the length of `sequence_output` (T, or
shorter for an encoder-only Funnel), D model width, C classes.

Signatures (see README.md):
  serving_default  `text` string [B] (and `text_b` string [B] for sentence-pair tasks) ->
                     classify: `probabilities` float32 [B, C], `label_ids` int32 [B],
                               `labels` string [B], `logits` float32 [B, C]
                     regress: `predictions` float32 [B]
                     mlm, electra: `sequence_output` float32 [B, T', D], `pooled_output` float32 [B, D]
  from_token_ids   `input_word_ids`, `input_mask`, `input_type_ids` int32 [B, T] -> as serving_default
  encode           serving_default's inputs -> the encoder's `sequence_output` and `pooled_output`

The text is tokenized in the graph (`zoo.text.TextEncoder`, vocabulary embedded) and
truncated to T. Load the SavedModel after `import tensorflow_text`, which registers
the tokenizer's ops.
"""

import argparse
import json
import os
import re
import sys

import tensorflow as tf
import tf_keras as keras
from tensorflow.core.protobuf import saved_model_pb2

from tpu.checkpoints import find_checkpoint
from tpu.config import EXPORT_DIR
from tpu.config import VOCAB_FILE
from tpu.config import TrainConfig
from tpu.tasks import build_model
from zoo.models.encoder_inputs import INPUT_NAMES
from zoo.text import TextEncoder
from zoo.text import load_vocab

MODEL_INFO_FILE = "model_info.json"
MODEL_INFO_FORMAT = "zoo-export/1"
SIGNATURES = ("serving_default", "from_token_ids", "encode")
ENCODER_TASKS = ("mlm", "electra")
# Attempts at renaming into a version number that another export may take first.
RENAME_ATTEMPTS = 10


def next_version(base):
  """One more than the highest numeric version directory in `base` (1 for none or no `base`).

  Example:
    >>> import tempfile
    >>> base = tempfile.mkdtemp()
    >>> next_version(base)
    1
    >>> for name in ("3", "12", ".tmp-13-4242", "notes"):
    ...   tf.io.gfile.makedirs(os.path.join(base, name))
    >>> next_version(base)
    13
    >>> tf.io.gfile.rmtree(base)
  """
  if not tf.io.gfile.isdir(base):
    return 1
  versions = [int(name.rstrip("/")) for name in tf.io.gfile.listdir(base)
              if re.fullmatch(r"[0-9]+", name.rstrip("/"))]
  return max(versions, default=0) + 1


def label_names(config):
  """The class names of a classify run (ids as names when the data had none); [] otherwise."""
  if config.task != "classify":
    return []
  if not config.num_classes:
    raise ValueError(f"the classify run in {config.model_dir} has no num_classes in its config.json")
  names = list(config.label_names or [str(index) for index in range(config.num_classes)])
  if len(names) != config.num_classes:
    raise ValueError(f"config.json has {len(names)} label_names for num_classes={config.num_classes}")
  return [str(name) for name in names]


def restore_model(config, checkpoint):
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
    model = build_model(config)
  finally:
    keras.mixed_precision.set_global_policy(previous_policy)
  try:
    tf.train.Checkpoint(model=model).restore(checkpoint).expect_partial().assert_existing_objects_matched()
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

  Attributes kept in the SavedModel: `label_names` (string `[C]` variable; empty but for
  classify), `text_encoder`, `model_variables` and the functions `serving_default`,
  `from_token_ids` and `encode` (see the module docstring for their inputs and outputs),
  and `encoder_from_token_ids`. The text signatures tokenize and then call the token-id
  functions, so each model graph is traced and stored once.

  Args:
    model: the Keras model of `tpu.tasks.build_model(config)`, restored.
    config: the run's `TrainConfig`.
    text_encoder: a `zoo.text.TextEncoder` with the run's vocabulary and `seq_length`.
  """

  def __init__(self, model, config, text_encoder):
    super().__init__(name="zoo_export")
    encoder = model.checkpoint_items["encoder"]
    head = encoder if config.task in ENCODER_TASKS else model
    self.task = config.task
    self.model_variables = list(head.variables)
    self.text_encoder = text_encoder
    self.label_names = tf.Variable(tf.constant(label_names(config), tf.string), trainable=False,
                                   name="label_names")
    # Plain functions are not tracked, so the Keras models stay out of the object graph.
    self._run_encoder = lambda features: encoder(features, training=False)
    self._run_head = lambda features: head(features, training=False)

    texts = [tf.TensorSpec([None], tf.string, name="text")]
    if config.sentence_pair:
      texts.append(tf.TensorSpec([None], tf.string, name="text_b"))
    token_ids = [tf.TensorSpec([None, config.seq_length], tf.int32, name=name) for name in INPUT_NAMES]
    # No AutoGraph: the tokenizer and the zoo models have no Python control flow on tensors, and
    # converting tensorflow-text's and Keras's code took half of the export time.
    self.from_token_ids = tf.function(self._outputs, input_signature=token_ids, autograph=False)
    self.encoder_from_token_ids = (self.from_token_ids if config.task in ENCODER_TASKS
                                   else tf.function(self._encoder_outputs, input_signature=token_ids,
                                                    autograph=False))
    self.serving_default = tf.function(self._from_text, input_signature=texts, autograph=False)
    self.encode = tf.function(self._encode, input_signature=texts, autograph=False)

  def signatures(self):
    """`{name: tf.function}` for `tf.saved_model.save`."""
    return {name: getattr(self, name) for name in SIGNATURES}

  def _outputs(self, input_word_ids, input_mask, input_type_ids):
    if self.task in ENCODER_TASKS:
      return self._encoder_outputs(input_word_ids, input_mask, input_type_ids)
    features = dict(input_word_ids=input_word_ids, input_mask=input_mask, input_type_ids=input_type_ids)
    logits = tf.cast(self._run_head(features), tf.float32)   # [B, C]
    if self.task == "regress":
      return dict(predictions=logits[:, 0])
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return dict(probabilities=tf.nn.softmax(logits), label_ids=label_ids,
                labels=tf.gather(self.label_names, label_ids), logits=logits)

  def _encoder_outputs(self, input_word_ids, input_mask, input_type_ids):
    outputs = self._run_encoder(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                                     input_type_ids=input_type_ids))
    return {name: tf.cast(outputs[name], tf.float32) for name in ("sequence_output", "pooled_output")}

  def _from_text(self, text, text_b=None):
    return self.from_token_ids(**self.text_encoder.encode(text, text_b))

  def _encode(self, text, text_b=None):
    return self.encoder_from_token_ids(**self.text_encoder.encode(text, text_b))


def model_info(config, checkpoint):
  """What was exported and from where, for `model_info.json`."""
  return dict(format=MODEL_INFO_FORMAT, task=config.task, model=config.model,
              model_overrides=config.model_overrides, seq_length=config.seq_length,
              lower_case=config.lower_case, sentence_pair=config.sentence_pair, vocab_size=config.vocab_size,
              num_classes=config.num_classes if config.task in ("classify", "regress") else None,
              label_names=label_names(config) if config.task == "classify" else None, checkpoint=checkpoint)


def saved_signatures(path):
  """`{signature: {"inputs": {name: "int32 [None, 128]", ...}, "outputs": {...}}}` of a written SavedModel.

  Read from `saved_model.pb`, as `saved_model_cli show` prints them (None: any size).
  """
  with tf.io.gfile.GFile(os.path.join(path, "saved_model.pb"), "rb") as file:
    meta_graph = saved_model_pb2.SavedModel.FromString(file.read()).meta_graphs[0]

  def describe(tensors):
    return {name: f"{tf.dtypes.as_dtype(tensor.dtype).name} {tf.TensorShape(tensor.tensor_shape).as_list()}"
            for name, tensor in sorted(tensors.items())}

  return {name: dict(inputs=describe(signature.inputs), outputs=describe(signature.outputs))
          for name, signature in sorted(meta_graph.signature_def.items()) if not name.startswith("__")}


def write_saved_model(module, base, info):
  """Saves `module` as `base/<next version>` through a temporary directory; returns the version dir.

  `model_info.json` beside `saved_model.pb` holds `info` and the saved signatures.
  """
  tf.io.gfile.makedirs(base)
  version = next_version(base)
  temporary = os.path.join(base, f".tmp-{version}-{os.getpid()}")
  try:
    tf.saved_model.save(module, temporary, signatures=module.signatures())
    info = dict(info, signatures=saved_signatures(temporary))
    with tf.io.gfile.GFile(os.path.join(temporary, MODEL_INFO_FILE), "w") as file:
      file.write(json.dumps(info, indent=2) + "\n")
    for _ in range(RENAME_ATTEMPTS):
      target = os.path.join(base, str(version))
      try:
        tf.io.gfile.rename(temporary, target)
        return target
      except tf.errors.AlreadyExistsError:   # another export took this version meanwhile
        version = next_version(base)
    raise RuntimeError(f"could not find a free version number in {base} after {RENAME_ATTEMPTS} attempts")
  except BaseException:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.rmtree(temporary)
    raise


def export(model_dir, out, checkpoint=None):
  """Exports a training run's model as a SavedModel version for TensorFlow Serving.

  Args:
    model_dir: the `--model-dir` of a `tpu.train` run (local or gs://): `config.json`,
      `vocab.txt` and `checkpoints/`.
    out: the model base path; the SavedModel goes to `out/<version>`.
    checkpoint: a checkpoint prefix or directory; default the latest of `model_dir`.

  Returns:
    The written version directory.

  Raises:
    FileNotFoundError: no such model dir, config, vocabulary or checkpoint.
    ValueError: the files do not fit together.
    RuntimeError: called inside a distribution strategy's scope.
  """
  if not tf.io.gfile.isdir(model_dir):
    raise FileNotFoundError(f"model dir {model_dir} does not exist")
  config = TrainConfig.from_model_dir(model_dir)
  vocab_path = os.path.join(model_dir, VOCAB_FILE)
  if not tf.io.gfile.exists(vocab_path):
    raise FileNotFoundError(f"{model_dir} holds no {VOCAB_FILE}: is it the --model-dir of a training run?")
  vocab = load_vocab(vocab_path)
  if len(vocab) != config.vocab_size:
    raise ValueError(f"{vocab_path} has {len(vocab)} tokens, but config.json says vocab_size="
                     f"{config.vocab_size}")
  prefix = find_checkpoint(checkpoint or model_dir)
  model = restore_model(config, prefix)
  text_encoder = TextEncoder(vocab, seq_length=config.seq_length, lower_case=config.lower_case)
  module = ServingModule(model, config, text_encoder)
  return write_saved_model(module, out, model_info(config, prefix))


def parser():
  p = argparse.ArgumentParser(
      prog="python -m export.saved_model", description=__doc__.split("\n\n")[0],
      epilog="Serve with: tensorflow_model_server --model_base_path=BASE --model_name=NAME "
             "--rest_api_port=8501. Processes that load the SavedModel must `import tensorflow_text` first.")
  p.add_argument("--model-dir", required=True, metavar="DIR",
                 help="the --model-dir of a `python -m tpu.train` run (local or gs://)")
  p.add_argument("--out", metavar="BASE",
                 help=f"the model base path; writes BASE/<version> (default: DIR/{EXPORT_DIR})")
  p.add_argument("--checkpoint", metavar="PATH",
                 help="checkpoint prefix or directory (default: the latest in DIR/checkpoints)")
  return p


def main(argv=None):
  args = parser().parse_args(argv)
  tf.get_logger().setLevel("WARNING")
  try:
    path = export(args.model_dir, args.out or os.path.join(args.model_dir, EXPORT_DIR), args.checkpoint)
  except (FileNotFoundError, ValueError) as error:
    print(f"export.saved_model: error: {error}", file=sys.stderr)
    return 2
  except tf.errors.OpError as error:
    print(f"export.saved_model: error: {error.message}", file=sys.stderr)
    return 1
  print(path)
  return 0


if __name__ == "__main__":
  sys.exit(main())
