"""What each training task builds, feeds and optimises: mlm, electra, classify, regress.

A `Task` turns a `TrainConfig` into a Keras model (`build`), batches of raw text into
features (`features`), and features plus model outputs into the loss and statistics
(`loss_and_stats`, `eval_outputs`). The training job (`tpu.train`) and the exporter
(`export.saved_model`) both build models through `build_model`, so a model directory
is restored into exactly the graph that wrote it.

Losses are exact over the GLOBAL batch under any number of replicas: each replica
divides its sum of per-example (or per-token) losses by the global count of examples
(or masked tokens, or real tokens), which the job all-reduces first. Summing the
replicas' losses and gradients then gives the loss and gradient of one device running
the whole batch.

Statistics are pairs `(numerator, denominator)` of sums; summed over replicas and steps,
`numerator / denominator` is the metric.
"""

import tensorflow as tf

from zoo import models
from zoo import presets
from zoo.text import MaskedLMMasker

# Classification metrics computed from all evaluation predictions (see `tpu.metrics`).
CLASSIFY_METRICS = ("accuracy", "f1", "mcc")
REGRESS_METRICS = ("pearson", "spearman")   # and "loss", the mean squared error


def build_encoder(config, **extra_overrides):
  """The encoder of `config.model` with the config's overrides, vocabulary and static length."""
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
  base = {**presets.get(config.model).config, **config.model_overrides}
  embedding_width = base.get("embedding_width") or base["hidden_size"]
  defaults = dict(hidden_size=max(1, base["hidden_size"] // 4), num_heads=max(1, base["num_heads"] // 4),
                  intermediate_size=max(1, base["intermediate_size"] // 4), embedding_width=embedding_width)
  return {**defaults, **(config.generator_overrides or {})}


def _check_full_length(config, what):
  """MLM and ELECTRA predict every position: an encoder-only Funnel pools the sequence away."""
  config_values = {**presets.get(config.model).config, **config.model_overrides}
  if presets.get(config.model).family == "funnel" and not config_values.get("num_decoder_layers"):
    choices = [name for name in presets.names() if name.endswith("_decoder")]
    raise ValueError(f"task {config.task!r} needs {what} with a full-length sequence output; "
                     f"{config.model} is an encoder-only Funnel. Use a preset with the decoder: "
                     f"{', '.join(choices)}, or set model_overrides num_decoder_layers")


def _weighted_sum(values, weights):
  return tf.reduce_sum(tf.cast(values, tf.float32) * tf.cast(weights, tf.float32))


def _token_cross_entropy(labels, logits):
  return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.cast(logits, tf.float32))


class Task:
  """Base class. Subclasses set `name`, `data_type` (the `tpu.data` task type they read)."""

  name = ""
  data_type = ""
  stat_names = ()   # the statistics `loss_and_stats` returns

  def __init__(self, config):
    self.config = config

  # Model.
  def build(self):
    """Returns the Keras model (build it under the strategy's scope)."""
    raise NotImplementedError

  # Input pipeline.
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


def _encode(raw, text_encoder):
  return text_encoder.encode(raw["text_a"], raw.get("text_b"))


class ClassifyTask(Task):
  """Sequence classification: softmax cross-entropy on `SequenceClassifier`'s logits."""

  name = "classify"
  data_type = "classification"
  stat_names = ("accuracy",)

  def build(self):
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.SequenceClassifier(build_encoder(self.config), num_classes=self.config.num_classes,
                                     dropout=dropout, name="classifier")

  def features(self, raw, text_encoder, seed=None):
    features = _encode(raw, text_encoder)
    features["label"] = tf.cast(raw["label"], self.label_dtype)
    features["weight"] = tf.ones_like(features["label"], tf.float32)
    return features

  label_dtype = tf.int32

  def denominators(self, features):
    return dict(examples=tf.reduce_sum(features["weight"]))

  def per_example_loss(self, labels, logits):
    return _token_cross_entropy(labels, logits)

  def loss_and_stats(self, features, outputs, denominators):
    count = denominators["examples"]
    weights = features["weight"]
    loss = _weighted_sum(self.per_example_loss(features["label"], outputs), weights) / count
    correct = tf.equal(tf.argmax(outputs, axis=-1, output_type=tf.int32), features["label"])
    return loss, dict(accuracy=(_weighted_sum(correct, weights), count))

  def eval_outputs(self, features, outputs, denominators):
    count = denominators["examples"]
    loss = _weighted_sum(self.per_example_loss(features["label"], outputs), features["weight"])
    return dict(loss=(loss, count)), dict(logits=outputs, label=features["label"], weight=features["weight"])

  def metrics(self, stats, examples):
    from tpu import metrics
    keep = examples["weight"] > 0
    logits, labels = examples["logits"][keep], examples["label"][keep]
    results = super().metrics(stats, examples)
    results.update(metrics.classification_metrics(labels, logits.argmax(axis=-1),
                                                  num_classes=self.config.num_classes))
    results["examples"] = int(keep.sum())
    return results


class RegressTask(ClassifyTask):
  """Regression (e.g. STS-B): mean squared error on a one-output `SequenceClassifier`."""

  name = "regress"
  data_type = "regression"
  stat_names = ()
  label_dtype = tf.float32

  def build(self):
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.SequenceClassifier(build_encoder(self.config), num_classes=1, dropout=dropout,
                                     name="regressor")

  def per_example_loss(self, labels, logits):
    return tf.square(tf.cast(logits[:, 0], tf.float32) - labels)

  def loss_and_stats(self, features, outputs, denominators):
    count = denominators["examples"]
    return _weighted_sum(self.per_example_loss(features["label"], outputs), features["weight"]) / count, {}

  def eval_outputs(self, features, outputs, denominators):
    stats, _ = super().eval_outputs(features, outputs, denominators)
    return stats, dict(predictions=outputs[:, 0], label=features["label"], weight=features["weight"])

  def metrics(self, stats, examples):
    from tpu import metrics
    keep = examples["weight"] > 0
    results = Task.metrics(self, stats, examples)
    results.update(metrics.regression_metrics(examples["label"][keep], examples["predictions"][keep]))
    results["examples"] = int(keep.sum())
    return results


class MaskedLMTask(Task):
  """BERT's masked language modelling (15% of tokens, 80/10/10, optional whole words)."""

  name = "mlm"
  data_type = "text"
  stat_names = ("mlm_loss", "mlm_accuracy")

  def build(self):
    _check_full_length(self.config, "an encoder")
    return models.MaskedLMPretrainer(build_encoder(self.config), name="pretrainer")

  def features(self, raw, text_encoder, seed=None):
    masker = MaskedLMMasker.from_encoder(
        text_encoder, max_predictions_per_seq=self.config.max_predictions_per_seq,
        whole_word=self.config.whole_word_masking)
    return masker(_encode(raw, text_encoder), seed=seed)

  def denominators(self, features):
    return dict(masked=tf.reduce_sum(features["masked_lm_weights"]))

  def _mlm(self, features, logits, count):
    weights = features["masked_lm_weights"]
    labels = features["masked_lm_ids"]
    loss = _weighted_sum(_token_cross_entropy(labels, logits), weights) / tf.maximum(count, 1.0)
    correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels)
    return loss, dict(mlm_loss=(loss * count, count), mlm_accuracy=(_weighted_sum(correct, weights), count))

  def loss_and_stats(self, features, outputs, denominators):
    return self._mlm(features, outputs["mlm_logits"], denominators["masked"])

  def metrics(self, stats, examples):
    results = super().metrics(stats, examples)
    return dict(loss=results["mlm_loss"], **results)


class ElectraTask(MaskedLMTask):
  """ELECTRA: generator MLM loss + λ · replaced-token detection over real tokens."""

  name = "electra"
  stat_names = ("mlm_loss", "mlm_accuracy", "disc_loss", "disc_accuracy")

  def build(self):
    _check_full_length(self.config, "a discriminator and a generator")
    generator = build_encoder(self.config, **generator_overrides(self.config))
    return models.ElectraPretrainer(generator, build_encoder(self.config),
                                    discriminator_weight=self.config.discriminator_weight, name="electra")

  def denominators(self, features):
    return dict(masked=tf.reduce_sum(features["masked_lm_weights"]),
                tokens=tf.reduce_sum(tf.cast(features["input_mask"], tf.float32)))

  def loss_and_stats(self, features, outputs, denominators):
    mlm_loss, stats = self._mlm(features, outputs["mlm_logits"], denominators["masked"])
    tokens = denominators["tokens"]
    real = features["input_mask"]
    labels = tf.cast(outputs["disc_labels"], tf.float32)
    logits = tf.cast(outputs["disc_logits"], tf.float32)
    per_token = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    disc_loss = _weighted_sum(per_token, real) / tf.maximum(tokens, 1.0)
    correct = tf.equal(tf.cast(logits > 0, tf.float32), labels)
    stats.update(disc_loss=(disc_loss * tokens, tokens), disc_accuracy=(_weighted_sum(correct, real), tokens))
    return mlm_loss + self.config.discriminator_weight * disc_loss, stats

  def metrics(self, stats, examples):
    results = Task.metrics(self, stats, examples)
    return dict(loss=results["mlm_loss"] + self.config.discriminator_weight * results["disc_loss"], **results)


TASK_CLASSES = {task.name: task for task in (MaskedLMTask, ElectraTask, ClassifyTask, RegressTask)}


def get_task(config):
  """The `Task` of `config.task`."""
  if config.task not in TASK_CLASSES:
    raise ValueError(f"unknown task {config.task!r}; choose one of: {', '.join(TASK_CLASSES)}")
  return TASK_CLASSES[config.task](config)


def build_model(config):
  """Builds the model of a (resolved) config: what the job trains and the exporter restores."""
  return get_task(config).build()
