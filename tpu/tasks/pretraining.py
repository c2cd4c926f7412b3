"""Pre-training tasks: masked language modelling (BERT) and replaced-token detection (ELECTRA)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING
from typing import Any

from tpu.tasks.base import Config
from tpu.tasks.base import Features
from tpu.tasks.base import Stats
from tpu.tasks.base import Task
from tpu.tasks.base import build_encoder
from tpu.tasks.base import check_full_length
from tpu.tasks.base import encode_texts
from tpu.tasks.base import weighted_sum
from tpu.tasks.task_registry import Setting
from tpu.tasks.task_registry import register
from zoo.lazy import lazy_module
from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
from zoo.model_dir import GENERATOR_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import checkpoint_roots
from zoo.model_dir import encoder_root
from zoo.model_dir import find_checkpoint

if TYPE_CHECKING:
  from zoo.text import TextEncoder

tf = lazy_module("tensorflow")


def generator_overrides(config: Config) -> dict[str, Any]:
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


def restore_generator(model: Any, path: str) -> str:
  """Restores an ELECTRA model's generator (its encoder and masked-LM head) from the encoder and
  the masked-LM head of a checkpoint (a masked-LM run or a converted masked-LM model of the
  generator's size); returns the checkpoint prefix."""
  items = dict(model.checkpoint_items)
  prefix = find_checkpoint(path)
  roots = checkpoint_roots(prefix)
  objects = {encoder_root(prefix): items[GENERATOR_ROOT]}
  if MASKED_LM_ROOT in roots:
    objects[MASKED_LM_ROOT] = items[GENERATOR_MASKED_LM_ROOT]
  try:
    tf.train.Checkpoint(**objects).read(prefix).assert_existing_objects_matched().expect_partial()
  except (AssertionError, ValueError) as error:
    raise ValueError(f"generator_checkpoint {prefix} does not fit this run's generator (its size comes "
                     f"from generator_overrides): {error}") from None
  return prefix


@register
class MaskedLMTask(Task):
  """BERT's masked language modelling (15% of tokens, 80/10/10, optional whole words)."""

  name = "mlm"
  data_type = "text"
  description = "masked language modelling (pre-training)"
  settings: tuple[Setting, ...] = (
      Setting("max_predictions_per_seq", int, None, "masked-LM predictions per sequence (default: 15% of "
              "--seq-length, rounded up)", minimum=1, input=True),
      Setting("whole_word_masking", bool, False, "mask whole words", input=True),
      # The heads' shape: a converted checkpoint records its own (--init-checkpoint passes them on).
      Setting("mlm_transform", bool, None, "the masked-LM head's dense and layer norm (default: BERT's, but "
              "none for a Funnel's masked-LM pre-training, as Funnel's published heads and Hugging Face's "
              "FunnelForMaskedLM)", flag=False, architecture=True),
      Setting("head_activation", str, None, "activation of the masked-LM transform and of the "
              "discriminator's dense layer (zoo.layers.ACTIVATIONS; default: the encoder's, "
              "as BERT's and ELECTRA's heads)", flag=False, architecture=True),
  )
  stat_names: tuple[str, ...] = ("mlm_loss", "mlm_accuracy")
  concatenates_documents = True

  @classmethod
  def derived_settings(cls, config: Config) -> dict[str, Any]:
    from zoo import presets
    predictions = config.max_predictions_per_seq or math.ceil(0.15 * config.seq_length)
    derived = dict(max_predictions_per_seq=predictions)
    if config.model:   # the heads' defaults follow the encoder
      encoder = presets.get(config.model).encoder_config(**config.model_overrides)
      # The family's masked-LM head (`EncoderConfig.masked_lm_transform`); ELECTRA's generator is narrower
      # than the embeddings it shares, so its head keeps the transform to the embedding width.
      transform = encoder.masked_lm_transform or cls.name != "mlm"
      derived.update(mlm_transform=transform if config.mlm_transform is None else config.mlm_transform,
                     # Every family's configuration has an activation; `EncoderConfig` declares none.
                     head_activation=config.head_activation or encoder.activation)
    return derived

  def build(self) -> Any:
    from zoo import models
    check_full_length(self.config, "an encoder")
    return models.MaskedLMPretrainer(build_encoder(self.config), activation=self.config.head_activation,
                                     mlm_transform=self.config.mlm_transform, name="pretrainer")

  def features(self, raw: Features, text_encoder: TextEncoder, seed: Any = None) -> Features:
    from zoo.text import MaskedLMMasker
    masker = MaskedLMMasker.from_encoder(
        text_encoder, max_predictions_per_seq=self.config.max_predictions_per_seq,
        whole_word=self.config.whole_word_masking)
    # Concatenated documents and pre-tokenized records arrive as ids; masking is core TensorFlow only.
    inputs = dict(raw) if "input_word_ids" in raw else encode_texts(raw, text_encoder)
    return masker(inputs, seed=seed)

  def denominators(self, features: Features) -> Features:
    return dict(masked=tf.reduce_sum(features["masked_lm_weights"]))

  def _mlm_stats(self, features, logits, loss, count):
    correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), features["masked_lm_ids"])
    return dict(mlm_loss=(loss * count, count),
                mlm_accuracy=(weighted_sum(correct, features["masked_lm_weights"]), count))

  def loss_and_stats(self, features: Features, outputs: Any, denominators: Features) -> tuple[Any, Stats]:
    from zoo.models import losses
    count = denominators["masked"]
    logits = outputs["mlm_logits"]
    loss = losses.masked_lm_loss(features["masked_lm_ids"], logits, features["masked_lm_weights"], count)
    return loss, self._mlm_stats(features, logits, loss, count)

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    results = super().metrics(stats, examples)
    return dict(loss=results["mlm_loss"], **results)


