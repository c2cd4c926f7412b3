"""Peak memory of one training step, measured in a process of its own.

    python -m benchmarks.memory --preset funnel_b4_4_4 --seq-length 512 --batch-size 4

prints one JSON object: `steady_bytes`, the resident memory once the model, the head
and AdamW's moment slots exist, and `peak_bytes`, the peak resident memory over two
training steps (Linux's VmHWM, reset just before them through /proc/self/clear_refs).
`step_bytes = peak - steady` is what the step itself needs: activations kept for the
backward pass, gradients and temporaries. A fresh process per model keeps one model's
allocations from hiding another's.
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
  import tf_keras as keras

  import zoo.presets
  from benchmarks.measure import TrainStep

  if mixed_precision:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  encoder = zoo.presets.build(preset, seq_length=seq_length, **overrides)
  step = TrainStep(encoder, batch_size, seq_length, zoo.presets.get(preset).config["vocab_size"])
  steady = _status_kib("VmRSS")
  _reset_peak()
  step()
  step()
  return dict(preset=preset, seq_length=seq_length, batch_size=batch_size,
              mixed_precision=mixed_precision, steady_bytes=steady * KIB,
              peak_bytes=_status_kib("VmHWM") * KIB, step_bytes=(_status_kib("VmHWM") - steady) * KIB)


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", required=True, help="a zoo preset, e.g. funnel_b4_4_4")
  parser.add_argument("--seq-length", type=int, default=512)
  parser.add_argument("--batch-size", type=int, default=4)
  parser.add_argument("--mixed-bfloat16", action="store_true", help="train under the mixed_bfloat16 policy")
  args = parser.parse_args(argv)
  result = measure(args.preset, args.seq_length, args.batch_size, args.mixed_bfloat16)
  json.dump(result, sys.stdout)
  print()


if __name__ == "__main__":
  main()
