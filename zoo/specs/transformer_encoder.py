"""The Transformer encoder (BERT's Post-LN, Pre-LN, RealFormer, the relative and local-attention
variants), edition-neutral: its constructor's arguments and checks (`TransformerEncoderSpec`)
and its forward wiring (`transformer_graph`), which `zoo.models.TransformerEncoder` (tf_keras)
and `zoo.keras3.TransformerEncoder` build with their own layer classes.
"""

import types

from zoo.choices import ABSOLUTE
from zoo.choices import LAYER_SHARING
from zoo.choices import SHIFT
from zoo.choices import check_choice
from zoo.specs.attention import check_local_attention
from zoo.specs.encoder import EncoderSpec
from zoo.specs.encoder import constructor_arguments
from zoo.specs.encoder import layer_stack
from zoo.specs.encoder_inputs import encoder_inputs


class TransformerEncoderSpec(EncoderSpec):
  """`TransformerEncoder`'s arguments and functional graph (see the tf_keras encoder's docstring)."""

  def __init__(self,
               vocab_size,
               hidden_size=768,
               num_layers=12,
               num_heads=12,
               intermediate_size=3072,
               activation="gelu",
               dropout=0.1,
               attention_dropout=0.1,
               max_sequence_length=512,
               type_vocab_size=2,
               embedding_width=None,
               norm_first=False,
               residual_attention=False,
               running_mean=False,
               position_encoding=ABSOLUTE,
               layer_norm_epsilon=1e-12,
               initializer_range=0.02,
               seq_length=None,
               output_attention_probs=False,
               layer_sharing="none",
               attention_window=None,
               global_tokens=1,
               **kwargs):
    config = constructor_arguments(locals())
    check_choice("layer_sharing", layer_sharing, LAYER_SHARING)
    check_local_attention(attention_window, global_tokens)
    if attention_window is not None and seq_length is None:
      raise ValueError("local attention (attention_window) needs a static seq_length")
    if position_encoding == ABSOLUTE and seq_length and seq_length > max_sequence_length:
      raise ValueError(f"seq_length {seq_length} exceeds max_sequence_length {max_sequence_length}, the size "
                       "of the absolute position table: raise max_sequence_length (the table grows, and a "
                       "checkpoint's smaller table no longer fits) or use a relative position_encoding")
    if hidden_size % num_heads:
      raise ValueError(f"hidden_size ({hidden_size}) must be a multiple of num_heads ({num_heads})")
    if position_encoding == SHIFT and seq_length is None:
      raise ValueError("position_encoding='shift' needs a static seq_length")
    self._build(config, kwargs, transformer_graph)

  @staticmethod
  def config_length_problem(config, length):
    if length < 1:
      return f"a sequence needs at least 1 token, got {length}"
    maximum = config["max_sequence_length"]
    if config["position_encoding"] == ABSOLUTE and length > maximum:
      return (f"{length} tokens exceed max_sequence_length {maximum}, the size of the absolute position "
              f"table: the encoder takes 1 to {maximum} tokens")
    return None


def transformer_graph(config, kit, inputs=None):
  """`TransformerEncoder`'s layers and graph in `kit`'s edition: `(inputs, outputs, embeddings)`.

  `inputs`: the tensors to run the graph on (default new `keras.Input`s of `seq_length`).
  """
  c = types.SimpleNamespace(**config)
  relative = c.position_encoding != ABSOLUTE
  initializer = kit.keras.initializers.TruncatedNormal(stddev=c.initializer_range)

  embeddings = kit.make(
      kit.embeddings, c.vocab_size, c.embedding_width or c.hidden_size, c.hidden_size,
      max_sequence_length=None if relative else c.max_sequence_length,
      type_vocab_size=0 if relative else c.type_vocab_size, dropout=c.dropout,
      layer_norm_epsilon=c.layer_norm_epsilon, initializer=initializer, name="embeddings", **kit.options,
      **kit.embedding_options)

  def block(name, **shared):
    return kit.make(
        kit.block, c.num_heads, c.hidden_size // c.num_heads, c.intermediate_size, activation=c.activation,
        dropout=c.dropout, attention_dropout=c.attention_dropout, norm_first=c.norm_first,
        layer_norm_epsilon=c.layer_norm_epsilon, position_encoding=c.position_encoding,
        use_segment_bias=relative, residual_attention=c.residual_attention,
        running_mean=c.running_mean, kernel_initializer=initializer, attention_window=c.attention_window,
        global_tokens=c.global_tokens, name=name, **shared, **kit.options)
  blocks = layer_stack(block, [f"layer_{i}" for i in range(c.num_layers)], c.layer_sharing)
  final_norm = kit.make(kit.keras.layers.LayerNormalization, epsilon=c.layer_norm_epsilon, dtype="float32",
                        name="final_norm") if c.norm_first else None
  pooler = kit.make(kit.keras.layers.Dense, c.hidden_size, activation="tanh", kernel_initializer=initializer,
                    name="pooler", **kit.options)

  inputs = inputs if inputs is not None else encoder_inputs(kit.keras, c.seq_length)
  mask = inputs["input_mask"]
  hidden = embeddings(inputs["input_word_ids"], None if relative else inputs["input_type_ids"])
  block_kwargs = {}
  if relative:
    segments = kit.make(kit.cls_segment_ids, name="cls_segment_ids", **kit.options)
    block_kwargs["query_segment_ids"] = segments(inputs["input_type_ids"])
  if c.seq_length is not None and c.position_encoding == SHIFT:
    positions = list(range(c.seq_length))
    block_kwargs.update(query_positions=positions, key_positions=positions)
  carry, layer_outputs, attention_probs = None, [], []
  for index, block in enumerate(blocks):
    result = block(hidden, attention_mask=mask, attention_carry=carry, layer_index=index, **block_kwargs)
    hidden = result.output
    carry = result.carry if c.residual_attention else None
    attention_probs.append(result.probs)
    layer_outputs.append(hidden)
  if final_norm is not None:   # encoder_outputs keep the blocks' raw outputs
    hidden = kit.cast(final_norm(hidden), hidden)
  outputs = dict(sequence_output=hidden, pooled_output=pooler(hidden[:, 0]), encoder_outputs=layer_outputs)
  if c.output_attention_probs:
    outputs["attention_probs"] = attention_probs
  return inputs, outputs, embeddings
