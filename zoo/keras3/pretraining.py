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

from zoo.keras3.hub import FunnelBackbone
from zoo.keras3.hub import FunnelTokenizer
from zoo.keras3.hub import TransformerBackbone
from zoo.keras3.hub import TransformerTokenizer
from zoo.keras3.transformer_block import ACTIVATIONS
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import atomic_path
from zoo.model_dir import write_atomically
from zoo.named_weights import named_arrays

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


class ZooMaskedLM(keras_hub.models.MaskedLM):
  """A keras-hub masked-LM task on a zoo backbone: `MaskedLMHead` on its `sequence_output`.

  Inputs: the backbone's (`token_ids`, `segment_ids`, `padding_mask`) and `mask_positions`
  int32 `[B, P]`; output: float32 logits `[B, P, V]`. `activation`: the head's (default the
  encoder's); `mlm_transform`: see `MaskedLMHead`.
  """

  def __init__(self, backbone, preprocessor=None, activation=None, mlm_transform=True, **kwargs):
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


FAMILIES = {"funnel": (FunnelBackbone, FunnelTokenizer, FunnelMaskedLMPreprocessor, FunnelMaskedLM),
            "transformer": (TransformerBackbone, TransformerTokenizer, TransformerMaskedLMPreprocessor,
                            TransformerMaskedLM)}


def masked_lm_from_preset(preset, vocab, seq_length, lower_case=True, special_tokens=None, activation=None,
                          mlm_transform=True, mask_selection_length=None, **overrides):
  """A masked-LM task with its preprocessor on a zoo preset's encoder (`zoo.presets`), random weights.

  `vocab`: the WordPiece tokens (index = id); `special_tokens`: their names by role
  (default BERT's); `mask_selection_length`: the most positions masked per sequence
  (default 15% of `seq_length`, at least 1); `overrides`: encoder arguments over the
  preset's (e.g. `hidden_size`, `dtype`).
  """
  from zoo import presets
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


def family_of(backbone):
  return next(family for family, classes in FAMILIES.items() if isinstance(backbone, classes[0]))


def save_weights_dir(task, directory):
  """Writes a masked-LM task (or a bare backbone) for the tf_keras edition (`python -m zoo.convert keras3`).

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
  if head is not None:
    config["heads"][MASKED_LM_ROOT] = dict(activation=task.activation, mlm_transform=task.mlm_transform)
    arrays.update({f"{MASKED_LM_ROOT}/{name}": np.asarray(ops.convert_to_numpy(variable), np.float32)
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

