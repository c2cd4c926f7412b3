"""Multiple choice (RACE, SWAG): one score per option, a softmax over the options.

Each example is a context, a question and N options. Option k becomes the text pair
`[CLS] context [SEP] question_k [SEP]` ("context_first", transformers' layout for RACE
and SWAG, `utils_multiple_choice.py`) or `[CLS] question_k [SEP] context [SEP]`
("question_first", the Funnel-Transformer authors' RACE code), where `question_k` is the
question with the option in its blank (`_`, RACE's cloze questions) or, without one, the
question, a space and the option. `zoo.models.MultipleChoice` scores each pair's pooled
output with one dense layer shared by the options; the loss is the softmax
cross-entropy over the N scores, the metric accuracy.

Truncation, as the Funnel-Transformer authors' RACE code does it: `question_k` keeps its
last `max_qa_length` tokens (128 in the paper's RACE runs, with T = 512), and the context
keeps what fits before the remaining room runs out (its end is cut). A context is never
shortened to make room for a long option beyond that: every option sees the same
question budget.

Example:
  >>> import tensorflow as tf
  >>> filled = question_with_options(tf.constant(["The cat sat on _ .", "Why?"]),
  ...                                tf.constant([["a mat", "a hat"], ["yes", "no"]]))
  >>> [[text.decode() for text in row] for row in filled.numpy()]
  [['The cat sat on a mat .', 'The cat sat on a hat .'], ['Why? yes', 'Why? no']]
"""

from tpu.tasks.base import Task
from tpu.tasks.base import build_encoder
from tpu.tasks.sequence import SoftmaxLoss
from tpu.tasks.task_registry import Setting
from tpu.tasks.task_registry import register
from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

LAYOUTS = ("context_first", "question_first")
BLANK = "_"


def question_with_options(questions, options):
  """string `[B]` questions and `[B, N]` options -> `[B, N]`: each option in its question's blank (every
  `_`), or after the question and a space where it has none."""
  options = tf.convert_to_tensor(options)
  shape = tf.shape(options)
  repeated = tf.reshape(tf.repeat(questions, shape[1]), [-1])                   # [B·N]
  flat_options = tf.reshape(options, [-1])
  parts = tf.strings.split(repeated, BLANK)                                     # [B·N, (pieces)]
  index = tf.range(tf.size(parts.values, out_type=tf.int64))
  last = tf.equal(index, tf.gather(parts.row_limits(), parts.value_rowids()) - 1)   # a question's last piece
  filled = tf.where(last, parts.values,
                    tf.strings.join([parts.values, tf.gather(flat_options, parts.value_rowids())]))
  filled = tf.strings.reduce_join(tf.RaggedTensor.from_row_splits(filled, parts.row_splits), axis=1)
  appended = tf.strings.join([repeated, flat_options], separator=" ")
  has_blank = tf.strings.regex_full_match(repeated, f".*{BLANK}.*")
  return tf.reshape(tf.where(has_blank, filled, appended), shape)


def keep_last(tokens, count):
  """The last `count` tokens of each row of a ragged `[R, (n)]`."""
  positions = tf.ragged.range(tokens.row_lengths())
  return tf.ragged.boolean_mask(tokens, positions >= tf.expand_dims(tokens.row_lengths() - count, 1))


def keep_first(tokens, counts):
  """The first `counts[r]` tokens of each row r of a ragged `[R, (n)]`."""
  positions = tf.ragged.range(tokens.row_lengths())
  return tf.ragged.boolean_mask(tokens, positions < tf.expand_dims(tf.cast(counts, positions.dtype), 1))


