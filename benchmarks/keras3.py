"""The Keras 3 edition's training step under JAX (jit) and TensorFlow, against the tf_keras job's step.

    python -m benchmarks.keras3                      # funnel_b4_4_4, length 128, batch 8; prints the table
    python -m benchmarks.keras3 --out BENCHMARKS.md  # also writes it as the section of BENCHMARKS.md

One fine-tuning step of the same model on the same batch: forward with dropout, a
2-class float32 head on `pooled_output`, backward, an AdamW update. The tf_keras step is
`benchmarks.measure.TrainStep` (graph mode, the training job's AdamW), run in this
process; each Keras 3 backend runs in a process of its own (the backend is fixed when
Keras is imported) as `model.train_on_batch`, XLA-compiled under JAX (`jit_compile`,
Keras' default there) and a graph function under TensorFlow. Each time is the median of
the rounds after a warm-up round (which compiles); the ratios divide by the tf_keras
step of the same run.
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


def _median_seconds(step, repeats):
  step()   # warm-up: traces and compiles
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  return float(np.median(times))


def keras3_step_seconds(preset, seq_length, batch_size, repeats):
  """This process's Keras 3 backend: the median seconds of one training step."""
  import keras

  import zoo.keras3
  from zoo import presets
  chosen = presets.get(preset)
  encoder_class = {"funnel": zoo.keras3.FunnelEncoder, "transformer": zoo.keras3.TransformerEncoder}
  encoder = encoder_class[chosen.family](**{**chosen.config, "seq_length": seq_length})
  inputs = zoo.keras3.encoders.encoder_inputs(seq_length)
  logits = keras.layers.Dense(2, dtype="float32", name="classifier")(encoder(inputs)["pooled_output"])
  model = keras.Model(inputs, logits)
  model.compile(optimizer=keras.optimizers.AdamW(1e-5),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  features, labels = _inputs(batch_size, seq_length, chosen.config["vocab_size"])

  def step():
    loss = model.train_on_batch(features, labels)
    if not np.isfinite(loss):
      raise FloatingPointError(f"the Keras 3 step gave loss {loss}")
  return _median_seconds(step, repeats)


def tf_keras_step_seconds(preset, seq_length, batch_size, repeats):
  from benchmarks import measure
  from zoo import presets
  encoder = presets.build(preset, seq_length=seq_length)
  step = measure.TrainStep(encoder, batch_size, seq_length, presets.get(preset).config["vocab_size"])
  return _median_seconds(step, repeats)


def run(preset, seq_length, batch_size, repeats, progress=print):
  results = {}
  for backend in BACKENDS:
    progress(f"keras 3 / {backend}: {preset}, {batch_size}x{seq_length}")
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "benchmarks.keras3", "--worker", "--preset", preset, "--seq-length",
               str(seq_length), "--batch-size", str(batch_size), "--repeats", str(repeats)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if result.returncode:
      raise RuntimeError(f"the {backend} worker failed:\n{result.stderr[-4000:]}")
    results[backend] = json.loads(result.stdout.strip().splitlines()[-1])["seconds"]
  progress(f"tf_keras: {preset}, {batch_size}x{seq_length}")
  results["tf_keras"] = tf_keras_step_seconds(preset, seq_length, batch_size, repeats)
  return results


def report(preset, seq_length, batch_size, repeats, results):
  from importlib.metadata import version
  base = results["tf_keras"]
  rows = [("tf_keras (graph, the training job's step)", base), ("Keras 3, JAX backend (jit)", results["jax"]),
          ("Keras 3, TensorFlow backend", results["tensorflow"])]
  lines = [SECTION_TITLE, "",
           f"Command: `python -m benchmarks.keras3` (Keras {version('keras')}, JAX {version('jax')}). "
           f"`{preset}` at length {seq_length}, batch {batch_size}, float32: one fine-tuning step (forward "
           "with dropout, a 2-class head, backward, AdamW); medians of "
           f"{repeats} rounds after a warm-up round that compiles, each backend in a process of its own, "
           "in one run. Ratios divide by the tf_keras step of the same run.", "",
           "| step | seconds | ratio to tf_keras |", "|---|---|---|"]
  lines += [f"| {name} | {seconds:.3f} | {seconds / base:.2f}× |" for name, seconds in rows]
  jax_ratio = results["jax"] / base
  verdict = "no slower than" if jax_ratio <= 1 else "slower than"
  lines += ["", f"JAX's compiled step is {verdict} the tf_keras graph step here ({jax_ratio:.2f}×; "
            "expected ≤ 1)."]
  return "\n".join(lines) + "\n"


def write_section(path, section):
  text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
  if SECTION_TITLE in text:
    start = text.index(SECTION_TITLE)
    following = text.find("\n## ", start + len(SECTION_TITLE))
    text = text[:start] + section + (text[following + 1:] if following >= 0 else "")
  else:
    text = text.rstrip() + "\n\n" + section
  from zoo.model_dir import write_atomically
  write_atomically(path, text)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="funnel_b4_4_4")
  parser.add_argument("--seq-length", type=int, default=128)
  parser.add_argument("--batch-size", type=int, default=8)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--out", help="write the section into this Markdown file (BENCHMARKS.md)")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    seconds = keras3_step_seconds(args.preset, args.seq_length, args.batch_size, args.repeats)
    print(json.dumps(dict(seconds=seconds)))
    return 0
  results = run(args.preset, args.seq_length, args.batch_size, args.repeats,
                progress=lambda message: print(message, file=sys.stderr))
  section = report(args.preset, args.seq_length, args.batch_size, args.repeats, results)
  print(section)
  if args.out:
    write_section(args.out, section)
  return 0


if __name__ == "__main__":
  sys.exit(main())
