"""Masked-LM pre-training in keras-hub: a task and a preprocessor for both families, and the way back.

    import keras, keras_hub
    import zoo.keras3.pretraining as zoo_pretraining

    keras.distribution.set_distribution(keras.distribution.DataParallel())   # every device
    masked_lm = zoo_pretraining.masked_lm_from_preset("funnel_b4_4_4_decoder", vocab, seq_length=128)
    masked_lm.compile(optimizer=keras.optimizers.AdamW(1e-4))
    masked_lm.fit(x=texts, batch_size=64, epochs=1)   # raw strings
    zoo_pretraining.save_weights_dir(masked_lm, "runs/k3_mlm")
    # then, with TensorFlow and tf_keras (any machine):
    #   python -m zoo.convert keras3 runs/k3_mlm --out runs/mlm_model_dir
    #   python -m export.saved_model --model-dir runs/mlm_model_dir

- `FunnelMaskedLM`, `TransformerMaskedLM`: keras-hub `MaskedLM` tasks (its compile
  defaults: sparse cross-entropy on the logits, weighted by the preprocessor's
  `mask_weights`) whose head is the zoo's (`MaskedLMHead`, the tf_keras
  `zoo.models.MaskedLMHead`'s twin with its weight names): at each masked position
  `LayerNorm(activation(x W + b)) · tableᵀ + output_bias`, the table the backbone's word
  embeddings (tied), in float32; `mlm_transform=False` for the single tied projection of
  Funnel's published masked-LM models. A Funnel backbone needs its decoder (masked
  positions index the full-length output).
- `FunnelMaskedLMPreprocessor`, `TransformerMaskedLMPreprocessor`: keras-hub's
  `MaskedLMPreprocessor` (its masking conventions: 15% of the tokens selected, of them
  80% `[MASK]`, 10% a random token, 10% kept; special tokens never) with the zoo's
  tokenizers.
- `FunnelElectra`, `TransformerElectra` (`electra_from_preset`): ELECTRA (Clark et al.,
  2020): a quarter-width generator sharing the discriminator's word-embedding layer, its
  samples put in by `ReplacedTokenSampler`, the loss `mlm + λ · replaced-token` as the
  tf_keras `ElectraPretrainer`'s; their preprocessors are keras-hub's masked-LM ones with the
  masked ids and weights also in `x`.
- `save_weights_dir(task, directory)` writes what the tf_keras edition reads back
  (`python -m zoo.convert keras3`): `config.json` (the encoder's constructor arguments,
  the head's settings, the tokenizer's), `vocab.txt` and `model.safetensors`, every
  weight under its name in both editions (`zoo.named_weights`; the head's under
  `masked_lm/`, as the tf_keras pre-training model holds it).
"""

import json
import os

import keras
import keras_hub
import numpy as np
from keras import ops

from zoo.atomic_files import atomic_path
from zoo.atomic_files import write_atomically
from zoo.keras3.base import ZooLayer
from zoo.keras3.encoders import PerLengthFunctions
from zoo.keras3.hub import FunnelBackbone
from zoo.keras3.hub import FunnelTokenizer
from zoo.keras3.hub import TrainsWhatItReads
from zoo.keras3.hub import TransformerBackbone
from zoo.keras3.hub import TransformerTokenizer
from zoo.keras3.hub import apply_sequence_length
from zoo.keras3.hub import check_special_tokens
from zoo.keras3.transformer_block import ACTIVATIONS
from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
from zoo.model_dir import GENERATOR_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.named_weights import named_arrays
from zoo.specs.pretrainers import ReplacedTokenSamplerSpec

WEIGHTS_DIR_FORMAT = "zoo-keras3-weights/1"
# The head's weights by their names in the tf_keras edition (Model Garden's MaskedLM layer).
HEAD_NAMES = {"dense_kernel": "transform/dense/kernel", "dense_bias": "transform/dense/bias",
              "norm_gamma": "transform/LayerNorm/gamma", "norm_beta": "transform/LayerNorm/beta",
              "output_bias": "output_bias/bias"}


