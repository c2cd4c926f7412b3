"""Step seeds: inside `step_seeds` the zoo's random draws are functions of the seed."""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from zoo.layers import seeds
from zoo.layers.attention import drop_attention_probs


def test_dropout_in_a_scope_is_a_function_of_the_seed_and_keeps_keras_semantics():
  x = tf.ones([64, 64])
  layer = seeds.Dropout(0.25)

  def draw(seed):
    with seeds.step_seeds(seed):
      return layer(x, training=True).numpy()

  first, again, other = draw([3, 4]), draw([3, 4]), draw([3, 5])
  np.testing.assert_array_equal(first, again)
  assert (first != other).any()
  kept = first != 0
  np.testing.assert_allclose(first[kept], 1 / 0.75, rtol=1e-6)   # inverted dropout, as Keras'
  assert abs(kept.mean() - 0.75) < 0.03
  with seeds.step_seeds([3, 4]):
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
  assert (layer(x, training=True).numpy() != layer(x, training=True).numpy()).any()   # outside: fresh draws


def test_successive_draws_in_one_scope_differ_and_a_compiled_step_repeats_them():
  """Two layers in one step draw different masks; a tf.function given the same seed tensor
  draws the same masks on every call (a resumed run's step equals the original's)."""
  first, second = seeds.Dropout(0.5), seeds.Dropout(0.5)
  x = tf.ones([32, 32])

  @tf.function(jit_compile=True)
  def step(seed):
    with seeds.step_seeds(seed):
      return first(x, training=True), second(x, training=True), drop_attention_probs(x, 0.5)

  a = [value.numpy() for value in step(tf.constant([1, 9], tf.int64))]
  b = [value.numpy() for value in step(tf.constant([1, 9], tf.int64))]
  c = [value.numpy() for value in step(tf.constant([1, 10], tf.int64))]
  for one, two in zip(a, b, strict=True):
    np.testing.assert_array_equal(one, two)
  assert (a[0] != a[1]).any() and (a[0] != c[0]).any() and (a[2] != c[2]).any()


def test_the_seeded_dropout_round_trips_through_keras_config():
  layer = seeds.Dropout(0.3, noise_shape=[None, 1], name="drop")
  clone = keras.layers.deserialize(keras.layers.serialize(layer))
  assert isinstance(clone, seeds.Dropout) and clone.get_config() == layer.get_config()
