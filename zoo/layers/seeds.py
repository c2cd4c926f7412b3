"""Random draws that are functions of a seed: the same seed gives the same dropout masks and samples.

Outside `step_seeds`, the zoo's random layers draw as Keras layers do (a fresh seed per
call from TensorFlow's random state). Inside, every draw is a stateless op whose seed is
the scope's seed folded with a counter, in the order the draws are built into the graph.
The training job opens the scope in each train step with a seed made of the run's seed,
the step number and the replica, so a run resumed from a checkpoint draws exactly the
dropout masks and samples the uninterrupted run drew at the same steps.

Example:
  >>> x = tf.ones([2, 4])
  >>> layer = Dropout(0.5)
  >>> with step_seeds([1, 2]):
  ...   first = layer(x, training=True)
  >>> with step_seeds([1, 2]):
  ...   second = layer(x, training=True)
  >>> bool(tf.reduce_all(first == second))
  True
"""

import contextlib
import numbers
import threading
from collections.abc import Iterator
from collections.abc import Sequence

import tensorflow as tf
import tf_keras as keras

from zoo.layers.base import WithoutAutograph

_STATE = threading.local()


@contextlib.contextmanager
def step_seeds(seed: tf.Tensor | Sequence[int]) -> Iterator[None]:
  """Makes the zoo's random draws built inside functions of `seed` (a `[2]` integer tensor).

  The scope belongs to the thread that opens it: open it where the model is called (in
  the replica function under a distribution strategy, which may run replicas in threads).
  """
  previous = getattr(_STATE, "scope", None)
  _STATE.scope = [tf.cast(tf.convert_to_tensor(seed), tf.int64), 0]
  try:
    yield
  finally:
    _STATE.scope = previous


def active() -> bool:
  """Whether a `step_seeds` scope is open in this thread."""
  return getattr(_STATE, "scope", None) is not None


def next_seed() -> tf.Tensor:
  """A `[2]` int32 seed for a stateless random op (int32: what every such op takes under XLA):
  the scope's next one, else a fresh random one."""
  scope = getattr(_STATE, "scope", None)
  if scope is None:
    return tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
  scope[1] += 1
  return tf.cast(tf.random.experimental.stateless_fold_in(scope[0], scope[1]), tf.int32)


@keras.utils.register_keras_serializable(package="zoo")
class Dropout(WithoutAutograph, keras.layers.Dropout):
  """Keras' `Dropout`, whose mask inside `step_seeds` is a function of the scope's seed."""

  def call(self, inputs: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    if not active():
      return super().call(inputs, training=training)
    if isinstance(self.rate, numbers.Real) and self.rate == 0:
      return tf.identity(inputs)
    if training is None:
      training = keras.backend.learning_phase()

    def dropped() -> tf.Tensor:
      return tf.nn.experimental.stateless_dropout(inputs, self.rate, seed=next_seed(),
                                                  noise_shape=self._get_noise_shape(inputs))

    return tf.__internal__.smart_cond.smart_cond(training, dropped, lambda: tf.identity(inputs))
