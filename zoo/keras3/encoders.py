"""The Transformer and Funnel-Transformer encoders in Keras 3.

The Keras 3 twins of `zoo.models.TransformerEncoder` and `zoo.models.FunnelEncoder`:
functional models with the same constructor arguments (and so the same config fields),
the same inputs (`input_word_ids`, `input_mask`, `input_type_ids`, int32 `[B, T]`) and
outputs (`sequence_output`, `pooled_output`, `encoder_outputs`, the Funnel's
`encoder_sequence_output`, `attention_probs` on request), and the same layer and weight
names, so weights move between the editions by name (`zoo.named_weights`).
"""

import keras
from keras import ops
from keras.src import backend

from zoo.keras3.embeddings import ClsSegmentIds
from zoo.keras3.embeddings import EncoderEmbeddings
from zoo.keras3.funnel_pooling import FunnelPooling
from zoo.keras3.funnel_pooling import FunnelUpsampling
from zoo.keras3.transformer_block import TransformerBlock
from zoo.specs import encoder_inputs as input_specs
from zoo.specs.encoder import EncoderKit
from zoo.specs.encoder_inputs import INPUT_NAMES
from zoo.specs.funnel_encoder import FunnelEncoderSpec
from zoo.specs.transformer_encoder import TransformerEncoderSpec


def encoder_inputs(seq_length=None):
  """Named int32 `[B, T]` Keras 3 inputs, as Model Garden's encoders take them."""
  return input_specs.encoder_inputs(keras, seq_length)


def dtype_policy(dtype=None):
  """The dtype policy of an encoder and of every layer in it: `dtype` (a name such as
  "mixed_bfloat16", or a policy), or the global policy when None. The float32 islands
  (layer norms, attention scores and probabilities, the carry) stay float32 under any of them."""
  return keras.dtype_policies.get(dtype) if dtype is not None else keras.config.dtype_policy()


def _lengths(data):
  """The static second dimension of every tensor (or tensor spec) of rank 2 or more in `data`."""
  return tuple(item.shape[1] for item in keras.tree.flatten(data)
               if getattr(item, "shape", None) is not None and len(item.shape) >= 2)


class PerLengthFunctions:
  """Under TensorFlow, a compiled train, test and predict function per input length.

  Keras' TensorFlow trainer traces its step functions with `reduce_retracing`: after a model
  has met two lengths, it traces one function for any length, where the zoo's encoders would
  not know theirs (their graph is built per length). This mixin (before the Keras model in
  the bases) keeps one Keras function per length instead, so each is traced with its static
  length, as JAX's jit compiles one per shape. Other backends are untouched.
  """

  def make_train_function(self, force=False):
    return self._per_length("train", force)

  def make_test_function(self, force=False):
    return self._per_length("test", force)

  def make_predict_function(self, force=False):
    return self._per_length("predict", force)

  def _per_length(self, kind, force):
    make = getattr(super(), f"make_{kind}_function")
    attribute = f"{kind}_function"
    if keras.backend.backend() != "tensorflow" or self.run_eagerly:
      return make(force=force)
    current = getattr(self, attribute, None)
    if current is not None and not force:
      return current
    functions = {}

    def function(data):
      spec = getattr(data, "element_spec", None)
      if spec is None and not isinstance(data, (list, tuple)):   # train_on_batch's generator of one batch
        data = list(data)
      key = _lengths(spec if spec is not None else data)
      if key not in functions:
        make(force=True)   # sets the attribute to Keras' function
        functions[key] = getattr(self, attribute)
        setattr(self, attribute, function)
      return functions[key](data if spec is not None or isinstance(data, list) else iter(data))

    setattr(self, attribute, function)
    return function


