"""The training tasks. A `Task` owns everything that differs from one task to another.

    mlm       BERT's masked language modelling (pre-training)
    electra   ELECTRA's generator + replaced-token detection (pre-training)
    classify  sequence classification, softmax cross-entropy
    regress   sequence regression, squared error
    tag       token classification (e.g. named entities), a label per word on its first piece
    squad     extractive question answering (SQuAD v1.1 and v2.0), answer spans over context windows

`TASKS` is the one registry: the command line's `--task` choices, config validation,
the exporter and `export.predict` all ask it. A task knows

- its data: the `tpu.data` task type it reads (`data_type`) and the metadata it takes
  from the training data into the config (`data_metadata`);
- its model: `build()` (and `encoder(model)`, the part `--init-checkpoint` restores);
- its features: `expand()` turns each raw example into the examples the model sees (by
  default itself; SQuAD: its question and context windows), `features()` turns batches
  of them into the model's inputs;
- its loss and metrics: `denominators`, `loss_and_stats`, `eval_outputs`, `metrics`;
- how it serves: `serving_network`, `serving_outputs`, `label_names` and
  `prediction_fields`, which tell `export.predict` how to print each output.

Adding a task is one subclass decorated with `@register` (and its tests).

Losses are exact over the GLOBAL batch under any number of replicas: each replica
divides its sum of per-example (or per-token) losses by the global count of examples
(or masked tokens, or real tokens), which the job all-reduces first (`zoo.models.losses`
with an explicit denominator). Summing the replicas' losses and gradients then gives
the loss and gradient of one device running the whole batch.

Statistics are pairs `(numerator, denominator)` of sums; summed over replicas and steps,
`numerator / denominator` is the metric.

This module imports TensorFlow on first use only, so `--help` stays fast.

Example:
  >>> names()[:5]
  ('mlm', 'electra', 'classify', 'regress', 'tag')
  >>> TASKS["classify"].data_type
  'classification'
"""

from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

TASKS = {}


def register(cls):
  """Class decorator: adds a `Task` subclass to `TASKS` under its `name`."""
  if not cls.name or cls.name in TASKS:
    raise ValueError(f"a task needs a new, non-empty name; got {cls.name!r} (taken: {sorted(TASKS)})")
  TASKS[cls.name] = cls
  return cls


def names():
  """The registered task names, in registration order."""
  return tuple(TASKS)


def get_task(config):
  """The `Task` of `config.task`."""
  if config.task not in TASKS:
    raise ValueError(f"unknown task {config.task!r}; choose one of: {', '.join(TASKS)}")
  return TASKS[config.task](config)


def build_model(config):
  """Builds the model of a (resolved) config: what the job trains and the exporter restores."""
  return get_task(config).build()


def build_encoder(config, **extra_overrides):
  """The encoder of `config.model` with the config's overrides, vocabulary and static length."""
  from zoo import presets
  overrides = dict(config.model_overrides)
  if config.dropout is not None:
    overrides.setdefault("dropout", config.dropout)
    overrides.setdefault("attention_dropout", config.dropout)
  overrides.update(extra_overrides)
  overrides.update(vocab_size=config.vocab_size, seq_length=config.seq_length)
  return presets.build(config.model, **overrides)


