"""Sequence tasks: classification and regression of a text or a pair, and their metrics.

`classify` (softmax cross-entropy) and `regress` (squared error) on `SequenceClassifier`'s
outputs. The metrics come from numpy arrays of labels and predictions: GLUE's metrics
(Wang et al., 2019): accuracy, F1 (MRPC, QQP), Matthews correlation (CoLA), Pearson and
Spearman correlation (STS-B).

Example:
  >>> classification_metrics([0, 1, 1, 0], [0, 1, 0, 0], num_classes=2)
  {'accuracy': 0.75, 'f1': 0.6666666666666666, 'mcc': 0.5773502691896258}
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

import numpy as np

from tpu.tasks.base import Features
from tpu.tasks.base import Stats
from tpu.tasks.base import Task
from tpu.tasks.base import build_encoder
from tpu.tasks.base import encode_texts
from tpu.tasks.base import weighted_sum
from tpu.tasks.task_registry import register
from zoo.lazy import lazy_module

if TYPE_CHECKING:
  from tpu.data import DataSource
  from zoo.text import TextEncoder

tf = lazy_module("tensorflow")


def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> np.ndarray:
  """int64 `[C, C]`: entry `[i, j]` counts examples of class i predicted as j."""
  labels = np.asarray(labels, np.int64)
  predictions = np.asarray(predictions, np.int64)
  for name, values in (("labels", labels), ("predictions", predictions)):
    if values.size and (values.min() < 0 or values.max() >= num_classes):
      raise ValueError(f"{name} must be class ids in [0, {num_classes}), got values in "
                       f"[{values.min()}, {values.max()}]")
  matrix = np.zeros([num_classes, num_classes], np.int64)
  np.add.at(matrix, (labels, predictions), 1)
  return matrix


def _ratio(numerator, denominator):
  return float(numerator / denominator) if denominator else 0.0


def classification_metrics(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> dict[str, float]:
  """Accuracy, F1 and Matthews correlation coefficient.

  With two classes, F1 is that of class 1 (GLUE's convention: "equivalent",
  "duplicate") and MCC the binary coefficient. With more classes, F1 is the macro
  average over classes and MCC the multi-class generalisation (Gorodkin, 2004), which
  equals the binary one for two classes. Undefined ratios (no positives predicted,
  constant predictions) count as 0, as scikit-learn reports them.
  """
  matrix = confusion_matrix(labels, predictions, num_classes).astype(np.float64)
  total = matrix.sum()
  correct = np.trace(matrix)
  true_per_class = matrix.sum(axis=1)
  predicted_per_class = matrix.sum(axis=0)
  f1_per_class = [_ratio(2 * matrix[c, c], true_per_class[c] + predicted_per_class[c])
                  for c in range(num_classes)]
  f1 = f1_per_class[1] if num_classes == 2 else float(np.mean(f1_per_class))
  covariance = correct * total - true_per_class @ predicted_per_class
  scale = np.sqrt((total**2 - predicted_per_class @ predicted_per_class)
                  * (total**2 - true_per_class @ true_per_class))
  return dict(accuracy=_ratio(correct, total), f1=f1, mcc=_ratio(covariance, scale))


def _ranks(values):
  """Average ranks (ties share the mean of their ranks), as Spearman's correlation needs."""
  values = np.asarray(values, np.float64)
  order = np.argsort(values, kind="stable")
  ranks = np.empty(len(values), np.float64)
  ranks[order] = np.arange(len(values), dtype=np.float64)
  _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
  sums = np.zeros(len(counts))
  np.add.at(sums, inverse, ranks)
  return (sums / counts)[inverse]


def pearson(x: np.ndarray, y: np.ndarray) -> float:
  """Pearson's correlation coefficient; 0 when either side is constant."""
  x = np.asarray(x, np.float64) - np.mean(x)
  y = np.asarray(y, np.float64) - np.mean(y)
  return _ratio(x @ y, np.sqrt((x @ x) * (y @ y)))