class EncoderModel(PerLengthFunctions, keras.Model):
  """What both encoders' Keras 3 edition shares: its layers' classes, the dtype and the config.

  The constructor's arguments, checks and functional graph are each encoder's spec
  (`zoo.specs.transformer_encoder`, `zoo.specs.funnel_encoder`, shared with the tf_keras
  edition). Two keyword arguments are this edition's: `dtype` (as for any Keras layer) sets
  the policy of every layer of the encoder, and `word_embeddings`, another encoder's
  word-embedding layer, makes this one use that layer (ELECTRA's generator shares the
  discriminator's table; not part of the config).

  Any sequence length, as keras-hub's BERT: the functional graph is built for `seq_length`,
  and inputs of another length run the same graph wired again at theirs, on the same layers
  (so the same weights). The Funnel's pooling grids and relative positions are Python
  constants of the length (no gathers, static shapes for XLA), so each length is traced on
  its own: JAX and XLA on TPU compile once per length met, TensorFlow traces once per length;
  PyTorch runs eagerly. A length must be known when traced (inputs padded to a fixed
  length, as keras-hub's preprocessors pad); `length_problem` names the lengths an encoder
  takes (a Funnel's blocks need enough tokens to pool; an absolute position table has a
  maximum).
  """

  @classmethod
  def _kit(cls, kwargs):
    kwargs = dict(kwargs)
    policy = dtype_policy(kwargs.pop("dtype", None))
    shared = kwargs.pop("word_embeddings", None)
    kit = EncoderKit(keras=keras, **cls.layer_classes(), cast=lambda x, like: ops.cast(x, like.dtype),
                     options=dict(dtype=policy),
                     embedding_options={} if shared is None else dict(word_embeddings=shared), layers={})
    return kit, kwargs

  def _after_build(self, kit, graph):
    self.dtype_policy = kit.options["dtype"]   # a functional model takes no dtype: its layers' policy
    # Not tracked (the functional graph tracks the layers): what wires them at other lengths.
    object.__setattr__(self, "_rewire", lambda length, inputs: graph(dict(self._config, seq_length=length),
                                                                     kit, inputs=inputs)[1])
    self.input_spec = None   # any length (checked in `call`)

  def _length(self, inputs):
    """The static length of `inputs` (a dict of `[B, T]` tensors, or a list in input order)."""
    first = inputs["input_word_ids"] if isinstance(inputs, dict) else keras.tree.flatten(inputs)[0]
    return first.shape[1]

  def _other_length(self, inputs):
    """`inputs`' length when the built graph does not take it as it is, else None; raises on a length
    the encoder cannot take."""
    length = self._length(inputs)
    built = self._config["seq_length"]
    if length is None:
      if built is None:
        return None
      raise ValueError(f"{self.name}: the sequence length must be known when traced (the graph is built per "
                       "length): pad the inputs to a fixed length, as keras-hub's preprocessors do")
    problem = self.length_problem(length)
    if problem:
      raise ValueError(f"{self.name}: {problem}")
    return None if built is None or length == built else length

  def call(self, inputs, training=None, mask=None):
    length = self._other_length(inputs)
    if length is None:
      return super().call(inputs, training=training, mask=mask)
    return self._rewire(length, dict(inputs) if isinstance(inputs, dict) else dict(
        zip(INPUT_NAMES, keras.tree.flatten(inputs), strict=True)))

  def compute_output_spec(self, inputs, training=None, mask=None):
    if self._length(inputs) is None and self._config["seq_length"] is not None:
      # Symbolic inputs of any length (a keras-hub backbone's): the built graph's outputs with
      # the lengths unknown.
      def any_length(spec):
        shape = list(spec.shape)
        shape[0] = None
        if len(shape) == 3:     # [B, T, D]
          shape[1] = None
        elif len(shape) == 4:   # attention probabilities [B, N, T, S]
          shape[2:] = [None, None]
        return keras.KerasTensor(shape, dtype=spec.dtype)
      return keras.tree.map_structure(any_length, self.output)
    if self._other_length(inputs) is None:
      return super().compute_output_spec(inputs, training=training, mask=mask)
    return backend.compute_output_spec(self.call, inputs, training=training)

  def _edition_config(self):
    return {"dtype": self.dtype_policy.name}

  @classmethod
  def _edition_arguments(cls, config):
    config = {key: value for key, value in config.items() if key != "trainable"}
    if isinstance(config.get("dtype"), dict):   # a serialized policy
      config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return config


@keras.saving.register_keras_serializable(package="zoo")
class TransformerEncoder(TransformerEncoderSpec, EncoderModel):
  """A stack of `TransformerBlock`s over token embeddings: Post-LN, Pre-LN, RealFormer.

  `zoo.models.TransformerEncoder` for Keras 3; see its docstring for the arguments, and
  `zoo/specs/transformer_encoder.py` for the constructor and the forward wiring.
  """

  @staticmethod
  def layer_classes():
    """The Keras 3 layers a Transformer encoder is made of (`zoo.specs.encoder.EncoderKit` fields)."""
    return dict(embeddings=EncoderEmbeddings, block=TransformerBlock, cls_segment_ids=ClsSegmentIds)


@keras.saving.register_keras_serializable(package="zoo")
class FunnelEncoder(FunnelEncoderSpec, EncoderModel):
  """Funnel-Transformer: blocks of relative-attention layers with pooling in between.

  `zoo.models.FunnelEncoder` for Keras 3; see its docstring for the arguments (blocks
  and repeats, pooling type and semantics, pool-query-only, `separate_cls`,
  `truncate_seq`, position rules, the decoder, residual attention across blocks), and
  `zoo/specs/funnel_encoder.py` for the constructor and the forward wiring.
  """

  @staticmethod
  def layer_classes():
    """The Keras 3 layers a Funnel encoder is made of (`zoo.specs.encoder.EncoderKit` fields)."""
    return dict(embeddings=EncoderEmbeddings, block=TransformerBlock, pooling=FunnelPooling,
                upsampling=FunnelUpsampling, cls_segment_ids=ClsSegmentIds)
