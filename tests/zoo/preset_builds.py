"""`python -m tests.zoo.preset_builds OUT SPECS`: the parameter counts of preset builds, in a process
of their own.

SPECS is a JSON list of `[preset name, overrides]`; OUT gets the JSON list of the built encoders'
`count_params()`, in order. Weights are built as zeros (a count depends on the shapes only, and
drawing hundreds of millions of truncated-normal values is most of a full-size build's time).
Full-width models take hundreds of MB each, and a process that built one keeps much of it
(TensorFlow's allocations): the test processes ask this one instead.
"""

import gc
import json
import sys


def counts(specs):
  import tensorflow as tf
  import tf_keras as keras

  from zoo import presets

  def zeros(self, shape, dtype=None, **kwargs):
    return tf.zeros(shape, dtype or tf.float32)

  keras.initializers.TruncatedNormal.__call__ = zeros
  result = []
  for name, overrides in specs:
    keras.backend.clear_session()
    encoder = presets.build(name, **overrides)
    result.append(encoder.count_params())
    del encoder
    gc.collect()   # a full-width model is a reference cycle: gone before the next
  return result


def main(argv):
  out, specs = argv
  with open(out, "w") as file:
    json.dump(counts(json.loads(specs)), file)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
