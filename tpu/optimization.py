"""The optimizer of the training job: BERT's AdamW with linear warmup and linear decay (Model Garden)."""
from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
  from tpu.config import TrainConfig

# Weights without decay (BERT): layer-norm scales and offsets, and biases.
NO_WEIGHT_DECAY = ["norm/gamma", "norm/beta", "bias"]


def make_optimizer(config: TrainConfig) -> tuple[Any, Any]:
  """(optimizer, learning-rate schedule) of a `TrainConfig`.

  Gradient clipping is done by the train step on the summed gradients, so the
  optimizer's own (per-replica) clipping is off.
  """
  from official.modeling import optimization

  optimization_config = optimization.OptimizationConfig({
      "optimizer": {"type": "adamw", "adamw": {
          "weight_decay_rate": config.weight_decay, "exclude_from_weight_decay": NO_WEIGHT_DECAY,
          "epsilon": 1e-6, "gradient_clip_norm": 0.0}},
      "learning_rate": {"type": "polynomial", "polynomial": {
          "initial_learning_rate": config.learning_rate, "decay_steps": config.steps,
          "end_learning_rate": config.end_learning_rate, "power": 1.0}},
      "warmup": {"type": "linear", "linear": {"warmup_steps": config.warmup_steps}},
  })
  factory = optimization.OptimizerFactory(optimization_config)
  schedule = factory.build_learning_rate()
  return factory.build_optimizer(schedule), schedule
