"""The shard writer's cost per chunk: CPU-seconds per corpus MB at several chunk sizes, in this process.

    python -m benchmarks.chunk_cost                        # 32 MB of prose; chunks of 16, 1 and 0.25 MB
    python -m benchmarks.chunk_cost --megabytes 16 --rounds 3

A corpus of real prose (Python's docstrings in BERT's format, repeated to the size, in 8
files: `benchmarks.shard_writer.write_corpus`) is written into shards by
`tpu.data.shard_writer.write_pretraining_data` in this process, once per chunk size and
round, the sizes in alternating order (reversed every other round). The packing pipeline
is built before the first measured run (a small warm-up run), as a long run builds it
once. Each run's CPU-seconds are this process's (every thread's) user + system time over
the run; the bytes read are those the reads of the corpus files return
(`tf.io.gfile.GFile`, counted). Prints, per chunk size, the chunks, CPU-s per corpus MB in
each round and their median, the median's ratio to the first size's, and the bytes read
per chunk and per corpus byte, the 1-minute load average at the start and end of its runs
(the least and the most), and XLA_FLAGS.
"""

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile

SIZES = (16.0, 1.0, 0.25)


class _CountingFile:
  """A `tf.io.gfile.GFile` whose reads' bytes are added to `counter`."""

  def __init__(self, file, counter):
    self.file, self.counter = file, counter

  def read(self, *args):
    data = self.file.read(*args)
    self.counter[0] += len(data)
    return data

  def __getattr__(self, name):
    return getattr(self.file, name)

  def __enter__(self):
    self.file.__enter__()
    return self

  def __exit__(self, *exc):
    return self.file.__exit__(*exc)


def _cpu():
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def run(folder, megabytes, sizes, rounds, progress=print):
  """`{chunk MB: [dict(cpu=, chunks=, read=), ...]}`, one entry per round."""
  import tensorflow as tf

  from benchmarks.shard_writer import write_corpus
  from benchmarks.shard_writer import write_vocab
  from tpu.data import shard_writer
  vocab = write_vocab(folder)
  corpus_folder = os.path.join(folder, "corpus")
  corpus = write_corpus(corpus_folder, megabytes)
  warm = write_corpus(os.path.join(folder, "warm"), 0.2, files=1)
  counter = [0]
  real = tf.io.gfile.GFile

  def counting(path, mode="r"):
    file = real(path, mode)
    return _CountingFile(file, counter) if str(path).startswith(corpus_folder) and "r" in mode else file
  tf.io.gfile.GFile = counting
  try:
    shard_writer.write_pretraining_data([warm], vocab, 128, os.path.join(folder, "out"), 4, progress=False)
    results = {size: [] for size in sizes}
    for round_ in range(rounds):
      for size in sizes if round_ % 2 == 0 else tuple(reversed(sizes)):
        out = os.path.join(folder, "out")
        shutil.rmtree(out, ignore_errors=True)
        progress(f"round {round_ + 1}: {megabytes} MB in chunks of {size:g} MB")
        counter[0], started, load = 0, _cpu(), os.getloadavg()[0]
        metadata = shard_writer.write_pretraining_data([corpus], vocab, 128, out, 4, progress=False,
                                                       chunk_mb=size)
        results[size].append(dict(cpu=_cpu() - started, chunks=metadata["chunks"], read=counter[0],
                                  load=(load, os.getloadavg()[0])))
  finally:
    tf.io.gfile.GFile = real
  return results


def report(results, megabytes):
  first = next(iter(results))
  base = statistics.median(entry["cpu"] for entry in results[first]) / megabytes
  rounds = len(results[first])
  lines = [f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r} (unset: '')", "",
           f"| chunk MB | chunks | CPU-s per corpus MB, rounds 1–{rounds} | median | × {first:g} MB chunks | "
           "MB read per chunk | bytes read / corpus bytes | load (1-min, runs' start–end) |",
           "|---|---|---|---|---|---|---|---|"]
  for size, entries in results.items():
    per_mb = [entry["cpu"] / megabytes for entry in entries]
    median = statistics.median(per_mb)
    chunks, read = entries[0]["chunks"], entries[0]["read"]
    values = ", ".join(f"{value:.3f}" for value in per_mb)
    loads = [value for entry in entries for value in entry["load"]]
    lines.append(f"| {size:g} | {chunks:,} | {values} | {median:.3f} | {median / base:.2f}× | "
                 f"{read / chunks / 1e6:.2f} | {read / (megabytes * 1e6):.2f} | "
                 f"{min(loads):.1f}–{max(loads):.1f} |")
  return "\n".join(lines) + "\n"


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--megabytes", type=float, default=32, help="corpus MB (default 32)")
  parser.add_argument("--sizes", type=float, nargs="+", default=SIZES, metavar="MB",
                      help="chunk sizes; ratios are to the first (default 16 1 0.25)")
  parser.add_argument("--rounds", type=int, default=2, help="runs per size, in alternating order (default 2)")
  parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary folder)")
  args = parser.parse_args(argv)
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")   # as python -m tpu.pretraining_data does
  folder = args.keep or tempfile.mkdtemp(prefix="chunk-cost-")
  os.makedirs(folder, exist_ok=True)
  try:
    results = run(folder, args.megabytes, args.sizes, args.rounds,
                  progress=lambda message: print(message, file=sys.stderr, flush=True))
  finally:
    if not args.keep:
      shutil.rmtree(folder, ignore_errors=True)
  print(report(results, args.megabytes))
  return 0


if __name__ == "__main__":
  sys.exit(main())
