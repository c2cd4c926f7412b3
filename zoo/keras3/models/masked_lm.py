"""Masked-LM pre-training in keras-hub: the zoo's masked-LM head and task (both families').

`ZooMaskedLM`: a keras-hub `MaskedLM` (its compile defaults: sparse cross-entropy on the
logits, weighted by the preprocessor's `mask_weights`) whose head is the zoo's
(`MaskedLMHead`, the tf_keras `zoo.models.MaskedLMHead`'s twin with its weight names): at
each masked position `LayerNorm(activation(x W + b)) · tableᵀ + output_bias`, the table the
backbone's word embeddings (tied), in float32; `mlm_transform=False` for the single tied
projection of Funnel's published masked-LM models. A Funnel backbone needs its decoder
(masked positions index the full-length output). The families' preprocessors are keras-hub's
`MaskedLMPreprocessor` (15% of the tokens selected, of them 80% `[MASK]`, 10% a random
token, 10% kept; special tokens never) with the zoo's tokenizers.
"""

import keras
import keras_hub
from keras import ops

from zoo.keras3.layers.transformer_block import ACTIVATIONS
from zoo.keras3.models.encoder import PerLengthFunctions
from zoo.keras3.models.task import TrainsWhatItReads
from zoo.keras3.models.task import apply_sequence_length
from zoo.model_dir import MASKED_LM_ROOT

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
  output reads it: `zoo.keras3.models.task.TrainsWhatItReads`).
  """

  unused_layers = ("pooler",)

  def __init__(self, backbone, preprocessor=None, activation=None, mlm_transform=True, sequence_length=None,
               seq_length=None, **kwargs):
    config = backbone.encoder_config
    if not config.full_length_output:
      raise ValueError(f"a masked LM needs a full-length sequence output, which this {config.encoder_name} "
                       "pools away (a Funnel-Transformer needs the decoder: num_decoder_layers >= 1): masked "
                       "positions index the full-length input")
    activation = activation or config.activation
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.masked_lm_head = MaskedLMHead(backbone.token_embedding, activation=activation,
                                       transform=mlm_transform, name=MASKED_LM_ROOT,
                                       initializer_range=config.initializer_range)
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