def generator_overrides(config):
  """ELECTRA's generator: the model's preset at a quarter of the width (Clark et al., 2020, Sec. 3.2).

  Width, heads and feed-forward width are divided by 4 (heads at least 1); the word
  embeddings keep the discriminator's width so the two can share them.
  `config.generator_overrides` replaces these defaults key by key.
  """
  from zoo import presets
  base = {**presets.get(config.model).config, **config.model_overrides}
  embedding_width = base.get("embedding_width") or base["hidden_size"]
  defaults = dict(hidden_size=max(1, base["hidden_size"] // 4), num_heads=max(1, base["num_heads"] // 4),
                  intermediate_size=max(1, base["intermediate_size"] // 4), embedding_width=embedding_width)
  return {**defaults, **(config.generator_overrides or {})}


def _check_full_length(config, what):
  """Token-level tasks predict every position: an encoder-only Funnel pools the sequence away."""
  from zoo import presets
  config_values = {**presets.get(config.model).config, **config.model_overrides}
  if presets.get(config.model).family == "funnel" and not config_values.get("num_decoder_layers"):
    choices = [name for name in presets.names() if name.endswith("_decoder")]
    raise ValueError(f"task {config.task!r} needs {what} with a full-length sequence output; "
                     f"{config.model} is an encoder-only Funnel. Use a preset with the decoder: "
                     f"{', '.join(choices)}, or set model_overrides num_decoder_layers")


def encoder_outputs(encoder, features):
  """The encoder's float32 `sequence_output` and `pooled_output` (inference mode)."""
  outputs = encoder(features, training=False)
  return {name: tf.cast(outputs[name], tf.float32) for name in ("sequence_output", "pooled_output")}


def _weighted_sum(values, weights):
  return tf.reduce_sum(tf.cast(values, tf.float32) * tf.cast(weights, tf.float32))


def _encode(raw, text_encoder):
  return text_encoder.encode(raw["text_a"], raw.get("text_b"))


class Task:
  """Base class: a pre-training task served as an encoder (its outputs are the encoder's).

  Subclasses set `name`, `data_type` (the `tpu.data` task type they read: "text",
  "classification", "regression") and `stat_names` (the statistics `loss_and_stats`
  returns), and override what differs.
  """

  name = ""
  data_type = ""
  description = ""
  stat_names = ()
  # Whether the input pipeline packs raw text into full-length examples before `features`
  # (pre-training), instead of one example per text.
  packs_text = False

  def __init__(self, config):
    self.config = config

  @classmethod
  def readers_of(cls, data_type):
    """Names of the tasks that train on data of `data_type`."""
    return [name for name, task in TASKS.items() if task.data_type == data_type]

  # Data.
  def check_source(self, source, spec):
    """Raises a ValueError when the training data does not fit this task."""
    if self.data_type != "text" and source.task_type != self.data_type:
      others = self.readers_of(source.task_type)
      hint = f": use --task {' or '.join(others)}" if others else ""
      raise ValueError(f"task {self.name!r} needs {self.data_type} data, but {spec} is "
                       f"{source.task_type}{hint}")

  def data_metadata(self, source):
    """Config fields this task takes from the training data (`tpu.data.DataSource`)."""
    return dict(sentence_pair=source.sentence_pair)

  def eval_load_kwargs(self, train_source):
    """Extra `tpu.data.load` arguments for the evaluation data, given the training data."""
    return {}

  @classmethod
  def check_config(cls, config):
    """Raises a ValueError for settings this task cannot train with (`TrainConfig.validate` asks)."""

  def prepare_evaluation(self, source):
    """Reads what `metrics` needs from the evaluation data besides the model's outputs (SQuAD's
    contexts and gold answers); called once before evaluating."""

  # Model.
  def build(self):
    """Returns the Keras model (build it under the strategy's scope)."""
    raise NotImplementedError

  def encoder(self, model):
    """The encoder inside `model` (what `--init-checkpoint` restores and `encode` serves)."""
    return model.checkpoint_items["encoder"]

  # Input pipeline.
  def expand(self, examples, text_encoder):
    """Unbatched raw examples -> the unbatched examples `features` gets in batches (default: the same)."""
    return examples

  def features(self, raw, text_encoder, seed=None):
    """Batched raw examples (`text_a`, `text_b`?, `label`?) -> the model's features."""
    return _encode(raw, text_encoder)

  # Loss.
  def denominators(self, features):
    """Local float32 counts that normalise the loss, all-reduced over replicas by the job."""
    raise NotImplementedError

  def loss_and_stats(self, features, outputs, denominators):
    """(this replica's share of the global loss, dict of statistics (numerator, denominator)).

    The statistics are shown beside the loss while training; "loss" is not one of them.
    """
    raise NotImplementedError

  def eval_outputs(self, features, outputs, denominators):
    """(statistic sums, per-example arrays) of one evaluation batch (per-example may be empty)."""
    _, stats = self.loss_and_stats(features, outputs, denominators)
    return stats, {}

  def metrics(self, stats, examples):
    """Final evaluation metrics from summed statistics and concatenated per-example arrays."""
    return {name: float(numerator / denominator) if denominator else float("nan")
            for name, (numerator, denominator) in stats.items()}

  def eval_predictions(self):
    """`(predictions, null_odds or None)` of the last `metrics` call, `{example id: value}`, for tasks
    whose predictions an outside script scores (SQuAD's official evaluation); None for the others."""
    return None

  # Serving.
  def serving_network(self, model):
    """The Keras model the exported signatures call (its variables are what the export keeps)."""
    return self.encoder(model)

  def serving_outputs(self, network, features, label_names):
    """The `serving_default` outputs (float32 or string tensors) for int32 features `[B, T]`.

    Args:
      network: `serving_network(model)`.
      features: `input_word_ids`, `input_mask`, `input_type_ids`.
      label_names: string `[C]` tensor of `label_names()`.
    """
    return encoder_outputs(network, features)

  def label_names(self):
    """The class names the export maps label ids to ([] for tasks without classes)."""
    return []

  def serving_text_inputs(self):
    """The names of the string `[B]` inputs of `serving_default` and `encode`."""
    return ("text", "text_b") if self.config.sentence_pair else ("text",)

  def encode_text(self, texts, text_encoder):
    """int32 `[B, T]` encoder inputs of the string inputs (a dict keyed by `serving_text_inputs`)."""
    return text_encoder.encode(*(texts[name] for name in self.serving_text_inputs()))

  def serving_from_text(self, texts, text_encoder, from_token_ids, label_names):
    """The `serving_default` outputs for the string inputs.

    Args:
      texts: dict of string `[B]` tensors keyed by `serving_text_inputs()`.
      text_encoder: the run's `zoo.text.TextEncoder`.
      from_token_ids: the `from_token_ids` signature (`serving_outputs` on int32 `[B, T]` features).
      label_names: string `[C]` tensor of `label_names()`.
    """
    return from_token_ids(**self.encode_text(texts, text_encoder))

  # How `export.predict` shows one example's outputs: (key, signature output, kind), kind is
  # "text" (a string), "number" (a float), "integer", "flag" (a bool), "list" (a vector), "texts"
  # (a vector of strings) or "by_label" (a vector as a dict keyed by the label names). An optional
  # fourth element names an int output holding each example's length: vectors are cut to it
  # (padding dropped).
  prediction_fields = (("pooled_output", "pooled_output", "list"),)

  def export_info(self):
    """Task metadata for the export's `model_info.json`."""
    return dict(task=self.name)


@register
class MaskedLMTask(Task):
  """BERT's masked language modelling (15% of tokens, 80/10/10, optional whole words)."""

  name = "mlm"
  data_type = "text"
  description = "masked language modelling (pre-training)"
  stat_names = ("mlm_loss", "mlm_accuracy")
  packs_text = True

  def build(self):
    from zoo import models
    _check_full_length(self.config, "an encoder")
    return models.MaskedLMPretrainer(build_encoder(self.config), name="pretrainer")

  def features(self, raw, text_encoder, seed=None):
    from zoo.text import MaskedLMMasker
    masker = MaskedLMMasker.from_encoder(
        text_encoder, max_predictions_per_seq=self.config.max_predictions_per_seq,
        whole_word=self.config.whole_word_masking)
    # Packed text and pre-tokenized records arrive as ids; masking is core TensorFlow only.
    inputs = dict(raw) if "input_word_ids" in raw else _encode(raw, text_encoder)
    return masker(inputs, seed=seed)

  def denominators(self, features):
    return dict(masked=tf.reduce_sum(features["masked_lm_weights"]))

  def _mlm(self, features, logits, count):
    from zoo.models import losses
    weights = features["masked_lm_weights"]
    labels = features["masked_lm_ids"]
    loss = losses.masked_lm_loss(labels, logits, weights, denominator=count)
    correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels)
    return loss, dict(mlm_loss=(loss * count, count), mlm_accuracy=(_weighted_sum(correct, weights), count))

  def loss_and_stats(self, features, outputs, denominators):
    return self._mlm(features, outputs["mlm_logits"], denominators["masked"])

  def metrics(self, stats, examples):
    results = super().metrics(stats, examples)
    return dict(loss=results["mlm_loss"], **results)


@register
class ElectraTask(MaskedLMTask):
  """ELECTRA: generator MLM loss + λ · replaced-token detection over real tokens."""

  name = "electra"
  description = "ELECTRA replaced-token detection (pre-training)"
  stat_names = ("mlm_loss", "mlm_accuracy", "disc_loss", "disc_accuracy")

  def build(self):
    from zoo import models
    _check_full_length(self.config, "a discriminator and a generator")
    generator = build_encoder(self.config, **generator_overrides(self.config))
    return models.ElectraPretrainer(generator, build_encoder(self.config),
                                    discriminator_weight=self.config.discriminator_weight, name="electra")

  def denominators(self, features):
    return dict(masked=tf.reduce_sum(features["masked_lm_weights"]),
                tokens=tf.reduce_sum(tf.cast(features["input_mask"], tf.float32)))

  def loss_and_stats(self, features, outputs, denominators):
    from zoo.models import losses
    mlm_loss, stats = self._mlm(features, outputs["mlm_logits"], denominators["masked"])
    tokens = denominators["tokens"]
    real = features["input_mask"]
    disc_loss = losses.replaced_token_loss(outputs["disc_labels"], outputs["disc_logits"], real,
                                           denominator=tokens)
    labels = tf.cast(outputs["disc_labels"], tf.float32)
    correct = tf.equal(tf.cast(tf.cast(outputs["disc_logits"], tf.float32) > 0, tf.float32), labels)
    stats.update(disc_loss=(disc_loss * tokens, tokens), disc_accuracy=(_weighted_sum(correct, real), tokens))
    return mlm_loss + self.config.discriminator_weight * disc_loss, stats

  def metrics(self, stats, examples):
    results = Task.metrics(self, stats, examples)
    return dict(loss=results["mlm_loss"] + self.config.discriminator_weight * results["disc_loss"], **results)


class _SequenceTask(Task):
  """A task with one label per example, on `SequenceClassifier`'s logits; served as the whole model."""

  label_dtype = "int32"

  def _classifier(self, num_classes, name):
    from zoo import models
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.SequenceClassifier(build_encoder(self.config), num_classes=num_classes, dropout=dropout,
                                     name=name)

  def features(self, raw, text_encoder, seed=None):
    features = _encode(raw, text_encoder)
    features["label"] = tf.cast(raw["label"], self.label_dtype)
    features["weight"] = tf.ones_like(features["label"], tf.float32)
    return features

  def denominators(self, features):
    return dict(examples=tf.reduce_sum(features["weight"]))

  def loss(self, features, outputs, denominator=None):
    raise NotImplementedError

  def serving_network(self, model):
    return model

  def _keep(self, examples):
    return examples["weight"] > 0


@register
class ClassifyTask(_SequenceTask):
  """Sequence classification: softmax cross-entropy on `SequenceClassifier`'s logits."""

  name = "classify"
  data_type = "classification"
  description = "sequence classification (fine-tuning)"
  stat_names = ("accuracy",)
  prediction_fields = (("label", "labels", "text"), ("probabilities", "probabilities", "by_label"))

  def data_metadata(self, source):
    return dict(super().data_metadata(source), num_classes=source.num_classes,
                label_names=list(source.label_names))

  def eval_load_kwargs(self, train_source):
    return dict(label_names=train_source.label_names)

  def build(self):
    return self._classifier(self.config.num_classes, "classifier")

  def loss(self, features, outputs, denominator=None):
    from zoo.models import losses
    return losses.classification_loss(features["label"], outputs, features["weight"], denominator)

  def loss_and_stats(self, features, outputs, denominators):
    count = denominators["examples"]
    correct = tf.equal(tf.argmax(outputs, axis=-1, output_type=tf.int32), features["label"])
    accuracy = (_weighted_sum(correct, features["weight"]), count)
    return self.loss(features, outputs, count), dict(accuracy=accuracy)

  def eval_outputs(self, features, outputs, denominators):
    count = denominators["examples"]
    return (dict(loss=(self.loss(features, outputs, 1.0), count)),
            dict(logits=outputs, label=features["label"], weight=features["weight"]))

  def metrics(self, stats, examples):
    from tpu import metrics
    keep = self._keep(examples)
    results = super().metrics(stats, examples)
    results.update(metrics.classification_metrics(examples["label"][keep],
                                                  examples["logits"][keep].argmax(axis=-1),
                                                  num_classes=self.config.num_classes))
    results["examples"] = int(keep.sum())
    return results

  def label_names(self):
    """The class names (ids as names when the data had none)."""
    config = self.config
    if not config.num_classes:
      raise ValueError(f"the {self.name} run in {config.model_dir} has no num_classes in its config.json")
    names = list(config.label_names or [str(index) for index in range(config.num_classes)])
    if len(names) != config.num_classes:
      raise ValueError(f"config.json has {len(names)} label_names for num_classes={config.num_classes}")
    return [str(name) for name in names]

  def serving_outputs(self, network, features, label_names):
    logits = tf.cast(network(features, training=False), tf.float32)   # [B, C]
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return dict(probabilities=tf.nn.softmax(logits), label_ids=label_ids,
                labels=tf.gather(label_names, label_ids), logits=logits)

  def export_info(self):
    return dict(super().export_info(), num_classes=self.config.num_classes, label_names=self.label_names())


@register
class RegressTask(_SequenceTask):
  """Regression (e.g. STS-B): mean squared error on a one-output `SequenceClassifier`."""

  name = "regress"
  data_type = "regression"
  description = "sequence regression (fine-tuning)"
  label_dtype = "float32"
  prediction_fields = (("prediction", "predictions", "number"),)

  def data_metadata(self, source):
    return dict(super().data_metadata(source), num_classes=1, label_names=None)

  def build(self):
    return self._classifier(1, "regressor")

  def loss(self, features, outputs, denominator=None):
    from zoo.models import losses
    return losses.regression_loss(features["label"], outputs[:, 0], features["weight"], denominator)

  def loss_and_stats(self, features, outputs, denominators):
    return self.loss(features, outputs, denominators["examples"]), {}

  def eval_outputs(self, features, outputs, denominators):
    count = denominators["examples"]
    return (dict(loss=(self.loss(features, outputs, 1.0), count)),
            dict(predictions=outputs[:, 0], label=features["label"], weight=features["weight"]))

  def metrics(self, stats, examples):
    from tpu import metrics
    keep = self._keep(examples)
    results = super().metrics(stats, examples)
    results.update(metrics.regression_metrics(examples["label"][keep], examples["predictions"][keep]))
    results["examples"] = int(keep.sum())
    return results

  def serving_outputs(self, network, features, label_names):
    return dict(predictions=tf.cast(network(features, training=False), tf.float32)[:, 0])

  def export_info(self):
    return dict(super().export_info(), num_classes=1)


@register
class TagTask(Task):
  """Token classification (e.g. CoNLL-2003 named entities) on `TokenClassifier`'s logits.

  Each word's label sits on its first WordPiece (`tpu.tagging`); the loss is the
  cross-entropy there, over the global number of labelled words. Evaluation: CoNLL's
  entity precision, recall and F1 and the token accuracy, over the first `seq_length`
  words of each sentence (a word past the sequence length counts as predicted "O").
  Served on raw text: the words as the text encoder splits them, one tag and its
  probability per word (the words that fit in the sequence).
  """

  name = "tag"
  data_type = "tagging"
  description = "token classification, e.g. named entities (fine-tuning)"
  stat_names = ("token_accuracy",)
  prediction_fields = (("words", "words", "texts", "num_words"), ("tags", "tags", "texts", "num_words"),
                       ("probabilities", "tag_probabilities", "list", "num_words"))

  @property
  def max_words(self):
    """W: the words kept per sentence (each takes at least one of the T positions)."""
    return self.config.seq_length

  def data_metadata(self, source):
    names = list(source.label_names)
    return dict(sentence_pair=False, num_classes=len(names), label_names=names)

  def eval_load_kwargs(self, train_source):
    return dict(label_names=train_source.label_names)

  def build(self):
    from zoo import models
    _check_full_length(self.config, "a token classifier")
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.TokenClassifier(build_encoder(self.config), num_classes=self.config.num_classes,
                                  dropout=dropout, name="tagger")

  def features(self, raw, text_encoder, seed=None):
    from tpu import tagging
    features = tagging.encode_words(text_encoder, raw["words"], self.max_words)
    labels = tf.cast(tagging.pad_words(raw["tags"], self.max_words, -1), tf.int32)
    features["word_labels"] = labels
    features["word_weights"] = tf.cast((features["word_positions"] > 0) & (labels >= 0), tf.float32)
    features["weight"] = tf.ones_like(features["input_mask"][:, 0], tf.float32)
    return features

  def denominators(self, features):
    return dict(words=tf.reduce_sum(features["word_weights"]))

  def _word_logits(self, features, logits):
    """The logits of each word's first piece, `[B, W, C]`."""
    return tf.gather(tf.cast(logits, tf.float32), features["word_positions"], batch_dims=1)

  def loss(self, features, word_logits, denominator):
    from zoo.models import losses
    return losses.token_classification_loss(features["word_labels"], word_logits, features["word_weights"],
                                            denominator)

  def loss_and_stats(self, features, outputs, denominators):
    count = denominators["words"]
    word_logits = self._word_logits(features, outputs)
    correct = tf.equal(tf.argmax(word_logits, axis=-1, output_type=tf.int32), features["word_labels"])
    return (self.loss(features, word_logits, count),
            dict(token_accuracy=(_weighted_sum(correct, features["word_weights"]), count)))

  def eval_outputs(self, features, outputs, denominators):
    word_logits = self._word_logits(features, outputs)
    predictions = tf.where(features["word_positions"] > 0,
                           tf.argmax(word_logits, axis=-1, output_type=tf.int32), -1)
    labels = tf.where(features["weight"][:, tf.newaxis] > 0, features["word_labels"], -1)
    return (dict(loss=(self.loss(features, word_logits, 1.0), denominators["words"])),
            dict(word_labels=labels, word_predictions=predictions, weight=features["weight"]))

  def metrics(self, stats, examples):
    from tpu import tagging
    keep = examples["weight"] > 0
    results = super().metrics(stats, examples)
    gold, predicted = tagging.sentences_of(examples["word_labels"][keep], examples["word_predictions"][keep],
                                           self.label_names())
    results.update(tagging.entity_metrics(gold, predicted))
    results["examples"] = int(keep.sum())
    return results

  def label_names(self):
    names = self.config.label_names
    if not names or len(names) != self.config.num_classes:
      raise ValueError(f"the {self.name} run in {self.config.model_dir} needs its tag names in config.json "
                       f"(label_names, num_classes), got {names!r}")
    return [str(name) for name in names]

  def serving_network(self, model):
    return model

  def serving_outputs(self, network, features, label_names):
    """Per token: `logits` and `probabilities` `[B, T, C]`, `label_ids` and `labels` `[B, T]`."""
    logits = tf.cast(network(features, training=False), tf.float32)
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return dict(logits=logits, probabilities=tf.nn.softmax(logits), label_ids=label_ids,
                labels=tf.gather(label_names, label_ids))

  def serving_from_text(self, texts, text_encoder, from_token_ids, label_names):
    """Per word of the raw text: `words`, `tags`, `tag_ids`, `tag_probabilities` `[B, W]`, `num_words` `[B]`.

    The words are the text encoder's (punctuation apart); W is the most words of an
    example of the batch that fit in the sequence, and shorter examples are padded
    with "" (tags ""; id -1, probability 0).
    """
    from tpu import tagging
    words = text_encoder.split_words(texts["text"])
    features = tagging.encode_words(text_encoder, words, None)
    positions = features.pop("word_positions")   # [B, W]: each word has a piece, so the kept ones lead
    probabilities = tf.gather(from_token_ids(**features)["probabilities"], positions, batch_dims=1)
    kept = positions > 0
    num_words = tf.reduce_sum(tf.cast(kept, tf.int32), axis=1)
    width = tf.reduce_max(tf.concat([num_words, [0]], axis=0))
    kept = kept[:, :width]
    tag_ids = tf.where(kept, tf.argmax(probabilities[:, :width], axis=-1, output_type=tf.int32), -1)
    return dict(words=tf.where(kept, words.to_tensor("")[:, :width], ""),
                tags=tf.where(kept, tf.gather(label_names, tf.maximum(tag_ids, 0)), ""), tag_ids=tag_ids,
                tag_probabilities=tf.where(kept, tf.reduce_max(probabilities[:, :width], axis=-1), 0.0),
                num_words=num_words)

  def export_info(self):
    return dict(super().export_info(), num_classes=self.config.num_classes, label_names=self.label_names())


@register
class SquadTask(Task):
  """Extractive question answering (SQuAD v1.1 and v2.0) on `SpanQA`'s start and end logits.

  Each question and its context become windows of T tokens (`tpu.squad.windows`,
  `--max-query-length`, `--doc-stride`); the loss is the mean of the start and end
  cross-entropies over the global number of windows. Evaluation decodes the best span
  of each question over its windows (`--max-answer-length`; v2.0: no answer above
  `--null-score-diff-threshold`) and scores it with SQuAD's exact match and F1.
  Served on a raw question and context: the answer text, its characters in the
  context and its score (v2.0: whether there is no answer).
  """

  name = "squad"
  data_type = "question_answering"
  description = "extractive question answering, SQuAD v1.1 and v2.0 (fine-tuning)"
  stat_names = ("span_accuracy",)
  # Raw questions windowed at once in the input pipeline.
  expand_batch = 64

  @classmethod
  def check_config(cls, config):
    for name in ("max_query_length", "doc_stride", "max_answer_length"):
      if int(getattr(config, name)) < 1:
        raise ValueError(f"{name} must be a positive integer, got {getattr(config, name)}")
    if config.seq_length < config.max_query_length + 4:
      raise ValueError(f"seq_length {config.seq_length} leaves no room for the context after a question of "
                       f"max_query_length {config.max_query_length} ([CLS] question [SEP] context [SEP]): "
                       f"raise --seq-length to at least {config.max_query_length + 4} or lower "
                       "--max-query-length")

  def data_metadata(self, source):
    return dict(sentence_pair=True, unanswerable=bool(getattr(source, "unanswerable", False)))

  def build(self):
    from zoo import models
    _check_full_length(self.config, "a span classifier")
    return models.SpanQA(build_encoder(self.config), name="span_qa")

  # Input pipeline.
  def _windows(self, text_encoder, questions, contexts, **answers):
    from tpu import squad
    return squad.windows(text_encoder, questions, contexts, max_query_length=self.config.max_query_length,
                         doc_stride=self.config.doc_stride, **answers)

  def expand(self, examples, text_encoder):
    """Each question -> its windows; `example` is the question's index in `examples`."""
    def windows(index, raw):
      first = lambda values, empty: tf.pad(values.to_tensor(empty), [[0, 0], [0, 1]],   # noqa: E731
                                           constant_values=empty)[:, 0]
      features = self._windows(text_encoder, raw["text_a"], raw["text_b"], answers=first(raw["answers"], ""),
                               answer_starts=first(tf.cast(raw["answer_starts"], tf.int32), -1))
      features["example"] = tf.gather(tf.cast(index, tf.int32), features["example"])
      return features

    batches = examples.enumerate().batch(self.expand_batch)
    return batches.map(windows, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()

  def features(self, raw, text_encoder, seed=None):
    features = dict(raw)
    features["weight"] = tf.ones_like(features["example"], tf.float32)
    return features

  # Loss.
  def denominators(self, features):
    return dict(windows=tf.reduce_sum(features["weight"]))

  def loss(self, features, outputs, denominator):
    from zoo.models import losses
    return losses.span_loss(features["start_positions"], features["end_positions"], outputs["start_logits"],
                            outputs["end_logits"], features["weight"], denominator)

  def loss_and_stats(self, features, outputs, denominators):
    count = denominators["windows"]
    found = [tf.equal(tf.argmax(outputs[f"{side}_logits"], axis=-1, output_type=tf.int32),
                      features[f"{side}_positions"]) for side in ("start", "end")]
    return (self.loss(features, outputs, count),
            dict(span_accuracy=(_weighted_sum(found[0] & found[1], features["weight"]), count)))

  # Evaluation.
  def prepare_evaluation(self, source):
    """Keeps the evaluation questions' ids, contexts and gold answers, in the order of the data."""
    self._reference = []
    for example in source.dataset:
      answers = example["answers"]
      answers = answers.to_list() if hasattr(answers, "to_list") else answers.numpy().tolist()
      self._reference.append((example["id"].numpy().decode("utf-8"),
                              example["text_b"].numpy().decode("utf-8", errors="ignore"),
                              [answer.decode("utf-8") for answer in answers]))

  def eval_outputs(self, features, outputs, denominators):
    keys = ("token_starts", "token_ends", "max_context", "example", "weight")
    return (dict(loss=(self.loss(features, outputs, 1.0), denominators["windows"])),
            dict(start_logits=tf.cast(outputs["start_logits"], tf.float32),
                 end_logits=tf.cast(outputs["end_logits"], tf.float32),
                 **{key: features[key] for key in keys}))

  def predictions(self, examples):
    """`(answers, null score diffs)`: `{id: answer text}` (v2.0: "" for no answer) and `{id: null - best}`."""
    from tpu import squad
    if getattr(self, "_reference", None) is None:
      raise RuntimeError("prepare_evaluation(source) must read the evaluation data before metrics")
    keep = examples["weight"] > 0
    answers, best, nulls = squad.decode({key: value[keep] for key, value in examples.items()},
                                        [context for _, context, _ in self._reference],
                                        max_answer_length=self.config.max_answer_length)
    differences = nulls - best
    if self.config.unanswerable:
      answers = ["" if difference > self.config.null_score_diff_threshold else answer
                 for answer, difference in zip(answers, differences, strict=True)]
    ids = [question for question, _, _ in self._reference]
    return (dict(zip(ids, answers, strict=True)),
            dict(zip(ids, differences.astype(float).tolist(), strict=True)))

  def metrics(self, stats, examples):
    from tpu import squad
    results = super().metrics(stats, examples)
    predictions, differences = self.predictions(examples)
    golds = {question: answers for question, _, answers in self._reference}
    self._predictions = (predictions, differences if self.config.unanswerable else None)
    if self.config.unanswerable:
      results.update(squad.squad_v2_metrics(golds, predictions, differences))
    else:
      results.update(squad.squad_v1_metrics(golds, predictions))
    results.update(examples=len(golds), windows=int((examples["weight"] > 0).sum()))
    return results

  def eval_predictions(self):
    return getattr(self, "_predictions", None)

  # Serving.
  @property
  def prediction_fields(self):
    fields = (("answer", "answer", "text"), ("start", "start", "integer"), ("end", "end", "integer"),
              ("score", "score", "number"))
    if self.config.unanswerable:
      fields += (("no_answer", "no_answer", "flag"), ("null_score_diff", "null_score_diff", "number"))
    return fields

  def serving_network(self, model):
    return model

  def serving_outputs(self, network, features, label_names):
    """`start_logits` and `end_logits` `[B, T]` of the windows."""
    outputs = network(features, training=False)
    return {name: tf.cast(outputs[name], tf.float32) for name in ("start_logits", "end_logits")}

  def serving_text_inputs(self):
    return ("question", "context")

  def serving_from_text(self, texts, text_encoder, from_token_ids, label_names):
    """Per question: `answer`, its characters `start` and `end` in the context (-1: none), `score`
    (v2.0 also `no_answer` and `null_score_diff`), over all windows of its context."""
    from tpu import squad
    from zoo.models.encoder_inputs import INPUT_NAMES
    features = self._windows(text_encoder, texts["question"], texts["context"])
    logits = from_token_ids(**{name: features[name] for name in INPUT_NAMES})
    return squad.answers_of(features, logits["start_logits"], logits["end_logits"], texts["context"],
                            max_answer_length=self.config.max_answer_length,
                            num_questions=tf.size(texts["question"]), unanswerable=self.config.unanswerable,
                            null_score_diff_threshold=self.config.null_score_diff_threshold)

  def export_info(self):
    config = self.config
    return dict(super().export_info(), max_query_length=config.max_query_length, doc_stride=config.doc_stride,
                max_answer_length=config.max_answer_length, unanswerable=config.unanswerable,
                null_score_diff_threshold=config.null_score_diff_threshold)
