"""What both Keras 3 encoders share (`EncoderModel`): the functional model its configuration's graph
builds, the dtype policy of its layers, any sequence length, and a compiled function per length under
TensorFlow (`PerLengthFunctions`).

The Keras 3 encoders are the twins of `zoo.models.TransformerEncoder` and `zoo.models.FunnelEncoder`:
the same configurations (`zoo.configs`) and so the same config fields, the same inputs
(`input_word_ids`, `input_mask`, `input_type_ids`, int32 `[B, T]`) and outputs (`sequence_output`,
`pooled_output`, `encoder_outputs`, the Funnel's `encoder_sequence_output`, `attention_probs` on
request), and the same layer and weight names, so weights move between the editions by name
(`zoo.named_weights`).
"""

import keras
from keras import ops
from keras.src import backend

from zoo.configs import EncoderConfig
from zoo.graphs.kit import INPUT_NAMES
from zoo.graphs.kit import EncoderKit
from zoo.graphs.kit import encoder_inputs


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
  """What both encoders' Keras 3 edition shares: the functional model of its configuration, the dtype and
  any sequence length.

  An encoder takes its family's configuration (`config_class`, `zoo.configs`, shared with the tf_keras
  edition), or the configuration's fields as keyword arguments; `graph` (`zoo.graphs`) wires the layers
  `layer_classes()` names. Two keyword arguments are this edition's: `dtype` (as for any Keras layer)
  sets the policy of every layer of the encoder, and `word_embeddings`, another encoder's
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

  config_class: type[EncoderConfig] = EncoderConfig
  graph = None   # the family's `zoo.graphs` function: (config, kit, inputs) -> (outputs, embeddings)

  def __init__(self, config=None, dtype=None, word_embeddings=None, **kwargs):
    config, kwargs = self.config_class.taken_from(config, kwargs)
    policy = dtype_policy(dtype)
    kit = EncoderKit(keras=keras, **self.layer_classes(), cast=lambda x, like: ops.cast(x, like.dtype),
                     options=dict(dtype=policy),
                     embedding_options=dict(word_embeddings=word_embeddings) if word_embeddings else {},
                     layers={})
    inputs = encoder_inputs(keras, config.built_length)
    outputs, embeddings = type(self).graph(config, kit, inputs)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.dtype_policy = policy   # a functional model takes no dtype: its layers' policy
    # Not tracked (the functional graph tracks the layers).
    object.__setattr__(self, "config", config)
    object.__setattr__(self, "_built_length", config.built_length)   # the length every call compares
    object.__setattr__(self, "_embeddings", embeddings)
    # What wires the same layers at other lengths.
    object.__setattr__(self, "_rewire", lambda length, inputs: type(self).graph(
        config.replace(seq_length=length), kit, inputs)[0])
    self.input_spec = None   # any length (checked in `call`)

  @staticmethod
  def layer_classes():
    """The layers the encoder is made of (`EncoderKit` fields)."""
    raise NotImplementedError

  def get_embedding_table(self):
    return self._embeddings.word_embeddings.embeddings

  def get_embedding_layer(self):
    return self._embeddings.word_embeddings

  # What the rest of the zoo asks of an encoder, answered by its configuration.
  def length_problem(self, length):
    """Why the encoder cannot run on `length` tokens (naming the lengths it takes), or None."""
    return self.config.length_problem(length)

  def padding_dependence(self):
    """Why the pooling reads padding, or None (`EncoderConfig.padding_dependence`)."""
    return self.config.padding_dependence()

  def sequence_mask(self, input_mask):
    """The mask of `sequence_output`'s real positions for `input_mask` `[B, T]` (the input mask itself for an
    encoder whose sequence output is as long as its input)."""
    return input_mask

  def _length(self, inputs):
    """The static length of `inputs` (a dict of `[B, T]` tensors, or a list in input order)."""
    first = inputs["input_word_ids"] if isinstance(inputs, dict) else keras.tree.flatten(inputs)[0]
    return first.shape[1]

  def _other_length(self, inputs):
    """`inputs`' length when the built graph does not take it as it is, else None; raises on a length
    the encoder cannot take."""
    length = self._length(inputs)
    built = self._built_length
    if length is None:
      if built is None:
        return None
      raise ValueError(f"{self.name}: the sequence length must be known when traced (the graph is built per "
                       "length): pad the inputs to a fixed length, as keras-hub's preprocessors do")
    if length == built:   # the configuration's checks took it
      return None
    problem = self.length_problem(length)
    if problem:
      raise ValueError(f"{self.name}: {problem}")
    return None if built is None else length

  def call(self, inputs, training=None, mask=None):
    length = self._other_length(inputs)
    if length is None:
      return super().call(inputs, training=training, mask=mask)
    return self._rewire(length, dict(inputs) if isinstance(inputs, dict) else dict(
        zip(INPUT_NAMES, keras.tree.flatten(inputs), strict=True)))

  def compute_output_spec(self, inputs, training=None, mask=None):
    if self._length(inputs) is None and self._built_length is not None:
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

  def get_config(self):
    return dict(self.config.to_dict(), name=self.name, dtype=self.dtype_policy.name)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    name, dtype = config.pop("name", None), config.pop("dtype", None)
    if isinstance(dtype, dict):   # a serialized policy
      dtype = keras.dtype_policies.deserialize(dtype)
    return cls(cls.config_class.from_dict(config, ignore=("trainable",)), dtype=dtype, name=name)
