"""ELECTRA pre-training in keras-hub (Clark et al., 2020), both families.

A quarter-width generator sharing the discriminator's word-embedding layer, its samples put
in by `ReplacedTokenSampler`, the loss `mlm + λ · replaced-token` as the tf_keras
`ElectraPretrainer`'s; the preprocessors are keras-hub's masked-LM ones with the masked ids
and weights also in `x`.
"""

import keras
import keras_hub
from keras import ops

from zoo.configs import EncoderConfig
from zoo.keras3.layers.base import ZooLayer
from zoo.keras3.layers.transformer_block import ACTIVATIONS
from zoo.keras3.models.encoder import PerLengthFunctions
from zoo.keras3.models.masked_lm import MaskedLMHead
from zoo.keras3.models.packing import PairTruncation
from zoo.keras3.models.task import TrainsWhatItReads
from zoo.keras3.models.task import apply_sequence_length
from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
from zoo.model_dir import GENERATOR_ROOT

ELECTRA_INPUTS = ("token_ids", "segment_ids", "padding_mask", "mask_positions", "mask_ids", "mask_weights")


@keras.saving.register_keras_serializable(package="zoo")
class ReplacedTokenSampler(ZooLayer):
  """ELECTRA's corruption step (`zoo.models.pretrainers.ReplacedTokenSampler` for Keras 3).

  At each real prediction (`mask_weights > 0`) a token is drawn from the generator's
  softmax (float32 logits, temperature 1, no gradient); the discriminator reads
  `token_ids` with those positions overwritten by the samples; a position's label is 1
  when its sample differs from the original token (`mask_ids`), else 0 (a sample equal to
  the original counts as original, as in Clark et al., 2020). One-hot matmuls, no scatter.

  Call: `mlm_logits [B, P, V]`, `token_ids [B, T]`, `mask_positions`, `mask_ids`,
  `mask_weights [B, P]`. Returns a dict of int32 `sampled_ids [B, P]`,
  `corrupted_ids [B, T]` and `labels [B, T]`.
  """

  def __init__(self, seed=None, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.seed = seed
    self.seed_generator = keras.random.SeedGenerator(seed)
    self.built = True

  def call(self, mlm_logits, token_ids, mask_positions, mask_ids, mask_weights):
    logits = ops.stop_gradient(ops.cast(mlm_logits, "float32"))
    sampled = keras.random.categorical(ops.reshape(logits, (-1, logits.shape[-1])), 1,
                                       seed=self.seed_generator, dtype="int32")
    sampled = ops.reshape(sampled, ops.shape(mask_positions))                         # [B * P, 1] -> [B, P]
    token_ids = ops.cast(token_ids, "int32")
    predicted = ops.cast(ops.greater(mask_weights, 0), "int32")                        # [B, P]
    # [B, P] -> [B, P, T]: row p is the one-hot of position p, zero for padded predictions.
    one_hot = ops.one_hot(ops.cast(mask_positions, "int32"), token_ids.shape[1], dtype="int32")
    one_hot = one_hot * ops.expand_dims(predicted, -1)
    replaced = ops.max(one_hot, axis=1)                                                # [B, T]
    sampled_at = ops.sum(one_hot * ops.expand_dims(sampled, -1), axis=1)               # [B, P] -> [B, T]
    corrupted = ops.where(replaced > 0, sampled_at, token_ids)
    changed = ops.cast(ops.not_equal(sampled, ops.cast(mask_ids, "int32")), "int32")   # [B, P]
    labels = ops.max(one_hot * ops.expand_dims(changed, -1), axis=1)                   # [B, P] -> [B, T]
    return dict(sampled_ids=sampled, corrupted_ids=corrupted, labels=labels)

  def compute_output_spec(self, mlm_logits, token_ids, mask_positions, mask_ids, mask_weights):
    return dict(sampled_ids=keras.KerasTensor(mask_positions.shape, dtype="int32"),
                corrupted_ids=keras.KerasTensor(token_ids.shape, dtype="int32"),
                labels=keras.KerasTensor(token_ids.shape, dtype="int32"))

  def get_config(self):
    return {**super().get_config(), "seed": self.seed}


def electra_generator_config(encoder_config, overrides=None):
  """ELECTRA's generator: the encoder at a quarter of the width (Clark et al., 2020, Sec. 3.2).

  Width, heads and feed-forward width divided by 4 (heads at least 1); the word embeddings
  keep the discriminator's width, so the two share them; `overrides` replace these key by
  key (the same rule as the training job's `generator_overrides`).
  """
  defaults = dict(hidden_size=max(1, encoder_config.hidden_size // 4),
                  num_heads=max(1, encoder_config.num_heads // 4),
                  intermediate_size=max(1, encoder_config.intermediate_size // 4),
                  embedding_width=encoder_config.embedding_width or encoder_config.hidden_size)
  return encoder_config.replace(**{**defaults, **(overrides or {})})


class ZooElectra(TrainsWhatItReads, PerLengthFunctions, keras_hub.models.Task):
  """ELECTRA pre-training in keras-hub (`zoo.models.ElectraPretrainer` for Keras 3).

  A small generator (a backbone of the same family; `generator_config`, default
  `electra_generator_config(backbone.encoder_config)`)
  reads the masked input and predicts the masked tokens (`MaskedLMHead`, tied to the shared
  word embeddings); `ReplacedTokenSampler` puts its samples in; the discriminator (`backbone`,
  the model kept) predicts per token whether it was replaced (`discriminator_transform`: dense
  and activation, then `discriminator_logits`: dense to 1, float32). The generator's word
  embeddings are the discriminator's layer (shared, Sec. 3.2). The loss, in `compute_loss`:

    `loss = masked_lm_loss + discriminator_weight · replaced_token_loss`

  the masked-LM term averaged over the real predictions (`mask_weights`), the replaced-token
  one (sigmoid cross-entropy) over real tokens (`padding_mask`): as the tf_keras edition's
  `zoo.models.losses.electra_losses`.

  Inputs: the backbone's (`token_ids` with the masked tokens, `segment_ids`,
  `padding_mask`) and `mask_positions`, `mask_ids`, `mask_weights` `[B, P]`, which
  `ElectraPreprocessor` makes from raw strings (keras-hub's masking conventions). Outputs: a
  dict of `mlm_logits` float32 `[B, P, V]`, `sampled_ids`, `corrupted_ids`, `disc_logits`
  float32 `[B, T]` and `disc_labels`.
  """

  unused_layers = ("pooler",)   # neither the generator's nor the discriminator's is read

  def __init__(self, backbone, generator_config=None, preprocessor=None, discriminator_weight=50.0,
               activation=None, mlm_transform=True, sequence_length=None, seq_length=None, **kwargs):
    config = backbone.encoder_config
    if not config.full_length_output:
      raise ValueError(f"ELECTRA needs a full-length sequence output, which this {config.encoder_name} pools "
                       "away (a Funnel-Transformer needs the decoder: num_decoder_layers >= 1): the "
                       "discriminator labels every token, and masked positions index the full-length input")
    if generator_config is None:
      generator_config = electra_generator_config(config)
    elif not isinstance(generator_config, EncoderConfig):   # a saved task's dict
      generator_config = type(config).from_dict(generator_config)
    generator_config = generator_config.replace(seq_length=config.seq_length)
    activation = activation or config.activation
    if activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    initializer = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.generator = type(backbone)(generator_config, dtype=backbone.dtype_policy,
                                    word_embeddings=backbone.token_embedding, name=GENERATOR_ROOT)
    self.masked_lm_head = MaskedLMHead(self.generator.token_embedding, activation=activation,
                                       transform=mlm_transform, name=GENERATOR_MASKED_LM_ROOT,
                                       initializer_range=config.initializer_range)
    self.sampler = ReplacedTokenSampler(name="sampler")
    self.discriminator_transform = keras.layers.Dense(
        config.hidden_size, activation=ACTIVATIONS[activation], kernel_initializer=initializer,
        dtype=backbone.dtype_policy, name="discriminator_transform")
    self.discriminator_logits = keras.layers.Dense(1, kernel_initializer=initializer, dtype="float32",
                                                   name="discriminator_logits")

    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in ELECTRA_INPUTS[:3]}
    inputs.update({name: keras.Input(shape=(None,), dtype="float32" if name == "mask_weights" else "int32",
                                     name=name) for name in ELECTRA_INPUTS[3:]})
    encoder_inputs = {name: inputs[name] for name in ELECTRA_INPUTS[:3]}
    generated = self.generator(encoder_inputs)["sequence_output"]
    mlm_logits = self.masked_lm_head(generated, inputs["mask_positions"])
    corruption = self.sampler(mlm_logits, inputs["token_ids"], inputs["mask_positions"], inputs["mask_ids"],
                              inputs["mask_weights"])
    read = self.backbone(dict(encoder_inputs, token_ids=corruption["corrupted_ids"]))["sequence_output"]
    disc_logits = ops.squeeze(self.discriminator_logits(self.discriminator_transform(read)), -1)
    outputs = dict(mlm_logits=mlm_logits, sampled_ids=corruption["sampled_ids"],
                   corrupted_ids=corruption["corrupted_ids"], disc_logits=disc_logits,
                   disc_labels=corruption["labels"])
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.generator_config = generator_config
    self.discriminator_weight = discriminator_weight
    self.activation = activation
    self.mlm_transform = mlm_transform
    apply_sequence_length(self, sequence_length, seq_length)

  def compute_losses(self, x, y_pred):
    """`loss`, `mlm_loss` and `disc_loss` (float32 scalars) of inputs `x` and outputs `y_pred`."""
    weights = ops.cast(x["mask_weights"], "float32")
    per_prediction = keras.losses.sparse_categorical_crossentropy(x["mask_ids"], y_pred["mlm_logits"],
                                                                  from_logits=True)
    mlm_loss = ops.divide_no_nan(ops.sum(per_prediction * weights), ops.sum(weights))
    tokens = ops.cast(x["padding_mask"], "float32")
    logits = ops.cast(y_pred["disc_logits"], "float32")
    labels = ops.cast(y_pred["disc_labels"], "float32")
    # Sigmoid cross-entropy with logits, in its stable form.
    per_token = ops.maximum(logits, 0.0) - logits * labels + ops.log1p(ops.exp(-ops.abs(logits)))
    disc_loss = ops.divide_no_nan(ops.sum(per_token * tokens), ops.sum(tokens))
    return dict(loss=mlm_loss + self.discriminator_weight * disc_loss, mlm_loss=mlm_loss, disc_loss=disc_loss)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    del y, sample_weight, training   # the labels are in the inputs (mask_ids) and the outputs (disc_labels)
    loss = self.compute_losses(x, y_pred)["loss"]
    for extra in self.losses:
      loss = loss + ops.cast(extra, "float32")
    return loss

  def get_config(self):
    config = super().get_config()
    config.update(generator_config=self.generator_config.to_dict(), activation=self.activation,
                  discriminator_weight=self.discriminator_weight, mlm_transform=self.mlm_transform)
    return config


class ZooElectraPreprocessor(PairTruncation, keras_hub.models.MaskedLMPreprocessor):
  """keras-hub's masked-LM preprocessing (15% selected; 80% `[MASK]`, 10% random, 10% kept) for ELECTRA:
  the features go in `x` (`mask_ids` and `mask_weights` too: the sampler needs them), `y` and the
  sample weights stay keras-hub's (`mask_ids`, `mask_weights`)."""

  def call(self, x, y=None, sample_weight=None):
    x, y, weights = keras.utils.unpack_x_y_sample_weight(super().call(x, y, sample_weight))
    return keras.utils.pack_x_y_sample_weight(dict(x, mask_ids=y, mask_weights=weights), y, weights)
