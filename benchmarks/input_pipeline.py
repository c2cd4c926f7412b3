"""Pre-training input: the TFRecord pipeline's speed, and text preprocessing's speed and memory.

  python -m benchmarks.input_pipeline            # T=512, corpora of 20 MB and 200 MB (about 10 minutes)
  python -m benchmarks.input_pipeline --quick    # corpora of 2 MB and 20 MB

Measurements, each in a fresh process pinned to one core (`os.sched_setaffinity`), but
the Beam pipeline on two workers, which gets two:

- **Pipeline**: examples per second of the training job's `tfrecord:` input pipeline
  (interleaved shards, shuffle, parse, dynamic MLM masking, batches of 256) at T=512,
  read for a fixed number of batches after a warm-up. Target: >= 5,000 examples/s,
  enough to feed a TPU host.
- **Preprocessing**: MB of text per second of `python -m tpu.pretraining_data` on a
  corpus of Python's documentation (`tpu.pydocs`), repeated with the documents
  reshuffled up to the size asked for.
- **Engines**: the same preprocessing as an Apache Beam pipeline on the DirectRunner
  with one and with two worker processes (`--direct_running_mode multi_processing`),
  on the large corpus, as MB/s and as ratios to the single process; the three outputs
  are compared byte for byte.
- **Memory**: the peak resident size of that preprocessing for the small and the
  large corpus, of the single process and of the largest process of the two-worker
  pipeline (a worker or the launcher; `getrusage` of the children); flat means within
  10% of each other although the corpus is 10x larger.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_EXAMPLES_PER_SECOND = 5000
FLAT_MEMORY = 0.10


def write_corpus(path, megabytes, seed=0):
  """A corpus of `megabytes` MB in BERT's format: Python's documentation, documents reshuffled per pass."""
  from tpu.data import pydocs
  documents = [text for _, text in pydocs.documents("train")]
  rng = random.Random(seed)
  size, target = 0, int(megabytes * 1e6)
  with open(path, "w", encoding="utf-8") as file:
    while size < target:
      rng.shuffle(documents)
      for document in documents:
        block = document + "\n\n"
        file.write(block)
        size += len(block.encode("utf-8"))
        if size >= target:
          break
  return size


def _one_core_env():
  return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1",
              TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1")


def _same_output(one, two):
  names = sorted(os.listdir(one))
  if names != sorted(os.listdir(two)):
    return False
  for name in names:
    with open(os.path.join(one, name), "rb") as a, open(os.path.join(two, name), "rb") as b:
      if a.read() != b.read():
        return False
  return True


def _pinned(command, cores=1):
  """Runs `command` on `cores` cores; returns (stdout, seconds, peak RSS of its largest process in MB)."""
  wrapper = ("import os, resource, subprocess, sys, time\n"
             f"os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:{cores}]))\n"
             "started = time.monotonic()\n"
             "result = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "elapsed = time.monotonic() - started\n"
             "sys.stderr.write(result.stderr)\n"
             "if result.returncode: sys.exit(result.returncode)\n"
             "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
             "print(result.stdout.strip().splitlines()[-1] if result.stdout.strip() else '')\n"
             "print(elapsed)\nprint(peak)\n")
  result = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True, text=True,
                          env=_one_core_env(), cwd=ROOT)
  if result.returncode:
    raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
  output, seconds, peak = result.stdout.strip().splitlines()[-3:]
  return output, float(seconds), float(peak)


PIPELINE_PROBE = """
import json, sys, time
import tensorflow as tf
from tpu import data
from tpu.data import pipeline
from tpu.config import TrainConfig
from tpu.tasks import get_task
from zoo.text import TextEncoder
folder, seq_length, batch, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
source = data.load(f"tfrecord:{folder}/*.tfrecord")
config = TrainConfig(model="bert_base", task="mlm", data="x", model_dir="x", seq_length=seq_length).validate()
encoder = TextEncoder(folder + "/vocab.txt", seq_length=seq_length)
dataset = pipeline.train_dataset(source, get_task(config), encoder, batch, seed=0)
options = tf.data.Options()
options.threading.private_threadpool_size = 1
iterator = iter(dataset.with_options(options))
for _ in range(5):
  next(iterator)
started = time.monotonic()
for _ in range(batches):
  next(iterator)
