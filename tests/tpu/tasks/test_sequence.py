"""The sequence tasks: the classification and regression losses are exact over replicas (numpy)."""

import numpy as np

from tests.tpu.tasks.losses import shares
from tests.tpu.tasks.losses import softmax_cross_entropy
from tests.tpu.tasks.losses import tiny_config
from tpu import tasks


def test_classify_and_regress_losses_are_exact_over_replicas(tmp_path):
  rng = np.random.default_rng(1)
  labels = rng.integers(0, 3, 6).astype(np.int32)
  logits = rng.normal(size=[6, 3]).astype(np.float32)
  weight = np.array([1, 1, 1, 1, 0, 0], np.float32)   # two padded examples
  config = tiny_config(tmp_path, num_classes=3).validate()
  expected = (softmax_cross_entropy(labels, logits) * weight).sum() / weight.sum()
  features = dict(label=labels, weight=weight)
  np.testing.assert_allclose(shares(tasks.get_task(config), features, logits), expected, rtol=1e-5)
  targets = rng.normal(size=6).astype(np.float32)
  regress = tasks.get_task(config.replace(task="regress", num_classes=1))
  expected = (((logits[:, 0] - targets) ** 2) * weight).sum() / weight.sum()
  total = shares(regress, dict(label=targets, weight=weight), logits)
  np.testing.assert_allclose(total, expected, rtol=1e-5)