@register
class ElectraTask(MaskedLMTask):
  """ELECTRA: generator MLM loss + λ · replaced-token detection over real tokens."""

  name = "electra"
  description = "ELECTRA replaced-token detection (pre-training)"
  settings = MaskedLMTask.settings + (
      Setting("discriminator_weight", float, 50.0, "λ, the weight of the replaced-token loss", minimum=0),
      Setting("generator_overrides", dict, None, "the generator's encoder arguments over the defaults "
              "(a quarter of the discriminator's width)", flag=False, architecture=True),
      Setting("generator_checkpoint", str, None, "a model directory (or checkpoint) whose encoder and "
              "masked-LM head start the generator (default: a new generator)"),
  )
  stat_names = ("mlm_loss", "mlm_accuracy", "disc_loss", "disc_accuracy")

  def build(self) -> Any:
    from zoo import models
    check_full_length(self.config, "a discriminator and a generator")
    generator = build_encoder(self.config, **generator_overrides(self.config))
    return models.ElectraPretrainer(generator, build_encoder(self.config),
                                    discriminator_weight=self.config.discriminator_weight,
                                    activation=self.config.head_activation,
                                    mlm_transform=self.config.mlm_transform, name="electra")

  def initialise(self, model: Any) -> str | None:
    """The generator from `generator_checkpoint`, when given; returns what was restored, for the log."""
    if not self.config.generator_checkpoint:
      return None
    return restore_generator(model, self.config.generator_checkpoint)

  def denominators(self, features: Features) -> Features:
    return dict(masked=tf.reduce_sum(features["masked_lm_weights"]),
                tokens=tf.reduce_sum(tf.cast(features["input_mask"], tf.float32)))

  def loss_and_stats(self, features: Features, outputs: Any, denominators: Features) -> tuple[Any, Stats]:
    from zoo.models import losses
    masked, tokens = denominators["masked"], denominators["tokens"]
    loss = losses.electra_losses(features, outputs, self.config.discriminator_weight, masked, tokens)
    stats = self._mlm_stats(features, outputs["mlm_logits"], loss["mlm_loss"], masked)
    labels = tf.cast(outputs["disc_labels"], tf.float32)
    correct = tf.equal(tf.cast(tf.cast(outputs["disc_logits"], tf.float32) > 0, tf.float32), labels)
    stats.update(disc_loss=(loss["disc_loss"] * tokens, tokens),
                 disc_accuracy=(weighted_sum(correct, features["input_mask"]), tokens))
    return loss["loss"], stats

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    results = Task.metrics(self, stats, examples)
    return dict(loss=results["mlm_loss"] + self.config.discriminator_weight * results["disc_loss"], **results)


