"""What each layer and encoder is, written once for both editions: arguments, checks, config, wiring.

The zoo's layers exist twice: in `tf_keras` (`zoo.layers`, `zoo.models`: the training job's
and the exports' path) and in Keras 3 (`zoo.keras3`: JAX, TensorFlow and PyTorch). This
package holds everything about a layer that is not tensor code, as one mixin class per
layer in a module of the layer's name: the constructor's arguments and defaults, their
validation, the attributes they set, `get_config`, and the static shape and position
arithmetic. Each edition's layer derives from its spec and its own Keras' `Layer` and keeps
only `build` and `call`:

    from zoo.specs import attention as specs

    class MultiHeadAttention(specs.MultiHeadAttentionSpec, base.ZooLayer):   # tf_keras
      def build(self, input_shape): ...        # the sublayers, in this edition's Keras
      def call(self, query, value=None, ...): ...   # the tensor code

The edition's base class names its Keras as `_keras` (for initializers); a spec calls
`super().__init__(**kwargs)` first, so the Keras `Layer` is set up before any attribute
is. The encoders' constructors and functional graphs are here too, in
`transformer_encoder.py` and `funnel_encoder.py`, built from the layer classes an edition
hands over (`encoder.EncoderKit`): the wiring of blocks, pooling, the residual-attention
carry and the decoder is written once.

Modules: `base` (LayerSpec, AttentionResult), `attention`, `relative_attention`,
`transformer_block`, `embeddings`, `funnel_pooling`, `encoder_inputs`, `pretrainers` (the
layers'), `encoder` (what both encoders share), `transformer_encoder`, `funnel_encoder`.

Plain Python: importing it loads neither Keras (see `zoo/choices.py` and `zoo/grids.py`,
the other modules both editions share).
"""
