"""What every Keras 3 layer of the zoo shares."""

import keras


class ZooLayer(keras.layers.Layer):
  """The base of the zoo's Keras 3 layers."""


class WeightlessLayer(ZooLayer):
  """A layer without weights: built when made, so Keras 3 never traces it to build it."""

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.built = True


def clone_initializer(initializer):
  """A fresh initializer with the same config, so no two kernels start out equal."""
  if hasattr(initializer, "get_config"):
    return initializer.__class__.from_config(initializer.get_config())
  return initializer
