"""Peak memory of one training step, measured in a process of its own.

    python -m benchmarks.memory --preset funnel_b4_4_4 --seq-length 512 --batch-size 8

prints one JSON object of resident memory sizes (Linux's VmRSS and VmHWM):

- `runtime_bytes`: the process with TensorFlow started, before the model exists;
- `steady_bytes`: once the model, the head and AdamW's moment slots exist;
- `peak_bytes`: the peak over two training steps (VmHWM, reset just before them
  through /proc/self/clear_refs);
- `model_bytes = peak - runtime`: what the model needs at its peak (weights, optimizer
  slots, gradients, activations kept for the backward pass, temporaries), the memory
  an accelerator would have to hold;
- `step_bytes = peak - steady`: what the step needs on top of weights and slots.

A fresh process per model keeps one model's allocations from hiding another's.
"""

import argparse
import json
import re
import sys

KIB = 1024


def _status_kib(field):
  with open("/proc/self/status") as status:
    return int(re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.M).group(1))


def _reset_peak():
  """Sets VmHWM to the current resident size (Linux 4.0+)."""
  with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")


def measure(preset, seq_length, batch_size, mixed_precision=False, **overrides):
  import tensorflow as tf
  import tf_keras as keras

  import zoo.presets
  from benchmarks.measure import TrainStep

  tf.constant(1.0).numpy()   # the runtime and its CPU device exist
  runtime = _status_kib("VmRSS")
  if mixed_precision:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  encoder = zoo.presets.build(preset, seq_length=seq_length, **overrides)
  step = TrainStep(encoder, batch_size, seq_length, zoo.presets.get(preset).config["vocab_size"])
  steady = _status_kib("VmRSS")
  _reset_peak()
  step()
  step()
  peak = _status_kib("VmHWM")
  return dict(preset=preset, seq_length=seq_length, batch_size=batch_size,
              mixed_precision=mixed_precision, runtime_bytes=runtime * KIB, steady_bytes=steady * KIB,
              peak_bytes=peak * KIB, model_bytes=(peak - runtime) * KIB, step_bytes=(peak - steady) * KIB)


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", required=True, help="a zoo preset, e.g. funnel_b4_4_4")
  parser.add_argument("--seq-length", type=int, default=512)
  parser.add_argument("--batch-size", type=int, default=8)
  parser.add_argument("--mixed-bfloat16", action="store_true", help="train under the mixed_bfloat16 policy")
  parser.add_argument("--overrides", default="{}", help="encoder arguments over the preset's, as JSON")
  args = parser.parse_args(argv)
  result = measure(args.preset, args.seq_length, args.batch_size, args.mixed_bfloat16,
                   **json.loads(args.overrides))
  json.dump(result, sys.stdout)
  print()


if __name__ == "__main__":
  main()
