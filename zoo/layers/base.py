"""What every Keras layer of the zoo's tf_keras edition shares."""


class WithoutAutograph:
  """A mixin for Keras layers: `call` is traced as written, never converted by AutoGraph.

  tf_keras converts the `call` of every layer defined outside Keras whenever a functional model
  is built or a `tf.function` with AutoGraph traces it. The zoo's layers branch in Python on
  static values only (shapes and settings, as XLA's static shapes require), so the conversion
  changes nothing but costs most of an encoder's construction (3.9 of 5 CPU-seconds for a
  Funnel-Transformer, measured in a fresh process). The training job already traces without it.
  """

  def _should_use_autograph(self):
    return False
