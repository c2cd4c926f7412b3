"""keras-hub `fit` at a short and a full sequence length, on one classifier, under each Keras backend.

    python -m benchmarks.keras3_lengths                       # JAX, TensorFlow, PyTorch; 32 and 512 tokens
    python -m benchmarks.keras3_lengths --backends jax --rounds 3

A `FunnelTextClassifier` of a zoo preset (default `funnel_b4_4_4_decoder`, the architecture of
the authors' `funnel-transformer/small`, random weights, a 30,522-token vocabulary) fits raw
text (Python's standard-library docstrings, so every length is filled) for `--steps` steps of
`--batch-size` at each length of `--lengths`, the preprocessor's `sequence_length` changed
between fits on the same model: what a keras-hub user does for short texts. Keras fixes its
backend when it is imported, so each backend runs in a process of its own; in it, after a
warm-up fit per length (which compiles), the lengths alternate round by round (which goes
first alternates too), so that the machine's load weighs on both alike. Printed per backend:
the median seconds of a fit at each length, and the ratio of the full length's to the
short one's. `XLA_FLAGS` and the load average are reported with them.
"""

import argparse
import json
import os
import pydoc
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ("jax", "tensorflow", "torch")
VOCAB_SIZE = 30522
MODULES = ("argparse", "asyncio", "collections", "csv", "dataclasses", "email", "functools", "http.client",
           "json", "logging", "os", "pathlib", "re", "subprocess", "tarfile", "threading", "typing",
           "zipfile")


def prose(count):
  """`count` texts of real English: the docstrings of standard-library modules and their members."""
  texts = []
  for name in MODULES:
    module = pydoc.locate(name)
    for item in [module, *vars(module).values()]:
      doc = getattr(item, "__doc__", None)
      if isinstance(doc, str) and len(doc.split()) > 40:
        texts.append(" ".join(doc.split()))
  texts = sorted(set(texts))
  return [texts[i % len(texts)] for i in range(count)]


def vocabulary(texts, size=VOCAB_SIZE):
  """A WordPiece vocabulary of `size` tokens: BERT's special tokens, every character as a word and
  a continuation, then the texts' most frequent words (lower-cased)."""
  counts = {}
  for text in texts:
    for word in re.findall(r"\w+|[^\w\s]", text.lower()):
      counts[word] = counts.get(word, 0) + 1
  characters = sorted({c for word in counts for c in word})
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters, *(f"##{c}" for c in characters)]
  seen = set(tokens)
  tokens += [w for w, _ in sorted(counts.items(), key=lambda item: -item[1]) if w not in seen]
  tokens += [f"[unused{i}]" for i in range(size - len(tokens))]
  return tokens[:size]


def worker(args):
  """One backend: `{length: [seconds of each round's fit]}` as JSON on stdout."""
  import keras
  import numpy as np

  import zoo.keras3.hub as zoo_hub
  texts = prose(args.batch_size * args.steps)
  labels = np.arange(len(texts)) % 2
  keras.utils.set_random_seed(0)
  classifier = zoo_hub.classifier_from_preset(args.preset, vocabulary(texts), 2, seq_length=max(args.lengths))
  classifier.compile(optimizer=keras.optimizers.AdamW(1e-5),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

  def fit(length):
    classifier.preprocessor.sequence_length = length
    start = time.perf_counter()
    classifier.fit(x=texts, y=labels, batch_size=args.batch_size, epochs=1, verbose=0, shuffle=False)
    return time.perf_counter() - start

  warm = {length: fit(length) for length in args.lengths}   # compiles a step per length
  times = {length: [] for length in args.lengths}
  for round_index in range(args.rounds):
    for length in (args.lengths if round_index % 2 == 0 else args.lengths[::-1]):
      times[length].append(fit(length))
  print(json.dumps(dict(warm=warm, times=times)))


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m benchmarks.keras3_lengths",
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
  parser.add_argument("--preset", default="funnel_b4_4_4_decoder",
                      help="zoo preset of the classifier's encoder")
  parser.add_argument("--lengths", nargs=2, type=int, default=[32, 512], help="the short and the full length")
  parser.add_argument("--steps", type=int, default=12, help="fit steps per measurement")
  parser.add_argument("--batch-size", type=int, default=8)
  parser.add_argument("--rounds", type=int, default=2, help="timed rounds per backend, after a warm-up")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    worker(args)
    return
  print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; {args.preset}, batch {args.batch_size}, "
        f"{args.steps} steps per fit, {args.rounds} rounds after a warm-up")
  short, full = args.lengths
  for backend in args.backends:
    load = os.getloadavg()[0]
    command = [sys.executable, "-m", "benchmarks.keras3_lengths", "--worker", "--preset", args.preset,
               "--lengths", str(short), str(full), "--steps", str(args.steps), "--batch-size",
               str(args.batch_size), "--rounds", str(args.rounds)]
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode:
      sys.exit(f"{backend}: {result.stderr[-3000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    median = {int(length): sorted(values)[len(values) // 2] for length, values in report["times"].items()}
    warm = {int(length): value for length, value in report["warm"].items()}
    print(f"{backend:10s} {args.steps} steps: {median[short]:6.1f} s at {short} tokens, "
          f"{median[full]:6.1f} s at {full} ({median[full] / median[short]:.1f}x); first fits (compiling) "
          f"{warm[short]:.1f} s and {warm[full]:.1f} s; load {load:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
  main()