@keras.saving.register_keras_serializable(package="zoo")
class MaskedLMHead(keras.layers.Layer):
  """The masked-LM output layer with the output embedding tied to the input one (float32).

  At each position of `mask_positions`: `h = LayerNorm(activation(x W + b))` from the
  encoder width D to the embedding width E (layer-norm epsilon 1e-12, BERT's), then
  `logits = h · tableᵀ + output_bias` `[B, P, V]`, `table` the word embeddings `[V, E]`
  of `embedding` (shared, not copied). `transform=False`: `logits = x · tableᵀ + bias`.

  Args:
    embedding: the backbone's word-embedding layer (`backbone.token_embedding`).
    activation: of the transform, a name of the zoo's activations ("gelu_approximate"
      is the tanh form).
    transform: the dense and layer norm before the vocabulary projection (BERT's).
    initializer_range: stddev of the truncated-normal initializer of the transform's kernel.
  """

  def __init__(self, embedding, activation="gelu", transform=True, initializer_range=0.02, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    if activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    self.embedding = embedding
    self.activation = activation
    self.transform = transform
    self.initializer_range = initializer_range

  def build(self, sequence_output_shape, mask_positions_shape=None):
    vocab_size, width = self.embedding.input_dim, self.embedding.output_dim
    if self.transform:
      self.dense = keras.layers.Dense(
          width, kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
          dtype=self.dtype_policy, name="dense")
      self.dense.build((None, None, sequence_output_shape[-1]))
      self.norm = keras.layers.LayerNormalization(epsilon=1e-12, dtype=self.dtype_policy, name="norm")
      self.norm.build((None, None, width))
    elif sequence_output_shape[-1] != width:
      raise ValueError(f"a MaskedLMHead without transform needs the encoder's width "
                       f"{sequence_output_shape[-1]} to equal the embedding width {width}")
    self.output_bias = self.add_weight(name="output_bias", shape=(vocab_size,), initializer="zeros")

  def call(self, sequence_output, mask_positions):
    picked = ops.take_along_axis(ops.cast(sequence_output, self.compute_dtype),
                                 ops.expand_dims(ops.cast(mask_positions, "int32"), -1), axis=1)   # [B, P, D]
    if self.transform:
      picked = self.norm(ACTIVATIONS[self.activation](self.dense(picked)))
    table = ops.cast(self.embedding.embeddings, self.compute_dtype)   # [V, E]
    return ops.einsum("bpe,ve->bpv", picked, table) + self.output_bias

  def compute_output_shape(self, sequence_output_shape, mask_positions_shape):
    return (*mask_positions_shape, self.embedding.input_dim)

  def named_weights(self):
    """`{tf_keras name: variable}` of the head's weights (`HEAD_NAMES`)."""
    variables = {"output_bias": self.output_bias}
    if self.transform:
      variables.update(dense_kernel=self.dense.kernel, dense_bias=self.dense.bias, norm_gamma=self.norm.gamma,
                       norm_beta=self.norm.beta)
    return {HEAD_NAMES[key]: variable for key, variable in variables.items()}

  def get_config(self):
    config = super().get_config()
    config.update(activation=self.activation, transform=self.transform,
                  initializer_range=self.initializer_range)
    return config   # the embedding is the backbone's: the task builds its head from the backbone


class ZooMaskedLM(TrainsWhatItReads, PerLengthFunctions, keras_hub.models.MaskedLM):
  """A keras-hub masked-LM task on a zoo backbone: `MaskedLMHead` on its `sequence_output`.

  Inputs: the backbone's (`token_ids`, `segment_ids`, `padding_mask`) and `mask_positions`
  int32 `[B, P]`; output: float32 logits `[B, P, V]`. `activation`: the head's (default the
  encoder's); `mlm_transform`: see `MaskedLMHead`. The backbone's pooler is not trained (no
  output reads it: `zoo.keras3.hub.TrainsWhatItReads`).
  """

  unused_layers = ("pooler",)

  def __init__(self, backbone, preprocessor=None, activation=None, mlm_transform=True, sequence_length=None,
               seq_length=None, **kwargs):
    config = backbone.encoder_config
    if isinstance(backbone, FunnelBackbone) and not config.get("num_decoder_layers"):
      raise ValueError("a Funnel-Transformer masked LM needs the decoder (num_decoder_layers >= 1): without "
                       "it the encoder's output is pooled and masked positions index the full-length input")
    activation = activation or config.get("activation", "gelu")
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.masked_lm_head = MaskedLMHead(backbone.token_embedding, activation=activation,
                                       transform=mlm_transform, name=MASKED_LM_ROOT,
                                       initializer_range=config.get("initializer_range", 0.02))
    inputs = {**backbone.input,
              "mask_positions": keras.Input(shape=(None,), dtype="int32", name="mask_positions")}
    logits = self.masked_lm_head(backbone(backbone.input)["sequence_output"], inputs["mask_positions"])
    super().__init__(inputs=inputs, outputs=logits, **kwargs)
    self.activation = activation
    self.mlm_transform = mlm_transform
    apply_sequence_length(self, sequence_length, seq_length)

  def get_config(self):
    config = super().get_config()
    config.update(activation=self.activation, mlm_transform=self.mlm_transform)
    return config


@keras.saving.register_keras_serializable(package="zoo")
class FunnelMaskedLMPreprocessor(keras_hub.models.MaskedLMPreprocessor):
  backbone_cls = FunnelBackbone
  tokenizer_cls = FunnelTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerMaskedLMPreprocessor(keras_hub.models.MaskedLMPreprocessor):
  backbone_cls = TransformerBackbone
  tokenizer_cls = TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class FunnelMaskedLM(ZooMaskedLM):
  backbone_cls = FunnelBackbone
  preprocessor_cls = FunnelMaskedLMPreprocessor


@keras.saving.register_keras_serializable(package="zoo")
class TransformerMaskedLM(ZooMaskedLM):
  backbone_cls = TransformerBackbone
  preprocessor_cls = TransformerMaskedLMPreprocessor


# ---------------------------------------------------------------------------------------------
# ELECTRA: a generator's samples, and a discriminator that finds them.

ELECTRA_INPUTS = ("token_ids", "segment_ids", "padding_mask", "mask_positions", "mask_ids", "mask_weights")


@keras.saving.register_keras_serializable(package="zoo")
class ReplacedTokenSampler(ReplacedTokenSamplerSpec, ZooLayer):
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
  embedding_width = encoder_config.get("embedding_width") or encoder_config["hidden_size"]
  defaults = dict(hidden_size=max(1, encoder_config["hidden_size"] // 4),
                  num_heads=max(1, encoder_config["num_heads"] // 4),
                  intermediate_size=max(1, encoder_config["intermediate_size"] // 4),
                  embedding_width=embedding_width)
  return {**encoder_config, **defaults, **(overrides or {})}


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
    if isinstance(backbone, FunnelBackbone) and not config.get("num_decoder_layers"):
      raise ValueError("a Funnel-Transformer ELECTRA needs the decoder (num_decoder_layers >= 1): the "
                       "discriminator labels every token, and masked positions index the full-length input")
    generator_config = dict(generator_config or electra_generator_config(config))
    generator_config["seq_length"] = config.get("seq_length")
    activation = activation or config.get("activation", "gelu")
    if activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    initializer = keras.initializers.TruncatedNormal(stddev=config.get("initializer_range", 0.02))
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.generator = type(backbone)(generator_config, dtype=backbone.dtype_policy,
                                    word_embeddings=backbone.token_embedding, name=GENERATOR_ROOT)
    self.masked_lm_head = MaskedLMHead(self.generator.token_embedding, activation=activation,
                                       transform=mlm_transform, name=GENERATOR_MASKED_LM_ROOT,
                                       initializer_range=config.get("initializer_range", 0.02))
    self.sampler = ReplacedTokenSampler(name="sampler")
    self.discriminator_transform = keras.layers.Dense(
        config["hidden_size"], activation=ACTIVATIONS[activation], kernel_initializer=initializer,
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
    config.update(generator_config=dict(self.generator_config), activation=self.activation,
                  discriminator_weight=self.discriminator_weight, mlm_transform=self.mlm_transform)
    return config



class ZooElectraPreprocessor(keras_hub.models.MaskedLMPreprocessor):
  """keras-hub's masked-LM preprocessing (15% selected; 80% `[MASK]`, 10% random, 10% kept) for ELECTRA:
  the features go in `x` (`mask_ids` and `mask_weights` too: the sampler needs them), `y` and the
  sample weights stay keras-hub's (`mask_ids`, `mask_weights`)."""

  def call(self, x, y=None, sample_weight=None):
    x, y, weights = keras.utils.unpack_x_y_sample_weight(super().call(x, y, sample_weight))
    return keras.utils.pack_x_y_sample_weight(dict(x, mask_ids=y, mask_weights=weights), y, weights)


@keras.saving.register_keras_serializable(package="zoo")
class FunnelElectraPreprocessor(ZooElectraPreprocessor):
  backbone_cls = FunnelBackbone
  tokenizer_cls = FunnelTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerElectraPreprocessor(ZooElectraPreprocessor):
  backbone_cls = TransformerBackbone
  tokenizer_cls = TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class FunnelElectra(ZooElectra):
  backbone_cls = FunnelBackbone
  preprocessor_cls = FunnelElectraPreprocessor


@keras.saving.register_keras_serializable(package="zoo")
class TransformerElectra(ZooElectra):
  backbone_cls = TransformerBackbone
  preprocessor_cls = TransformerElectraPreprocessor


FAMILIES = {"funnel": (FunnelBackbone, FunnelTokenizer, FunnelMaskedLMPreprocessor, FunnelMaskedLM),
            "transformer": (TransformerBackbone, TransformerTokenizer, TransformerMaskedLMPreprocessor,
                            TransformerMaskedLM)}
ELECTRA_CLASSES = {"funnel": (FunnelElectraPreprocessor, FunnelElectra),
                   "transformer": (TransformerElectraPreprocessor, TransformerElectra)}


def masked_lm_from_preset(preset, vocab, seq_length, lower_case=True, special_tokens=None, activation=None,
                          mlm_transform=True, mask_selection_length=None, **overrides):
  """A masked-LM task with its preprocessor on a zoo preset's encoder (`zoo.presets`), random weights.

  `vocab`: the WordPiece tokens (index = id); `special_tokens`: their names by role
  (default BERT's); `mask_selection_length`: the most positions masked per sequence
  (default 15% of `seq_length`, at least 1); `overrides`: encoder arguments over the
  preset's (e.g. `hidden_size`, `dtype`).
  """
  from zoo import presets
  check_special_tokens(vocab, special_tokens)
  chosen = presets.get(preset)
  dtype = overrides.pop("dtype", None)
  config = {**chosen.config, **overrides, "vocab_size": len(vocab), "seq_length": seq_length}
  backbone_class, tokenizer_class, preprocessor_class, task_class = FAMILIES[chosen.family]
  tokenizer = tokenizer_class(vocabulary=list(vocab), lowercase=lower_case,
                              special_tokens_names=special_tokens)
  selected = mask_selection_length or max(1, round(0.15 * seq_length))
  preprocessor = preprocessor_class(tokenizer, sequence_length=seq_length, mask_selection_length=selected)
  return task_class(backbone_class(config, dtype=dtype), preprocessor=preprocessor, activation=activation,
                    mlm_transform=mlm_transform)


def electra_from_preset(preset, vocab, seq_length, lower_case=True, special_tokens=None, activation=None,
                        mlm_transform=True, mask_selection_length=None, generator_overrides=None,
                        discriminator_weight=50.0, **overrides):
  """An ELECTRA task with its preprocessor on a zoo preset's encoder (the discriminator), random weights.

  The arguments are `masked_lm_from_preset`'s, plus `generator_overrides` (the generator's encoder
  arguments over `electra_generator_config`'s quarter width) and `discriminator_weight` (λ).
  """
  from zoo import presets
  check_special_tokens(vocab, special_tokens)
  chosen = presets.get(preset)
  dtype = overrides.pop("dtype", None)
  config = {**chosen.config, **overrides, "vocab_size": len(vocab), "seq_length": seq_length}
  backbone_class, tokenizer_class, _, _ = FAMILIES[chosen.family]
  preprocessor_class, task_class = ELECTRA_CLASSES[chosen.family]
  tokenizer = tokenizer_class(vocabulary=list(vocab), lowercase=lower_case,
                              special_tokens_names=special_tokens)
  selected = mask_selection_length or max(1, round(0.15 * seq_length))
  preprocessor = preprocessor_class(tokenizer, sequence_length=seq_length, mask_selection_length=selected)
  return task_class(backbone_class(config, dtype=dtype), preprocessor=preprocessor, activation=activation,
                    mlm_transform=mlm_transform, discriminator_weight=discriminator_weight,
                    generator_config=electra_generator_config(config, generator_overrides))


def family_of(backbone):
  return next(family for family, classes in FAMILIES.items() if isinstance(backbone, classes[0]))


def save_weights_dir(task, directory):
  """Writes a masked-LM or ELECTRA task (or a bare backbone) for the tf_keras edition
  (`python -m zoo.convert keras3`).

  `directory` gets `config.json`, `vocab.txt` (when the task has a preprocessor) and
  `model.safetensors` (float32 arrays under the names both editions give them), local or
  gs://, each through `zoo.model_dir`'s atomic writers; `config.json` last.
  """
  from safetensors.numpy import save_file
  backbone = getattr(task, "backbone", task)
  arrays = {key: np.asarray(value, np.float32) for key, value in named_arrays(backbone.encoder).items()}
  config = dict(format=WEIGHTS_DIR_FORMAT, family=family_of(backbone), encoder_config=backbone.encoder_config,
                heads={})
  head = getattr(task, "masked_lm_head", None)
  head_root = MASKED_LM_ROOT
  if isinstance(task, ZooElectra):   # the generator, its masked-LM head and the discriminator's head
    head_root = GENERATOR_MASKED_LM_ROOT
    config.update(generator_config=task.generator.encoder_config,
                  discriminator_weight=task.discriminator_weight)
    arrays.update({f"{GENERATOR_ROOT}/{key}": np.asarray(value, np.float32)
                   for key, value in named_arrays(task.generator.encoder).items()})
    config["heads"][DISCRIMINATOR_HEAD_ROOT] = dict(activation=task.activation)
    for part, layer in (("transform", task.discriminator_transform), ("logits", task.discriminator_logits)):
      for weight in ("kernel", "bias"):
        value = ops.convert_to_numpy(getattr(layer, weight))
        arrays[f"{DISCRIMINATOR_HEAD_ROOT}/{part}/{weight}"] = np.asarray(value, np.float32)
  if head is not None:
    config["heads"][head_root] = dict(activation=task.activation, mlm_transform=task.mlm_transform)
    arrays.update({f"{head_root}/{name}": np.asarray(ops.convert_to_numpy(variable), np.float32)
                   for name, variable in head.named_weights().items()})
  tokenizer = getattr(getattr(task, "preprocessor", None), "tokenizer", None)
  if tokenizer is not None:
    config["tokenizer"] = dict(lower_case=bool(tokenizer.lowercase),
                               special_tokens=dict(tokenizer.special_tokens_names))
    write_atomically(os.path.join(directory, "vocab.txt"),
                     "".join(f"{token}\n" for token in tokenizer.vocabulary))
  with atomic_path(os.path.join(directory, "model.safetensors")) as temporary:
    save_file(arrays, temporary)
  write_atomically(os.path.join(directory, "config.json"), json.dumps(config, indent=2) + "\n")
  return directory