def regression_metrics(labels: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
  """Pearson and Spearman correlation of predictions with labels."""
  if len(labels) < 2:
    return dict(pearson=float("nan"), spearman=float("nan"))
  return dict(pearson=pearson(labels, predictions), spearman=pearson(_ranks(labels), _ranks(predictions)))


class SoftmaxLoss:
  """The softmax cross-entropy over the last axis of the outputs (logits or scores) and its accuracy,
  normalised by the global count of examples (`weight` 1; padding 0): the loss of `classify` and of
  `multiple_choice`. A mixin for `Task` subclasses (before `Task` in the bases)."""

  def denominators(self, features: Features) -> Features:
    return dict(examples=tf.reduce_sum(features["weight"]))

  def loss(self, features: Features, outputs: Any, denominator: Any = None) -> Any:
    from zoo.models import losses
    return losses.classification_loss(features["label"], outputs, features["weight"], denominator)

  def loss_and_stats(self, features: Features, outputs: Any, denominators: Features) -> tuple[Any, Stats]:
    count = denominators["examples"]
    correct = tf.equal(tf.argmax(outputs, axis=-1, output_type=tf.int32), features["label"])
    accuracy = (weighted_sum(correct, features["weight"]), count)
    return self.loss(features, outputs, count), dict(accuracy=accuracy)


class _SequenceTask(Task):
  """A task with one label per example, on `SequenceClassifier`'s logits; served as the whole model."""

  label_dtype = "int32"

  def _classifier(self, num_classes, name):
    from zoo import models
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.SequenceClassifier(build_encoder(self.config), num_classes=num_classes, dropout=dropout,
                                     name=name)

  def features(self, raw: Features, text_encoder: TextEncoder, seed: Any = None) -> Features:
    features = encode_texts(raw, text_encoder)
    features["label"] = tf.cast(raw["label"], self.label_dtype)
    features["weight"] = tf.ones_like(features["label"], tf.float32)
    return features

  def denominators(self, features: Features) -> Features:
    return dict(examples=tf.reduce_sum(features["weight"]))

  def loss(self, features: Features, outputs: Any, denominator: Any = None) -> Any:
    raise NotImplementedError

  def serving_network(self, model: Any) -> Any:
    return model

  def _keep(self, examples):
    return examples["weight"] > 0


@register
class ClassifyTask(SoftmaxLoss, _SequenceTask):
  """Sequence classification: softmax cross-entropy on `SequenceClassifier`'s logits."""

  name = "classify"
  data_type = "classification"
  description = "sequence classification (fine-tuning)"
  stat_names = ("accuracy",)
  prediction_fields = (("label", "labels", "text"), ("probabilities", "probabilities", "by_label"))

  def data_metadata(self, source: DataSource) -> dict[str, Any]:
    assert source.label_names is not None, "classification data names its classes"
    return dict(super().data_metadata(source), num_classes=source.num_classes,
                label_names=list(source.label_names))

  def eval_load_kwargs(self, train_source: DataSource) -> dict[str, Any]:
    return dict(label_names=train_source.label_names)

  def build(self) -> Any:
    return self._classifier(self.config.num_classes, "classifier")

  def eval_outputs(self, features: Features, outputs: Any, denominators: Features) -> tuple[Stats, Features]:
    count = denominators["examples"]
    return (dict(loss=(self.loss(features, outputs, 1.0), count)),
            dict(logits=outputs, label=features["label"], weight=features["weight"]))

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    keep = self._keep(examples)
    results = super().metrics(stats, examples)
    results.update(classification_metrics(examples["label"][keep],
                                                  examples["logits"][keep].argmax(axis=-1),
                                                  num_classes=self.config.num_classes))
    results["examples"] = int(keep.sum())
    return results

  def label_names(self) -> list[str]:
    """The class names (ids as names when the data had none)."""
    config = self.config
    if not config.num_classes:
      raise ValueError(f"the {self.name} run in {config.model_dir} has no num_classes in its config.json")
    names = list(config.label_names or [str(index) for index in range(config.num_classes)])
    if len(names) != config.num_classes:
      raise ValueError(f"config.json has {len(names)} label_names for num_classes={config.num_classes}")
    return [str(name) for name in names]

  def serving_outputs(self, network: Any, features: Features, label_names: Any) -> Features:
    logits = tf.cast(network(features, training=False), tf.float32)   # [B, C]
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return dict(probabilities=tf.nn.softmax(logits), label_ids=label_ids,
                labels=tf.gather(label_names, label_ids), logits=logits)

  def export_info(self) -> dict[str, Any]:
    return dict(super().export_info(), num_classes=self.config.num_classes, label_names=self.label_names())


@register
class RegressTask(_SequenceTask):
  """Regression (e.g. STS-B): mean squared error on a one-output `SequenceClassifier`."""

  name = "regress"
  data_type = "regression"
  description = "sequence regression (fine-tuning)"
  label_dtype = "float32"
  prediction_fields = (("prediction", "predictions", "number"),)

  def data_metadata(self, source: DataSource) -> dict[str, Any]:
    return dict(super().data_metadata(source), num_classes=1, label_names=None)

  def build(self) -> Any:
    return self._classifier(1, "regressor")

  def loss(self, features: Features, outputs: Any, denominator: Any = None) -> Any:
    from zoo.models import losses
    return losses.regression_loss(features["label"], outputs[:, 0], features["weight"], denominator)

  def loss_and_stats(self, features: Features, outputs: Any, denominators: Features) -> tuple[Any, Stats]:
    return self.loss(features, outputs, denominators["examples"]), {}

  def eval_outputs(self, features: Features, outputs: Any, denominators: Features) -> tuple[Stats, Features]:
    count = denominators["examples"]
    return (dict(loss=(self.loss(features, outputs, 1.0), count)),
            dict(predictions=outputs[:, 0], label=features["label"], weight=features["weight"]))

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    keep = self._keep(examples)
    results = super().metrics(stats, examples)
    results.update(regression_metrics(examples["label"][keep], examples["predictions"][keep]))
    results["examples"] = int(keep.sum())
    return results

  def serving_outputs(self, network: Any, features: Features, label_names: Any) -> Features:
    return dict(predictions=tf.cast(network(features, training=False), tf.float32)[:, 0])

  def export_info(self) -> dict[str, Any]:
    return dict(super().export_info(), num_classes=1)


