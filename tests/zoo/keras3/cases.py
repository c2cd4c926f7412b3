"""The cases on which each Keras 3 layer and encoder is compared with its tf_keras twin.

A case is a function `case(lib)` that builds one layer or encoder of the edition `lib`
(`zoo.layers` + `zoo.models` for tf_keras, `zoo.keras3` for Keras 3: the same names and
arguments) and returns `(weights holder or None, run)`, `run()` giving a dict of named
outputs. The inputs come from numpy with fixed seeds, so both editions see the same
ones; `tests/zoo/keras3/twins.py` runs the cases in the two editions.
"""

import itertools

import numpy as np

WIDTH, HEADS, HEAD_SIZE, FFN, VOCAB, LENGTH = 16, 2, 8, 32, 40, 16


def _hidden(batch, length, seed):
  return np.random.default_rng(seed).normal(size=(batch, length, WIDTH)).astype(np.float32)


def every_length_inputs(length=LENGTH, seed=0):
  """One row per real length 1 .. T, so padding cuts every pooling window; padding gets real ids."""
  rng = np.random.default_rng(seed)
  lengths = np.arange(1, length + 1)
  mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)
  types = np.zeros([length, length], np.int32)
  types[:, length // 2:] = 1
  return dict(input_word_ids=rng.integers(1, VOCAB, size=[length, length]).astype(np.int32),
              input_mask=mask, input_type_ids=types)


def _segments(batch, length, seed):
  segments = np.random.default_rng(seed).integers(0, 2, size=(batch, length)).astype(np.int32)
  segments[:, 0] = 2
  return segments


def _result(result):
  """The named outputs of an `AttentionResult`; a local layer's carry and probabilities are pairs."""
  named = dict(output=result.output)
  for key in ("carry", "probs"):
    value = getattr(result, key)
    named.update({f"{key}_{i}": part for i, part in enumerate(value)} if isinstance(value, tuple)
                 else {key: value})
  return named


# ---------------------------------------------------------------------------------------------
# Layers.


def attention_case(residual, mask_rank):
  def case(lib):
    query, value = _hidden(2, 5, 1), _hidden(2, 7, 2)
    mask = (np.random.default_rng(3).random((2, 7) if mask_rank == 2 else (2, 5, 7)) > 0.3).astype(np.int32)
    carry = np.random.default_rng(4).normal(size=(2, HEADS, 5, 7)).astype(np.float32)
    layer = lib.MultiHeadAttention(HEADS, HEAD_SIZE, residual_attention=residual, running_mean=residual,
                                   name="attention")
    kwargs = dict(attention_carry=carry, layer_index=2) if residual else {}
    return layer, lambda: _result(layer(query, value, attention_mask=mask, **kwargs))
  return case


# (queries, keys, query positions, key positions): self-attention, pooled queries with [cls]
# (a pool-query-only layer), a block-2 pool-query-only grid, offset grids.
GRIDS = {
    "self": (7, 7, np.arange(7), np.arange(7)),
    "pooled_cls": (4, 8, np.array([-1, 1, 3, 5]), np.arange(8)),
    "block2": (2, 4, np.array([-3, 1]), np.array([-1, 1, 3, 5])),
    "offset": (3, 5, np.array([3.0, 5.0, 7.0]), np.array([-2.0, -1.0, 0.0, 1.0, 2.0])),
}


def relative_case(form, segments, separate_cls, grid):
  queries, keys, query_positions, key_positions = GRIDS[grid]

  def case(lib):
    query, value = _hidden(2, queries, 1), _hidden(2, keys, 2)
    mask = np.ones([2, keys], np.int32)
    mask[1, keys - 2:] = 0
    carry = np.random.default_rng(4).normal(size=(2, HEADS, queries, keys)).astype(np.float32)
    layer = lib.RelativeMultiHeadAttention(
        HEADS, HEAD_SIZE, position_encoding=form, use_segment_bias=segments, separate_cls=separate_cls,
        residual_attention=True, name="attention")
    kwargs = dict(query_segment_ids=_segments(2, queries, 5), key_segment_ids=_segments(2, keys, 6)) \
        if segments else {}
    return layer, lambda: _result(layer(
        query, value, attention_mask=mask, query_positions=query_positions.tolist(),
        key_positions=key_positions.tolist(), attention_carry=carry, layer_index=1, **kwargs))
  return case


def local_case(form, window, global_tokens, grid):
  """Local attention with global tokens (two residual calls, the second on the first's carry)."""
  queries, keys, query_positions, key_positions = LOCAL_GRIDS[grid]

  def case(lib):
    query, value = _hidden(3, queries, 1), _hidden(3, keys, 2)
    mask = (np.arange(keys)[None] < np.array([keys, keys // 2 + 1, 1])[:, None]).astype(np.int32)
    arguments = dict(residual_attention=True, running_mean=True, attention_window=window,
                     global_tokens=global_tokens, name="attention")
    if form == "absolute":
      layer, kwargs = lib.MultiHeadAttention(HEADS, HEAD_SIZE, **arguments), {}
    else:
      layer = lib.RelativeMultiHeadAttention(HEADS, HEAD_SIZE, position_encoding=form, use_segment_bias=True,
                                             separate_cls=True, **arguments)
      kwargs = dict(query_positions=query_positions.tolist(), key_positions=key_positions.tolist(),
                    query_segment_ids=_segments(3, queries, 5), key_segment_ids=_segments(3, keys, 6))

    def run():
      first = layer(query, value, attention_mask=mask, **kwargs)
      return _result(layer(query, value, attention_mask=mask, attention_carry=first.carry, layer_index=1,
                           **kwargs))
    return layer, run
  return case


# Local attention's grids: self-attention at a length off the block, a pool-query-only layer with [cls].
LOCAL_GRIDS = {
    "self": (13, 13, np.arange(13), np.arange(13)),
    "pooled_cls": (8, 16, np.concatenate([[-1.0], np.arange(1.0, 15.0, 2.0)]), np.arange(16)),
}


def per_example_positions_case(lib):
  """The factorized form with run-time `[B, T]` positions (uneven, different per example)."""
  query, value = _hidden(2, 4, 1), _hidden(2, 6, 2)
  rng = np.random.default_rng(7)
  query_positions = np.sort(rng.uniform(0, 12, size=(2, 4)), axis=1).astype(np.float32)
  key_positions = np.sort(rng.uniform(0, 12, size=(2, 6)), axis=1).astype(np.float32)
  layer = lib.RelativeMultiHeadAttention(HEADS, HEAD_SIZE, use_segment_bias=True, name="attention")
  return layer, lambda: _result(layer(query, value, query_positions=query_positions,
                                      key_positions=key_positions, query_segment_ids=_segments(2, 4, 5),
                                      key_segment_ids=_segments(2, 6, 6)))


def pooling_case(pooling_type, separate_cls, truncate_seq, semantics):
  def case(lib):
    hidden = _hidden(LENGTH, LENGTH, 1)
    mask = every_length_inputs()["input_mask"]
    carry = np.random.default_rng(2).normal(size=(LENGTH, HEADS, LENGTH, LENGTH)).astype(np.float32)
    ids = np.random.default_rng(3).integers(0, 3, size=(LENGTH, LENGTH)).astype(np.int32)
    pooling = lib.FunnelPooling(pooling_type, separate_cls, truncate_seq, semantics=semantics)
    return None, lambda: dict(
        hidden=pooling(hidden, input_mask=mask), mask=pooling.pool_mask(mask), ids=pooling.pool_ids(ids),
        carry_queries=pooling(carry, input_mask=mask, axis=2),
        carry_keys=pooling(carry, input_mask=mask, axis=3))
  return case


def upsampling_case(stride, separate_cls, truncate_seq, length):
  def case(lib):
    pooled = _hidden(2, 5, 1)
    upsampling = lib.FunnelUpsampling(stride, separate_cls, truncate_seq)
    return None, lambda: dict(output=upsampling(pooled, target_length=length))
  return case


def block_case(norm_first, position_encoding, cross, activation):
  def case(lib):
    relative = position_encoding != "absolute"
    hidden = _hidden(2, 4 if cross else 8, 1)
    key_value = _hidden(2, 8, 2) if cross else None
    mask = np.ones([2, 8], np.int32)
    mask[1, 5:] = 0
    block = lib.TransformerBlock(
        HEADS, HEAD_SIZE, FFN, activation=activation, dropout=0.0, attention_dropout=0.0,
        norm_first=norm_first, position_encoding=position_encoding, use_segment_bias=relative,
        separate_cls=relative, residual_attention=True, name="block")
    kwargs = {}
    if relative:
      query_positions = [-1, 1, 3, 5] if cross else list(range(8))
      kwargs = dict(query_positions=query_positions, key_positions=list(range(8)),
                    query_segment_ids=_segments(2, hidden.shape[1], 5), key_segment_ids=_segments(2, 8, 6))
    carry = np.random.default_rng(4).normal(size=(2, HEADS, hidden.shape[1], 8)).astype(np.float32)
    return block, lambda: _result(block(hidden, key_value, attention_mask=mask, attention_carry=carry,
                                        layer_index=1, **kwargs))
  return case


def embeddings_case(absolute, projection):
  def case(lib):
    inputs = every_length_inputs(8)
    embeddings = lib.EncoderEmbeddings(
        VOCAB, 8 if projection else WIDTH, WIDTH, max_sequence_length=32 if absolute else None,
        type_vocab_size=2 if absolute else 0, dropout=0.0, name="embeddings")
    types = inputs["input_type_ids"] if absolute else None
    return embeddings, lambda: dict(output=embeddings(inputs["input_word_ids"], types))
  return case


# ---------------------------------------------------------------------------------------------
# Encoders.

TINY_FUNNEL = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_heads=HEADS, intermediate_size=FFN,
                   seq_length=LENGTH, dropout=0.0, attention_dropout=0.0, block_sizes=(1, 1, 1),
                   num_decoder_layers=1)
TINY_TRANSFORMER = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_layers=2, num_heads=HEADS,
                        intermediate_size=FFN, dropout=0.0, attention_dropout=0.0, max_sequence_length=32,
                        seq_length=LENGTH)


def encoder_outputs(outputs):
  named = {key: value for key, value in outputs.items() if key not in ("encoder_outputs", "attention_probs")}
  for key in ("encoder_outputs", "attention_probs"):
    for index, value in enumerate(outputs.get(key, ())):
      if isinstance(value, tuple):   # local attention: the global rows and the blocks
        named.update({f"{key}_{index}_{part}": tensor for part, tensor in enumerate(value)})
      else:
        named[f"{key}_{index}"] = value
  return named


def funnel_case(**overrides):
  def case(lib):
    encoder = lib.FunnelEncoder(**{**TINY_FUNNEL, **overrides}, output_attention_probs=True)
    inputs = every_length_inputs()
    return encoder, lambda: encoder_outputs(encoder(inputs, training=False))
  return case


def transformer_case(**overrides):
  def case(lib):
    encoder = lib.TransformerEncoder(**{**TINY_TRANSFORMER, **overrides}, output_attention_probs=True)
    inputs = every_length_inputs()
    return encoder, lambda: encoder_outputs(encoder(inputs, training=False))
  return case


FUNNEL_FLAGS = ("position_encoding", "separate_cls", "truncate_seq", "pool_q_only", "pooling_type",
                "pooling_semantics")


def funnel_flag_grid():
  """`{name: flags}` for every combination of the Funnel flags (64)."""
  grid = {}
  for values in itertools.product(("factorized", "shift"), (True, False), (True, False), (True, False),
                                  ("mean", "max"), ("zoo", "huggingface")):
    flags = dict(zip(FUNNEL_FLAGS, values, strict=True))
    name = "-".join([values[0], "cls" if values[1] else "nocls", "trunc" if values[2] else "notrunc",
                     "qonly" if values[3] else "qkv", values[4], values[5]])
    grid[name] = flags
  return grid


def _pairwise_funnel_flags():
  """Eight combinations in which every pair of values of any two flags appears (an orthogonal
  array of strength 2; `funnel_flag_grid` has all 64)."""
  rows = [(0, 0, 0, 0, 0, 0), (0, 0, 1, 1, 1, 1), (0, 1, 0, 1, 1, 0), (0, 1, 1, 0, 0, 1),
          (1, 0, 0, 1, 0, 1), (1, 0, 1, 0, 1, 0), (1, 1, 0, 0, 1, 1), (1, 1, 1, 1, 0, 0)]
  choices = (("factorized", "shift"), (True, False), (True, False), (True, False), ("mean", "max"),
             ("zoo", "huggingface"))
  names = {tuple(flags.values()): name for name, flags in funnel_flag_grid().items()}
  picked = {}
  for row in rows:
    values = tuple(choice[i] for choice, i in zip(choices, row, strict=True))
    picked[names[values]] = dict(zip(FUNNEL_FLAGS, values, strict=True))
  return picked


def layer_cases():
  cases = {
      "attention-residual-mask2": attention_case(True, 2),
      "attention-plain-mask3": attention_case(False, 3),
      "relative-per-example-positions": per_example_positions_case,
  }
  # Each form on every grid, the segment term and separate_cls on and off.
  for form, (segments, separate_cls, grid) in itertools.product(
      ("factorized", "shift"), [(True, True, "self"), (False, False, "pooled_cls"), (True, False, "block2"),
                                (False, True, "offset"), (True, True, "pooled_cls")]):
    name = f"relative-{form}-{'seg' if segments else 'noseg'}-{'cls' if separate_cls else 'nocls'}-{grid}"
    cases[name] = relative_case(form, segments, separate_cls, grid)
  # Every pair of values of the pooling flags.
  for pooling_type, separate_cls, truncate_seq, semantics in [
      ("mean", True, True, "zoo"), ("mean", True, False, "huggingface"), ("mean", False, True, "huggingface"),
      ("mean", False, False, "zoo"), ("max", True, True, "huggingface"), ("max", True, False, "zoo"),
      ("max", False, True, "zoo"), ("max", False, False, "huggingface"),
      ("mean", True, True, "funnel_authors"), ("max", False, True, "funnel_authors")]:
    name = (f"pooling-{pooling_type}-{'cls' if separate_cls else 'nocls'}-"
            f"{'trunc' if truncate_seq else 'notrunc'}-{semantics}")
    cases[name] = pooling_case(pooling_type, separate_cls, truncate_seq, semantics)
  for stride, separate_cls, truncate_seq, length in [(4, True, True, 16), (2, True, False, 9),
                                                     (4, False, True, 19), (1, True, True, 4)]:
    cases[f"upsampling-{stride}-{separate_cls}-{truncate_seq}-{length}"] = upsampling_case(
        stride, separate_cls, truncate_seq, length)
  for form, window, global_tokens, grid in [("shift", 3, 2, "self"), ("absolute", 1, 2, "self"),
                                             ("factorized", 2, 1, "pooled_cls")]:
    cases[f"local-{form}-w{window}-g{global_tokens}-{grid}"] = local_case(form, window, global_tokens, grid)
  for norm_first, encoding, cross, activation in [(False, "absolute", False, "gelu"),
                                                  (True, "absolute", False, "relu"),
                                                  (False, "factorized", True, "gelu_approximate"),
                                                  (True, "shift", True, "swish"),
                                                  (False, "shift", False, "gelu")]:
    layout = f"{'preln' if norm_first else 'postln'}-{encoding}-{'cross' if cross else 'self'}"
    name = f"block-{layout}-{activation}"
    cases[name] = block_case(norm_first, encoding, cross, activation)
  for absolute, projection in [(True, False), (False, True), (True, True)]:
    cases[f"embeddings-{'absolute' if absolute else 'words'}-{'projection' if projection else 'same'}"] = \
        embeddings_case(absolute, projection)
  return cases


def encoder_cases(full_grid=False):
  """The encoders: the Funnel flag combinations (all 64 with `full_grid`, else 8 covering every
  pair), residual attention, repeats and the decoder residual; the Transformer's variants."""
  cases = {f"funnel-{name}": funnel_case(**flags)
           for name, flags in (funnel_flag_grid() if full_grid else _pairwise_funnel_flags()).items()}
  if full_grid:
    return cases
  cases.update({
      "funnel-residual-pool": funnel_case(residual_attention=True, running_mean=True,
                                          block_repeats=(2, 1, 1)),
      "funnel-residual-reset-qkv-authors": funnel_case(residual_attention=True, carry_at_pooling="reset",
                                                       pool_q_only=False, pooling_semantics="funnel_authors"),
      # The authors' TensorFlow rules without separate_cls, in both relative forms.
      "funnel-authors-tf-nocls-shift": funnel_case(pooling_semantics="funnel_authors",
                                                   position_rules="authors_tf", separate_cls=False,
                                                   position_encoding="shift"),
      "funnel-authors-tf-nocls-factorized": funnel_case(pooling_semantics="funnel_authors",
                                                        position_rules="authors_tf", separate_cls=False),
      "funnel-residual-shift-max": funnel_case(residual_attention=True, position_encoding="shift",
                                               pooling_type="max", decoder_residual_layer=0,
                                               block_sizes=(2, 1), block_repeats=(1, 2)),
      "funnel-no-decoder-projection": funnel_case(num_decoder_layers=0, embedding_width=8, head_size=4,
                                                  use_segment_bias=False),
      "transformer-postln": transformer_case(),
      "transformer-preln-projection": transformer_case(norm_first=True, embedding_width=8),
      "transformer-realformer-running-mean": transformer_case(residual_attention=True, running_mean=True,
                                                              num_layers=3),
      "transformer-relative-factorized": transformer_case(position_encoding="factorized",
                                                          activation="gelu_approximate"),
      "transformer-relative-shift-residual": transformer_case(position_encoding="shift",
                                                              residual_attention=True),
      # Cross-layer sharing (ALBERT): one block at every depth; shared attention; shared feed-forward nets.
      "transformer-albert-shared": transformer_case(layer_sharing="all", embedding_width=8, num_layers=3),
      "funnel-shared-attention-residual": funnel_case(layer_sharing="attention", residual_attention=True),
      "funnel-shared-ffn": funnel_case(layer_sharing="ffn", block_sizes=(2, 1)),
      # Local attention with global tokens: pooled blocks, pool-query-only, the decoder, the carry.
      "funnel-local-qonly": funnel_case(attention_window=2),
      "funnel-local-shift-reset": funnel_case(attention_window=1, global_tokens=2, position_encoding="shift",
                                              residual_attention=True, carry_at_pooling="reset",
                                              pool_q_only=False, separate_cls=False),
      "transformer-local-realformer": transformer_case(attention_window=2, residual_attention=True,
                                                       running_mean=True, num_layers=3),
  })
  return cases


def encoder_inputs_spec(keras):
  """Named int32 `[B, LENGTH]` inputs of `keras` (either edition)."""
  return {name: keras.Input(shape=(LENGTH,), dtype="int32", name=name)
          for name in ("input_word_ids", "input_mask", "input_type_ids")}


# ---------------------------------------------------------------------------------------------
# One training step: the gradients of both editions, through one step of plain SGD.

TRAINING_RATE = 0.1


def training_cases():
  """`{name: (encoder class name, arguments)}`: encoders trained one step in both editions (dropout off)."""
  return {
      "funnel-residual-decoder": ("FunnelEncoder", dict(TINY_FUNNEL, residual_attention=True)),
      "funnel-authors-max-shift": ("FunnelEncoder", dict(TINY_FUNNEL, pooling_semantics="funnel_authors",
                                                         pooling_type="max", position_encoding="shift")),
      # Mean pooling: under JAX with the suite's XLA flags (backend optimization level 0) one step of max
      # pooling without separate_cls gives NaN gradients (finite with XLA's default flags).
      "funnel-authors-tf-nocls-shift": ("FunnelEncoder", dict(TINY_FUNNEL, pooling_semantics="funnel_authors",
                                                              position_rules="authors_tf", separate_cls=False,
                                                              position_encoding="shift")),
      "transformer-postln": ("TransformerEncoder", dict(TINY_TRANSFORMER)),
      "transformer-realformer-relative": ("TransformerEncoder", dict(
          TINY_TRANSFORMER, residual_attention=True, position_encoding="factorized")),
      # A shared weight's gradient sums over the layers that use it.
      "transformer-albert-shared": ("TransformerEncoder", dict(TINY_TRANSFORMER, layer_sharing="all",
                                                               embedding_width=8)),
      "funnel-shared-attention": ("FunnelEncoder", dict(TINY_FUNNEL, layer_sharing="attention",
                                                        block_sizes=(2, 1))),
      "transformer-local-relative": ("TransformerEncoder", dict(
          TINY_TRANSFORMER, attention_window=2, global_tokens=2, residual_attention=True,
          position_encoding="shift")),
  }


def training_targets(seed):
  """Fixed random projections of `sequence_output` (full length in every training case) and
  `pooled_output`: the loss is the mean over examples of
  `Σ sequence_output · seq + Σ pooled_output · pooled`."""
  rng = np.random.default_rng(100 + seed)
  return dict(seq=rng.normal(size=(LENGTH, LENGTH, WIDTH)).astype(np.float32),
              pooled=rng.normal(size=(LENGTH, WIDTH)).astype(np.float32))