def encode_choices(text_encoder, contexts, questions, options, max_qa_length, layout):
  """int32 `[B, N, T]` encoder inputs of the N text pairs of each example (see the module docstring)."""
  from zoo.text.packing import pack
  options = tf.convert_to_tensor(options)
  shape = tf.shape(options)
  seq_length = text_encoder.seq_length
  qa = keep_last(text_encoder.tokenize(tf.reshape(question_with_options(questions, options), [-1])),
                 max_qa_length)                                                  # [B·N, (tokens)]
  context = text_encoder.tokenize(contexts)                                      # [B, (tokens)]
  context = tf.gather(context, tf.repeat(tf.range(shape[0]), shape[1]))          # [B·N, (tokens)]
  room = tf.maximum(seq_length - 3 - tf.cast(qa.row_lengths(), tf.int32), 0)
  context = keep_first(context, room)
  segments = [context, qa] if layout == "context_first" else [qa, context]
  features = pack(segments, seq_length, cls_id=text_encoder.cls_id, sep_id=text_encoder.sep_id,
                  pad_id=text_encoder.pad_id, truncator="waterfall", cls_type_id=text_encoder.cls_type_id)
  return {name: tf.reshape(value, tf.concat([shape, [seq_length]], 0)) for name, value in features.items()}


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
      Setting("max_qa_length", int, 128, "tokens of the question with an option kept (its last ones)",
              minimum=1, input=True),
      Setting("num_choices", int, None, "options per example (from the training data)", minimum=2, flag=False,
              input=True),
  )
  stat_names = ("accuracy",)
  prediction_fields = (("choice", "choices", "integer"), ("probabilities", "probabilities", "list"))

  def data_metadata(self, source):
    return dict(sentence_pair=True, num_choices=source.num_choices, num_classes=None, label_names=None)

  def check_source(self, source, spec):
    super().check_source(source, spec)
    if self.config.num_choices is not None and source.num_choices != self.config.num_choices:
      raise ValueError(f"{spec} has {source.num_choices} options per example, but this run has num_choices="
                       f"{self.config.num_choices}")

  def build(self):
    from zoo import models
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.MultipleChoice(build_encoder(self.config), dropout=dropout, name="multiple_choice")

  def features(self, raw, text_encoder, seed=None):
    config = self.config
    features = encode_choices(text_encoder, raw["context"], raw["question"], raw["options"],
                              config.max_qa_length, config.choice_layout)
    for value in features.values():   # static shapes: [B, N, T]
      value.set_shape([raw["options"].shape[0], config.num_choices, config.seq_length])
    features["label"] = tf.cast(raw["label"], tf.int32)
    features["weight"] = tf.ones_like(features["label"], tf.float32)
    return features

  def eval_outputs(self, features, outputs, denominators):
    return (dict(loss=(self.loss(features, outputs, 1.0), denominators["examples"])),
            dict(scores=outputs, label=features["label"], weight=features["weight"]))

  def metrics(self, stats, examples):
    keep = examples["weight"] > 0
    results = super().metrics(stats, examples)
    results["accuracy"] = float((examples["scores"][keep].argmax(axis=-1) == examples["label"][keep]).mean())
    results["examples"] = int(keep.sum())
    return results

  # Serving: the context and question of each example, and its options as a string [B, N].
  def serving_network(self, model):
    return model

  def serving_text_inputs(self):
    return ("context", "question", "options")

  def serving_text_shapes(self):
    return dict(options=[None, None])

  def token_id_shape(self):
    return [None, None, self.config.seq_length]

  def encode_text(self, texts, text_encoder):
    return encode_choices(text_encoder, texts["context"], texts["question"], texts["options"],
                          self.config.max_qa_length, self.config.choice_layout)

  def encoder_outputs(self, encoder, features):
    """The encoder's outputs of each option's pair, `[B, N, ...]`."""
    from tpu.tasks.base import encoder_serving_outputs
    shape = tf.shape(features["input_word_ids"])
    flat = {name: tf.reshape(value, [-1, self.config.seq_length]) for name, value in features.items()}
    outputs = encoder_serving_outputs(encoder, flat)
    return {name: tf.reshape(value, tf.concat([shape[:2], tf.shape(value)[1:]], 0))
            for name, value in outputs.items()}

  def serving_outputs(self, network, features, label_names):
    scores = tf.cast(network(features, training=False), tf.float32)   # [B, N]
    return dict(scores=scores, probabilities=tf.nn.softmax(scores),
                choices=tf.argmax(scores, axis=-1, output_type=tf.int32))

  def export_info(self):
    return dict(super().export_info(), num_choices=self.config.num_choices,
                choice_layout=self.config.choice_layout, max_qa_length=self.config.max_qa_length)
