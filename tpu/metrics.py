"""Evaluation metrics of the fine-tuning tasks, from numpy arrays of labels and predictions.

GLUE's metrics (Wang et al., 2019): accuracy, F1 (MRPC, QQP), Matthews correlation
(CoLA), Pearson and Spearman correlation (STS-B).

Example:
  >>> classification_metrics([0, 1, 1, 0], [0, 1, 0, 0], num_classes=2)
  {'accuracy': 0.75, 'f1': 0.6666666666666666, 'mcc': 0.5773502691896258}
"""

import numpy as np


def confusion_matrix(labels, predictions, num_classes):
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


def classification_metrics(labels, predictions, num_classes):
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


def pearson(x, y):
  """Pearson's correlation coefficient; 0 when either side is constant."""
  x = np.asarray(x, np.float64) - np.mean(x)
  y = np.asarray(y, np.float64) - np.mean(y)
  return _ratio(x @ y, np.sqrt((x @ x) * (y @ y)))


def regression_metrics(labels, predictions):
  """Pearson and Spearman correlation of predictions with labels."""
  if len(labels) < 2:
    return dict(pearson=float("nan"), spearman=float("nan"))
  return dict(pearson=pearson(labels, predictions), spearman=pearson(_ranks(labels), _ranks(predictions)))
