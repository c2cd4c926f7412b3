"""Multiple choice (RACE, SWAG): one score per option, a softmax over the options.

Each example is a context, a question and N options. Option k becomes the text pair
`[CLS] context [SEP] question_k [SEP]` ("context_first", transformers' layout for RACE
and SWAG, `utils_multiple_choice.py`) or `[CLS] question_k [SEP] context [SEP]`
("question_first", the Funnel-Transformer authors' RACE code), where `question_k` is the
question with the option in its blank (`_`, RACE's cloze questions; every blank, on any
line of the question) or, without one, the question, a space and the option.
`zoo.models.MultipleChoice` scores each pair's pooled output with one dense layer shared
by the options; the loss is the softmax cross-entropy over the N scores, the metric
accuracy.

Truncation, as the Funnel-Transformer authors' RACE code does it: `question_k` keeps its
last `max_qa_length` tokens (128 in the paper's RACE runs, with T = 512; by default a
quarter of `seq_length`, which is that), and the context keeps what fits before the
remaining room runs out (its end is cut). A context is never shortened to make room for a
long option beyond that: every option sees the same question budget. Where the last
`max_qa_length` tokens would hold none of the option (a cloze question whose text after
its last blank is that long), `question_k` keeps the `max_qa_length` tokens that end with
the option instead (its first ones where the option is nearer its start), so no option is
cut away. `max_qa_length` must leave the context room: at most `seq_length` - 4 ([CLS],
two [SEP]s and a context token); a larger one is refused before training or exporting.

Serving: the export takes each example's options as a string `[B, N]`; N must be the run's
`num_choices` (its training data's, which the export's `model_info.json` records). The
head scores each option on its own, so the network computes any N, but its scores were
learned with N options, and every reader gives a dataset one N: no run is trained to take
another count, and a call with one (or with no options) fails with an error naming both
counts; a call of no examples passes, its outputs `[0, num_choices]`. (A config without
`num_choices`, which no training run writes, takes any N >= 1.)

Example:
  >>> import tensorflow as tf
  >>> filled = question_with_options(tf.constant(["The cat sat on _ .", "Why?", "Look.\\nIt is _."]),
  ...                                tf.constant([["a mat", "a hat"], ["yes", "no"], ["red", "blue"]]))
  >>> for row in filled.numpy():
  ...   print([text.decode() for text in row])
  ['The cat sat on a mat .', 'The cat sat on a hat .']
  ['Why? yes', 'Why? no']
  ['Look.\\nIt is red.', 'Look.\\nIt is blue.']
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any
from typing import cast

from tpu.tasks.base import Config
from tpu.tasks.base import Features
from tpu.tasks.base import Stats
from tpu.tasks.base import Task
from tpu.tasks.base import build_encoder
from tpu.tasks.sequence import SoftmaxLoss
from tpu.tasks.task_registry import Setting
from tpu.tasks.task_registry import register
from zoo.lazy import lazy_module

if TYPE_CHECKING:
  from tpu.data import DataSource
  from tpu.data.choice_questions import MultipleChoiceSource
  from zoo.text import TextEncoder

tf = lazy_module("tensorflow")

LAYOUTS = ("context_first", "question_first")
BLANK = "_"
# [CLS], two [SEP]s and at least one token of the context: max_qa_length is at most seq_length - 4.
RESERVED = 4


def default_max_qa_length(seq_length: int) -> int:
  """`max_qa_length` when not set: a quarter of `seq_length` (128 of 512, the paper's RACE setting)."""
  return max(1, seq_length // 4)


def qa_length_problem(seq_length: int, max_qa_length: int) -> str | None:
  """None when a question with an option of `max_qa_length` tokens leaves the context room in a pair of
  `seq_length` tokens, else a message naming both and the largest valid `max_qa_length`."""
  largest = seq_length - RESERVED
  if largest < 1:
    return (f"seq_length {seq_length} is too short for multiple choice: an option's pair needs [CLS], two "
            f"[SEP]s, a context token and a question token, {RESERVED + 1} tokens at least")
  if max_qa_length > largest:
    return (f"max_qa_length {max_qa_length} leaves the context no room in pairs of seq_length {seq_length} "
            f"([CLS] context [SEP] question+option [SEP]): the largest valid max_qa_length is {largest} "
            f"(seq_length - {RESERVED})")
  return None


def _filled(questions, options):
  """Flat string `[B·N]` of `question_with_options`, and each up to the end of the option in its last
  blank ("" where the question has no blank)."""
  options = tf.convert_to_tensor(options)
  shape = tf.shape(options)
  repeated = tf.reshape(tf.repeat(questions, shape[1]), [-1])                   # [B·N]
  flat_options = tf.reshape(options, [-1])
  parts = tf.strings.split(repeated, BLANK)                                     # [B·N, (pieces)]
  has_blank = parts.row_lengths() > 1   # a "_" anywhere, whatever the line breaks around it
  index = tf.range(tf.size(parts.values, out_type=tf.int64))
  last = tf.equal(index, tf.gather(parts.row_limits(), parts.value_rowids()) - 1)   # a question's last piece
  pieces = tf.where(last, parts.values,
                    tf.strings.join([parts.values, tf.gather(flat_options, parts.value_rowids())]))
  filled = tf.strings.reduce_join(tf.RaggedTensor.from_row_splits(pieces, parts.row_splits), axis=1)
  head = tf.strings.reduce_join(tf.RaggedTensor.from_row_splits(tf.where(last, "", pieces), parts.row_splits),
                                axis=1)
  appended = tf.strings.join([repeated, flat_options], separator=" ")
  return tf.where(has_blank, filled, appended), tf.where(has_blank, head, "")


def question_with_options(questions: Any, options: Any) -> Any:
  """string `[B]` questions and `[B, N]` options -> `[B, N]`: each option in its question's blank (every
  `_`, on any line), or after the question and a space where it has none."""
  options = tf.convert_to_tensor(options)
  return tf.reshape(_filled(questions, options)[0], tf.shape(options))


def keep_option(tokens: Any, head_lengths: Any, count: Any) -> Any:
  """`count` tokens of each row r of a ragged `[R, (n)]`: its last ones or, where these would hold none of
  its first `head_lengths[r]` (a cloze question up to the end of its last blank's option; 0 without a
  blank), the first `count` that hold the last of those, so that the option is kept."""
  lengths = tokens.row_lengths()
  heads = tf.minimum(tf.cast(head_lengths, lengths.dtype), lengths)
  start = tf.maximum(tf.where((heads > 0) & (lengths - heads >= count), heads, lengths) - count, 0)
  positions = tf.ragged.range(lengths)
  start = tf.expand_dims(start, 1)
  return tf.ragged.boolean_mask(tokens, (positions >= start) & (positions < start + count))


def keep_first(tokens: Any, counts: Any) -> Any:
  """The first `counts[r]` tokens of each row r of a ragged `[R, (n)]`."""
  positions = tf.ragged.range(tokens.row_lengths())
  return tf.ragged.boolean_mask(tokens, positions < tf.expand_dims(tf.cast(counts, positions.dtype), 1))


def encode_choices(text_encoder: TextEncoder, contexts: Any, questions: Any, options: Any, max_qa_length: int,
                   layout: str) -> Features:
  """int32 `[B, N, T]` encoder inputs of the N text pairs of each example (see the module docstring).

  Raises:
    ValueError: `max_qa_length` leaves the context no room (`qa_length_problem`).
  """
  from zoo.text.packing import pack
  seq_length = text_encoder.seq_length
  problem = qa_length_problem(seq_length, max_qa_length)
  if problem:
    raise ValueError(problem)
  options = tf.convert_to_tensor(options)
  shape = tf.shape(options)
  filled, heads = _filled(questions, options)
  qa = keep_option(text_encoder.tokenize(filled), text_encoder.tokenize(heads).row_lengths(),
                   max_qa_length)                                                # [B·N, (tokens)]
  context = text_encoder.tokenize(contexts)                                      # [B, (tokens)]
  context = tf.gather(context, tf.repeat(tf.range(shape[0]), shape[1]))          # [B·N, (tokens)]
  room = seq_length - 3 - tf.cast(qa.row_lengths(), tf.int32)                   # >= 1
  context = keep_first(context, room)
  segments = [context, qa] if layout == "context_first" else [qa, context]
  features = pack(segments, seq_length, cls_id=text_encoder.cls_id, sep_id=text_encoder.sep_id,
                  pad_id=text_encoder.pad_id, truncator="waterfall", cls_type_id=text_encoder.cls_type_id)
  return {name: tf.reshape(value, tf.concat([shape, [seq_length]], 0)) for name, value in features.items()}


def qa_length(config: Config) -> int:
  """The run's `max_qa_length`: its own, or `default_max_qa_length` of its `seq_length`."""
  if config.max_qa_length is None:
    return default_max_qa_length(config.seq_length)
  return config.max_qa_length


def checked_choices(tensor: Any, num_choices: int | None, name: str) -> Any:
  """`tensor` `[B, N, ...]` (a serving input) once N is `num_choices` (any N >= 1 if None); a call with
  another N, or none, fails with an InvalidArgumentError naming `name` and both counts (core ops only). A
  call of no examples passes whatever its N, as `[0, num_choices, ...]`."""
  shape = tf.shape(tensor)
  count = shape[1]
  if num_choices is None:
    valid, takes, trained = count > 0, "any number of options per example", ""
  else:
    valid = tf.equal(count, num_choices) | tf.equal(shape[0], 0)
    takes, trained = f"{num_choices} options per example", " (the count it was trained with)"
  message = tf.where(tf.equal(count, 0),
                     f"{name}: an example needs options; this model takes {takes}, a call gave none",
                     tf.strings.format(f"{name}: this model takes {takes}{trained}, a call gave {{}}", count))
  check = tf.debugging.Assert(valid, [message], name="check_num_choices")
  with tf.control_dependencies([check]):
    if num_choices is None:
      return tf.identity(tensor)
    return tf.reshape(tensor, tf.concat([shape[:1], [num_choices], shape[2:]], 0))


@register
class MultipleChoiceTask(SoftmaxLoss, Task):
  """Multiple choice on `zoo.models.MultipleChoice`'s scores (see the module docstring)."""

  name = "multiple_choice"
  data_type = "multiple_choice"
  description = "multiple choice, e.g. RACE, SWAG (fine-tuning)"
  settings = (
      Setting("choice_layout", str, "context_first", "how an option's text pair is laid out: context_first "
              "([CLS] context [SEP] question+option [SEP], transformers') or question_first (the Funnel "
              "authors' RACE)", choices=LAYOUTS, input=True),
      Setting("max_qa_length", int, None, "tokens of the question with an option kept (its last ones), at "
              "most --seq-length - 4 (default: a quarter of --seq-length)", minimum=1, input=True),
      Setting("num_choices", int, None, "options per example (from the training data)", minimum=2, flag=False,
              input=True),
  )
  stat_names = ("accuracy",)
  prediction_fields = (("choice", "choices", "integer"), ("probabilities", "probabilities", "list"))

  @classmethod
  def derived_settings(cls, config: Config) -> dict[str, Any]:
    return dict(max_qa_length=qa_length(config))

  @classmethod
  def check_config(cls, config: Config) -> None:
    problem = qa_length_problem(config.seq_length, qa_length(config))
    if problem:
      raise ValueError(problem)

  def data_metadata(self, source: DataSource) -> dict[str, Any]:
    choices = cast("MultipleChoiceSource", source)   # the data type "multiple_choice" (`check_source`)
    return dict(sentence_pair=True, num_choices=choices.num_choices, num_classes=None, label_names=None)

  def check_source(self, source: DataSource, spec: str) -> None:
    super().check_source(source, spec)
    choices = cast("MultipleChoiceSource", source)   # `super().check_source` refuses other data
    if self.config.num_choices is not None and choices.num_choices != self.config.num_choices:
      raise ValueError(f"{spec} has {choices.num_choices} options per example, but this run has num_choices="
                       f"{self.config.num_choices}")

  def build(self) -> Any:
    from zoo import models
    self.check_config(self.config)   # an export reads config.json without validating it
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.MultipleChoice(build_encoder(self.config), dropout=dropout, name="multiple_choice")

  def features(self, raw: Features, text_encoder: TextEncoder, seed: Any = None) -> Features:
    config = self.config
    features = encode_choices(text_encoder, raw["context"], raw["question"], raw["options"],
                              qa_length(config), config.choice_layout)
    for value in features.values():   # static shapes: [B, N, T]
      value.set_shape([raw["options"].shape[0], config.num_choices, config.seq_length])
    features["label"] = tf.cast(raw["label"], tf.int32)
    features["weight"] = tf.ones_like(features["label"], tf.float32)
    return features

  def eval_outputs(self, features: Features, outputs: Any, denominators: Features) -> tuple[Stats, Features]:
    return (dict(loss=(self.loss(features, outputs, 1.0), denominators["examples"])),
            dict(scores=outputs, label=features["label"], weight=features["weight"]))

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    keep = examples["weight"] > 0
    results = super().metrics(stats, examples)
    results["accuracy"] = float((examples["scores"][keep].argmax(axis=-1) == examples["label"][keep]).mean())
    results["examples"] = int(keep.sum())
    return results

  # Serving: the context and question of each example, and its options as a string [B, N], N the trained
  # num_choices (`checked_choices`; the token-id signatures check their N too).
  def serving_network(self, model: Any) -> Any:
    return model

  def serving_text_inputs(self) -> tuple[str, ...]:
    return ("context", "question", "options")

  def serving_text_shapes(self) -> dict[str, list[int | None]]:
    return dict(options=[None, None])

  def token_id_shape(self) -> list[int | None]:
    return [None, None, self.config.seq_length]

  def encode_text(self, texts: Features, text_encoder: TextEncoder) -> Features:
    options = checked_choices(texts["options"], self.config.num_choices, "options")
    return encode_choices(text_encoder, texts["context"], texts["question"], options,
                          qa_length(self.config), self.config.choice_layout)

  def encoder_outputs(self, encoder: Any, features: Features) -> Features:
    """The encoder's outputs of each option's pair, `[B, N, ...]`."""
    from tpu.tasks.base import encoder_serving_outputs
    features = dict(features, input_word_ids=checked_choices(features["input_word_ids"],
                                                             self.config.num_choices, "input_word_ids"))
    shape = tf.shape(features["input_word_ids"])
    flat = {name: tf.reshape(value, [-1, self.config.seq_length]) for name, value in features.items()}
    outputs = encoder_serving_outputs(encoder, flat)
    return {name: tf.reshape(value, tf.concat([shape[:2], tf.shape(value)[1:]], 0))
            for name, value in outputs.items()}

  def serving_outputs(self, network: Any, features: Features, label_names: Any) -> Features:
    features = dict(features, input_word_ids=checked_choices(features["input_word_ids"],
                                                             self.config.num_choices, "input_word_ids"))
    scores = tf.cast(network(features, training=False), tf.float32)   # [B, N]
    return dict(scores=scores, probabilities=tf.nn.softmax(scores),
                choices=tf.argmax(scores, axis=-1, output_type=tf.int32))

  def export_info(self) -> dict[str, Any]:
    return dict(super().export_info(), num_choices=self.config.num_choices,
                choice_layout=self.config.choice_layout, max_qa_length=qa_length(self.config))