elapsed = time.monotonic() - started
print(json.dumps(dict(examples_per_second=batches * batch / elapsed, seconds=elapsed)))
"""


def measure(small_mb, large_mb, seq_length=512, batch=256, batches=40, folder=None, beam=True):
  """The three measurements (with `beam=False`, the single process only); returns a dict of results."""
  folder = folder or tempfile.mkdtemp(prefix="zoo-input-")
  results = dict(seq_length=seq_length, batch=batch)
  vocab = os.path.join(folder, "vocab.txt")
  corpora = {}
  for name, megabytes in (("small", small_mb), ("large", large_mb)):
    path = os.path.join(folder, f"corpus-{name}.txt")
    corpora[name] = (path, write_corpus(path, megabytes))
  if not os.path.exists(vocab):
    from zoo.text import build_vocab
    from zoo.text import write_vocab
    write_vocab(build_vocab([corpora["small"][0]], 8000), vocab)
  engines = dict(single=([], 1),
                 beam1=(["--runner", "DirectRunner", "--direct_num_workers", "1", "--direct_running_mode",
                         "multi_processing"], 1),
                 beam2=(["--runner", "DirectRunner", "--direct_num_workers", "2", "--direct_running_mode",
                         "multi_processing"], 2))
  runs = [("single", "small"), ("single", "large")]
  if beam:
    runs += [("beam2", "small"), ("beam2", "large"), ("beam1", "large")]
  for engine, name in runs:
    path, size = corpora[name]
    out = os.path.join(folder, f"records-{name}-{engine}")
    flags, cores = engines[engine]
    output, seconds, peak = _pinned([sys.executable, "-m", "tpu.pretraining_data", "--input", path,
                                     "--vocab", vocab, "--seq-length", str(seq_length), "--out", out,
                                     "--shards", "4", "--no-progress", "--overwrite", *flags], cores)
    summary = json.loads(output)
    key = f"preprocess_{name}" if engine == "single" else f"{engine}_{name}"
    results[key] = dict(megabytes=size / 1e6, seconds=seconds, peak_mb=peak,
                        mb_per_second=size / 1e6 / seconds, tokens=summary["tokens"],
                        examples=summary["examples"], cores=cores)
  small, large = results["preprocess_small"], results["preprocess_large"]
  results["memory_ratio"] = large["peak_mb"] / small["peak_mb"]
  if beam:
    results["beam2_memory_ratio"] = results["beam2_large"]["peak_mb"] / results["beam2_small"]["peak_mb"]
    reference = os.path.join(folder, "records-large-single")
    results["identical"] = all(_same_output(reference, os.path.join(folder, f"records-large-{engine}"))
                               for engine in ("beam1", "beam2"))
  output, _, _ = _pinned([sys.executable, "-c", PIPELINE_PROBE, os.path.join(folder, "records-large-single"),
                          str(seq_length), str(batch), str(batches)])
  results["pipeline"] = json.loads(output)
  return results


def report(results):
  small, large = results["preprocess_small"], results["preprocess_large"]
  rate = results["pipeline"]["examples_per_second"]
  lines = [
      "| measurement | value | target |",
      "|---|---|---|",
      f"| TFRecord pipeline, dynamic masking, T={results['seq_length']}, one core | {rate:,.0f} examples/s | "
      f">= {TARGET_EXAMPLES_PER_SECOND:,} ({'met' if rate >= TARGET_EXAMPLES_PER_SECOND else 'MISSED'}) |",
      f"| preprocessing rate, one core | {large['mb_per_second']:.2f} MB/s ({large['megabytes']:.0f} MB in "
      f"{large['seconds']:.0f} s) | |",
      f"| preprocessing peak memory, {small['megabytes']:.0f} MB corpus | {small['peak_mb']:.0f} MB | |",
      f"| preprocessing peak memory, {large['megabytes']:.0f} MB corpus | {large['peak_mb']:.0f} MB "
      f"({results['memory_ratio']:.3f}x) | within {FLAT_MEMORY:.0%} "
      f"({'met' if abs(results['memory_ratio'] - 1) <= FLAT_MEMORY else 'MISSED'}) |",
  ]
  if "beam2_large" not in results:
    return "\n".join(lines)
  rows = [("one process, one core", large)] + [
      (f"Beam DirectRunner, {n} worker{'s' * (n > 1)}, {n} core{'s' * (n > 1)}", results[f"beam{n}_large"])
      for n in (1, 2)]
  lines += ["", f"Engines on the {large['megabytes']:.0f} MB corpus (byte-identical outputs: "
            f"{'yes' if results['identical'] else 'NO'}):", "",
            "| engine | MB/s | seconds | vs one process | peak memory of its largest process |",
            "|---|---|---|---|---|"]
  for label, run in rows:
    lines.append(f"| {label} | {run['mb_per_second']:.2f} | {run['seconds']:.0f} | "
                 f"{run['mb_per_second'] / large['mb_per_second']:.2f}x | {run['peak_mb']:.0f} MB |")
  small2, large2 = results["beam2_small"], results["beam2_large"]
  lines += ["", "| Beam, 2 workers: peak memory per process | value | target |", "|---|---|---|",
            f"| {small2['megabytes']:.0f} MB corpus | {small2['peak_mb']:.0f} MB | |",
            f"| {large2['megabytes']:.0f} MB corpus | {large2['peak_mb']:.0f} MB "
            f"({results['beam2_memory_ratio']:.3f}x) | within {FLAT_MEMORY:.0%} "
            f"({'met' if abs(results['beam2_memory_ratio'] - 1) <= FLAT_MEMORY else 'MISSED'}) |"]
  return "\n".join(lines)


def main(argv=None):
  p = argparse.ArgumentParser(prog="python -m benchmarks.input_pipeline",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--quick", action="store_true", help="corpora of 2 and 20 MB instead of 20 and 200")
  p.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
  args = p.parse_args(argv)
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow()
  started = time.monotonic()
  small, large = (2, 20) if args.quick else (20, 200)
  results = measure(small, large)
  print(report(results))
  print(f"\n({time.monotonic() - started:.0f} s; peak memory: getrusage of each process)", file=sys.stderr)
  if args.json:
    from zoo.atomic_files import write_atomically
    write_atomically(args.json, json.dumps(results, indent=2) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
