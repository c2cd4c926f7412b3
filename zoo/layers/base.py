"""What every Keras layer of the zoo's tf_keras edition shares."""

import tf_keras as keras


class WithoutAutograph:
  """A mixin for Keras layers: `call` is traced as written, never converted by AutoGraph.

  tf_keras converts the `call` of every layer defined outside Keras whenever a functional model
  is built or a `tf.function` with AutoGraph traces it. The zoo's layers branch in Python on
  static values only (shapes and settings, as XLA's static shapes require), so the conversion
  changes nothing but costs a third to a half of an encoder's construction in a fresh process
  (measured: BERT-base at depth 1, 3.0 -> 1.4 CPU-s; a Funnel-Transformer, 3.9 -> 2.7). The
  training job already traces without it.
  """

  def _should_use_autograph(self) -> bool:
    return False


class ZooLayer(WithoutAutograph, keras.layers.Layer):
  """The base of the zoo's tf_keras layers: traced without AutoGraph."""
