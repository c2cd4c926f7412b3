"""The Keras 3 edition's training step under JAX (jit) and TensorFlow, against the tf_keras job's step.

    python -m benchmarks.keras3                      # funnel_b4_4_4, length 128, batch 8; prints the table
    python -m benchmarks.keras3 --out BENCHMARKS.md  # also writes it as the section of BENCHMARKS.md

One fine-tuning step of the same model on the same batch: forward with dropout, a
2-class float32 head on `pooled_output`, backward, an AdamW update. The tf_keras step is
`benchmarks.measure.TrainStep` (graph mode, the training job's AdamW); the Keras 3 step
is `model.train_on_batch`, XLA-compiled under JAX (`jit_compile`, Keras' default there)
and a graph function under TensorFlow. Keras fixes its backend when it is imported, so
each backend runs in a process of its own, and in that process the Keras 3 step and the
tf_keras step alternate, round by round (which goes first alternates too), so that the
machine's load weighs on both alike. After a warm-up round (which compiles), each round
times both steps' wall and CPU seconds; a ratio is the median over the rounds of the
round's Keras 3 time over its tf_keras time. `XLA_FLAGS` changes XLA's code and so the
JAX step: the report states the value the workers ran with (the caller's environment),
and the machine's load average when each backend's rounds began and ended.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION_TITLE = "## 9. Keras 3 (zoo.keras3) under JAX and TensorFlow vs the tf_keras step"
BACKENDS = ("jax", "tensorflow")


def _inputs(batch_size, seq_length, vocab_size, seed=0):
  rng = np.random.default_rng(seed)
  features = dict(input_word_ids=rng.integers(1, vocab_size, size=(batch_size, seq_length)).astype(np.int32),
                  input_mask=np.ones((batch_size, seq_length), np.int32),
                  input_type_ids=np.zeros((batch_size, seq_length), np.int32))
  return features, rng.integers(0, 2, size=(batch_size,)).astype(np.int32)


def _timed(step):
  wall, cpu = time.perf_counter(), time.process_time()
  step()
  return time.perf_counter() - wall, time.process_time() - cpu


def alternate(steps, repeats):
  """`{name: {"wall": [...], "cpu": [...]}}` of `repeats` rounds of the two `steps` ({name: fn}),
  after a warm-up round; the order within a round alternates."""
  names = list(steps)
  for name in names:
    steps[name]()   # warm-up: traces and compiles
  times = {name: dict(wall=[], cpu=[]) for name in names}
  for round_index in range(repeats):
    for name in (names if round_index % 2 == 0 else names[::-1]):
      wall, cpu = _timed(steps[name])
      times[name]["wall"].append(wall)
      times[name]["cpu"].append(cpu)
  return times


def keras3_step(preset, seq_length, batch_size, overrides=None):
  """This process's Keras 3 backend: one training step of the preset's encoder with a head."""
  import keras

  import zoo.keras3
  from zoo import presets
  from zoo.graphs.kit import encoder_inputs
  chosen = presets.get(preset)
  config = chosen.encoder_config(**{**(overrides or {}), "seq_length": seq_length})
  encoder_class = {"funnel": zoo.keras3.FunnelEncoder, "transformer": zoo.keras3.TransformerEncoder}
  encoder = encoder_class[chosen.family](config)
  inputs = encoder_inputs(keras, seq_length)
  logits = keras.layers.Dense(2, dtype="float32", name="classifier")(encoder(inputs)["pooled_output"])
  model = keras.Model(inputs, logits)
  model.compile(optimizer=keras.optimizers.AdamW(1e-5),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  features, labels = _inputs(batch_size, seq_length, config.vocab_size)

  def step():
    loss = model.train_on_batch(features, labels)
    if not np.isfinite(loss):
      raise FloatingPointError(f"the Keras 3 step gave loss {loss}")
  return step


def tf_keras_step(preset, seq_length, batch_size, overrides=None):
  from benchmarks import measure
  from zoo import presets
  encoder = presets.build(preset, seq_length=seq_length, **(overrides or {}))
  vocab_size = {**presets.get(preset).config, **(overrides or {})}["vocab_size"]
  return measure.TrainStep(encoder, batch_size, seq_length, vocab_size)


def worker(preset, seq_length, batch_size, repeats, overrides=None):
  """This process's backend: both steps alternating; their times and the per-round ratios' medians."""
  import keras
  steps = dict(keras3=keras3_step(preset, seq_length, batch_size, overrides),
               tf_keras=tf_keras_step(preset, seq_length, batch_size, overrides))
  load_before = os.getloadavg()[0]
  times = alternate(steps, repeats)
  result = dict(backend=keras.backend.backend(), rounds=repeats, load=[load_before, os.getloadavg()[0]])
  for kind in ("wall", "cpu"):
    ours, theirs = np.array(times["keras3"][kind]), np.array(times["tf_keras"][kind])
    result[kind] = dict(keras3=float(np.median(ours)), tf_keras=float(np.median(theirs)),
                        ratio=float(np.median(ours / theirs)))
  return result


def run(preset, seq_length, batch_size, repeats, overrides=None, progress=print, backends=BACKENDS):
  """`{backend: worker result}`, one worker process per backend of `backends`, one after the other."""
  results = {}
  for backend in backends:
    progress(f"keras 3 / {backend} and tf_keras, alternating: {preset}, {batch_size}x{seq_length}")
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "benchmarks.keras3", "--worker", "--preset", preset, "--seq-length",
               str(seq_length), "--batch-size", str(batch_size), "--repeats", str(repeats),
               "--overrides", json.dumps(overrides or {})]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if result.returncode:
      raise RuntimeError(f"the {backend} worker failed:\n{result.stderr[-4000:]}")
    results[backend] = json.loads(result.stdout.strip().splitlines()[-1])
  return results


def report(preset, seq_length, batch_size, repeats, results, xla_flags=None):
  from importlib.metadata import version
  names = dict(jax="Keras 3, JAX backend (jit)", tensorflow="Keras 3, TensorFlow backend")
  flags = json.dumps(xla_flags) if xla_flags else "unset"
  lines = [SECTION_TITLE, "",
           f"Command: `python -m benchmarks.keras3` (Keras {version('keras')}, JAX {version('jax')}; "
           f"XLA_FLAGS {flags}). `{preset}` at length {seq_length}, batch {batch_size}, float32: one "
           "fine-tuning step (forward with dropout, a 2-class head, backward, AdamW). Per backend, one "
           f"process alternates its Keras 3 step with the tf_keras graph step for {repeats} rounds after a "
           "warm-up round that compiles; the ratios are medians of the rounds' ratios (Keras 3 / tf_keras), "
           f"in wall and in CPU seconds. The machine has {os.cpu_count()} cores; the load column is its "
           "1-minute load average when the rounds began and ended.", "",
           "| step | Keras 3 s | tf_keras s (same process) | ratio, wall | ratio, CPU | load |",
           "|---|---|---|---|---|---|"]
  for backend in BACKENDS:
    wall, cpu = results[backend]["wall"], results[backend]["cpu"]
    load = " → ".join(f"{value:.1f}" for value in results[backend]["load"])
    lines.append(f"| {names[backend]} | {wall['keras3']:.3f} | {wall['tf_keras']:.3f} | "
                 f"{wall['ratio']:.2f}× | {cpu['ratio']:.2f}× | {load} |")
  jax_ratio = results["jax"]["wall"]["ratio"]
  verdict = "no slower than" if jax_ratio <= 1 else "slower than"
  lines += ["", f"JAX's compiled step is {verdict} the tf_keras graph step here ({jax_ratio:.2f}× in wall "
            "time; expected ≤ 1)."]
  return "\n".join(lines) + "\n"


def write_section(path, section, title=SECTION_TITLE):
  """Puts `section` (headed `title`) into the Markdown file `path`, in place of its old self."""
  text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
  if title in text:
    start = text.index(title)
    following = text.find("\n## ", start + len(title))
    text = text[:start] + section + (text[following + 1:] if following >= 0 else "")
  else:
    text = text.rstrip() + "\n\n" + section
  from zoo.atomic_files import write_atomically
  write_atomically(path, text)


def publish(section, out=None, title=SECTION_TITLE):
  """Prints a benchmark's section and, with `out`, puts it into that Markdown file (`write_section`)."""
  print(section)
  if out:
    write_section(out, section, title)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="funnel_b4_4_4")
  parser.add_argument("--seq-length", type=int, default=128)
  parser.add_argument("--batch-size", type=int, default=8)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--overrides", default="{}", help="encoder arguments over the preset's, as JSON")
  parser.add_argument("--out", help="write the section into this Markdown file (BENCHMARKS.md)")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  overrides = json.loads(args.overrides)
  if args.worker:
    print(json.dumps(worker(args.preset, args.seq_length, args.batch_size, args.repeats, overrides)))
    return 0
  results = run(args.preset, args.seq_length, args.batch_size, args.repeats, overrides,
                progress=lambda message: print(message, file=sys.stderr))
  section = report(args.preset, args.seq_length, args.batch_size, args.repeats, results,
                   xla_flags=os.environ.get("XLA_FLAGS"))
  publish(section, args.out)
  return 0


if __name__ == "__main__":
  sys.exit(main())
