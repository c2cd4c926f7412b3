"""The shard writer at growing corpus sizes, chunk counts and shard counts: one process vs Beam.

    python -m benchmarks.shard_writer                      # the default grid; prints the table
    python -m benchmarks.shard_writer --out BENCHMARKS.md  # also writes it as the section of BENCHMARKS.md

For each row of the grid (corpus MB, chunk MB, shards) a corpus of real prose (Python's
docstrings in BERT's format, repeated to the size, in 8 files) is written, and
`python -m tpu.pretraining_data` runs on it twice, in alternating order: in one process,
and as a Beam pipeline on the DirectRunner's worker processes (`--direct_num_workers 2
--direct_running_mode multi_processing`). Each run's processes are sampled every 0.1 s
(resident memory from /proc, the whole process tree); the table gives each engine's
largest process (for Beam: its largest worker, and its launcher) and the CPU seconds of
the run with all its processes, as corpus MB per CPU-second. The ratios are Beam over one
process. Both runs' shards are compared byte for byte.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION_TITLE = "## 10. Pre-training data: the shard writer in one process and on Beam"
# (corpus MB, chunk MB, shards)
GRID = ((10, 1.0, 4), (50, 1.0, 64), (100, 1.0, 256), (100, 16.0, 1024), (20, 0.01, 16), (500, 16.0, 64),
        (200, 64.0, 16))
FILES = 8
SEQ_LENGTH = 128
BEAM_WORKERS = 2


def write_corpus(folder, megabytes, files=FILES):
  """`files` files of docstrings in BERT's format (a blank line between documents), `megabytes` MB in all."""
  from tpu.data import pydocs
  text = "\n\n".join(document for _, document in pydocs.documents("train")).encode("utf-8") + b"\n\n"
  per_file = int(megabytes * 1e6 / files)
  os.makedirs(folder, exist_ok=True)
  for index in range(files):
    with open(os.path.join(folder, f"part-{index:03d}.txt"), "wb") as file:
      written = 0
      while written < per_file:
        piece = text[:per_file - written]
        file.write(piece)
        written += len(piece)
  return os.path.join(folder, "*.txt")


def write_vocab(folder, size=8000):
  from tpu.data import pydocs
  from zoo.text import build_vocab
  from zoo.text import write_vocab as write
  sample = os.path.join(folder, "vocab-sample.txt")
  with open(sample, "w", encoding="utf-8") as file:
    file.write("\n".join(document for _, document in pydocs.documents("train")[:2000]))
  path = os.path.join(folder, "vocab.txt")
  write(build_vocab([sample], size), path)
  return path


def _tree(root):
  """The pids of `root` and its descendants (from /proc)."""
  children = {}
  for name in os.listdir("/proc"):
    if name.isdigit():
      try:
        with open(f"/proc/{name}/stat") as stat:
          parent = int(stat.read().rsplit(")", 1)[1].split()[1])
      except (OSError, ValueError, IndexError):
        continue
      children.setdefault(parent, []).append(int(name))
  pids, stack = [], [root]
  while stack:
    pid = stack.pop()
    pids.append(pid)
    stack.extend(children.get(pid, ()))
  return pids


def _resident(pid):
  try:
    with open(f"/proc/{pid}/status") as status:
      for line in status:
        if line.startswith("VmRSS:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return 0


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid):
  """User + system CPU seconds of a live process (from /proc), None once it is gone."""
  try:
    with open(f"/proc/{pid}/stat") as stat:
      fields = stat.read().rsplit(")", 1)[1].split()
  except OSError:
    return None
  return (int(fields[11]) + int(fields[12])) / _TICKS


def run_measured(command, env):
  """Runs `command`; returns `(wall s, CPU s of it and every process it waited for, {pid: peak bytes},
  root pid, {pid: CPU s last sampled})`."""
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  peaks, cpus, done = {}, {}, threading.Event()

  def sample():
    while not done.is_set():
      for pid in _tree(process.pid):
        peaks[pid] = max(peaks.get(pid, 0), _resident(pid))
        seconds = _cpu_seconds(pid)
        if seconds is not None:
          cpus[pid] = seconds
      done.wait(0.1)
  sampler = threading.Thread(target=sample, daemon=True)
  sampler.start()
  _, stderr = process.communicate()
  done.set()
  sampler.join()
  wall = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  if process.returncode:
    raise RuntimeError(f"{' '.join(command)} failed:\n{stderr.decode(errors='replace')[-3000:]}")
  cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  return wall, cpu, peaks, process.pid, cpus


def run_engine(engine, corpus, vocab, out, chunk_mb, shards):
  command = [sys.executable, "-m", "tpu.pretraining_data", "--input", corpus, "--vocab", vocab,
             "--seq-length", str(SEQ_LENGTH), "--out", out, "--shards", str(shards), "--chunk-mb",
             str(chunk_mb), "--no-progress"]
  if engine == "beam":
    command += ["--runner", "DirectRunner", f"--direct_num_workers={BEAM_WORKERS}",
                "--direct_running_mode=multi_processing"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
             PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
  load_before = os.getloadavg()[0]
  wall, cpu, peaks, root, cpus = run_measured(command, env)
  launcher = peaks.get(root, 0)
  workers = [peak for pid, peak in peaks.items() if pid != root]
  # The launcher's share (last sampled, at most 0.1 s early): the rest is its workers'.
  launcher_cpu = min(cpus.get(root, 0.0), cpu)
  return dict(wall=wall, cpu=cpu, launcher_cpu=launcher_cpu, launcher_bytes=launcher,
              worker_bytes=max(workers, default=0), largest_bytes=max(peaks.values()),
              load=[load_before, os.getloadavg()[0]])


def _same_output(first, second):
  names = sorted(os.listdir(first))
  return names == sorted(os.listdir(second)) and all(
      open(os.path.join(first, name), "rb").read() == open(os.path.join(second, name), "rb").read()
      for name in names)


def run(grid, folder, progress=print, repeat=1):
  """One row per (corpus MB, chunk MB, shards) and repeat: both engines' measurements, in alternating
  order (a row's repeats start with the other engine each time)."""
  vocab = write_vocab(folder)
  rows = []
  for index, (megabytes, chunk_mb, shards) in ((index, row) for _ in range(repeat)
                                                for index, row in enumerate(grid)):
    corpus = write_corpus(os.path.join(folder, f"corpus-{megabytes}"), megabytes)
    results = {}
    order = ("single", "beam") if (index + len(rows) // len(grid)) % 2 == 0 else ("beam", "single")
    for engine in order:
      progress(f"{engine}: {megabytes} MB, chunks of {chunk_mb} MB, {shards} shards")
      out = os.path.join(folder, f"out-{engine}")
      shutil.rmtree(out, ignore_errors=True)
      results[engine] = run_engine(engine, corpus, vocab, out, chunk_mb, shards)
    with open(os.path.join(folder, "out-single", "metadata.json")) as file:
      metadata = json.load(file)
    same = _same_output(os.path.join(folder, "out-single"), os.path.join(folder, "out-beam"))
    rows.append(dict(repeat=len(rows) // len(grid), megabytes=megabytes, chunk_mb=chunk_mb, shards=shards,
                     chunks=metadata["chunks"],
                     examples=metadata["examples"], same_bytes=same, **results))
    shutil.rmtree(os.path.join(folder, f"corpus-{megabytes}"), ignore_errors=True)
  return rows


def _load(run):
  return " → ".join(f"{value:.1f}" for value in run["load"])


def report(rows):
  gb = 1e9
  lines = [SECTION_TITLE, "",
           "Command: `python -m benchmarks.shard_writer --out BENCHMARKS.md`. Corpus: Python's docstrings "
           f"in BERT's format, repeated to the size, in {FILES} files; T={SEQ_LENGTH}, an 8,000-piece "
           "vocabulary. "
           f"Each row runs `python -m tpu.pretraining_data` in one process and on Beam's DirectRunner "
           f"({BEAM_WORKERS} worker processes), in alternating order; memory is the largest resident size "
           "sampled every 0.1 s (Beam: its largest worker, and its launcher), CPU the run's with every "
           f"process it started. The machine has {os.cpu_count()} cores; XLA_FLAGS "
           f"{json.dumps(os.environ.get('XLA_FLAGS')) if os.environ.get('XLA_FLAGS') else 'unset'}; the load "
           "column is the 1-minute load average when each engine's run began and ended (one process; Beam).",
           "",
           "| corpus MB | chunks | shards | examples | one process: peak GB, MB/CPU-s | Beam: worker peak "
           "GB, launcher GB, MB/CPU-s | Beam / one process: memory, MB per CPU-s | same bytes | load |",
           "|---|---|---|---|---|---|---|---|---|"]
  for row in rows:
    single, beam = row["single"], row["beam"]
    single_rate, beam_rate = row["megabytes"] / single["cpu"], row["megabytes"] / beam["cpu"]
    lines.append(
        f"| {row['megabytes']} | {row['chunks']:,} | {row['shards']:,} | {row['examples']:,} | "
        f"{single['largest_bytes'] / gb:.2f}, {single_rate:.2f} | {beam['worker_bytes'] / gb:.2f}, "
        f"{beam['launcher_bytes'] / gb:.2f}, {beam_rate:.2f} | "
        f"{beam['worker_bytes'] / single['largest_bytes']:.2f}×, {beam_rate / single_rate:.2f}× | "
        f"{'yes' if row['same_bytes'] else 'NO'} | {_load(single)}; {_load(beam)} |")
  lines += ["", *marginal_lines(rows)]
  return "\n".join(lines) + "\n"


def marginal_lines(rows):
  """Throughput once started: for rows of one chunk size, the corpus MB added per CPU-second added from
  the smallest corpus to the largest, per engine (start-up costs, paid once a run, cancel out), and the
  Beam launcher's and workers' shares of Beam's CPU."""
  lines = []
  by_chunk = {}
  for row in rows:   # per repeat of the grid
    by_chunk.setdefault((row.get("repeat", 0), row["chunk_mb"]), []).append(row)
  repeated = any(row.get("repeat", 0) for row in rows)
  for (repeat, chunk_mb), group in sorted(by_chunk.items()):
    group = sorted(group, key=lambda row: row["megabytes"])
    small, large = group[0], group[-1]
    if large["megabytes"] == small["megabytes"]:
      continue
    added = large["megabytes"] - small["megabytes"]
    rates = {engine: added / (large[engine]["cpu"] - small[engine]["cpu"]) for engine in ("single", "beam")}
    run_name = f"run {repeat + 1}: " if repeated else ""
    lines.append(f"- {run_name}{chunk_mb:g} MB chunks, {small['megabytes']} → {large['megabytes']} MB: one "
                 f"process {rates['single']:.2f} MB per added CPU-s, Beam {rates['beam']:.2f} "
                 f"(**{rates['beam'] / rates['single']:.2f}×**); Beam's launcher "
                 f"{small['beam']['launcher_cpu']:.1f} → {large['beam']['launcher_cpu']:.1f} CPU-s, its "
                 "workers "
                 f"{small['beam']['cpu'] - small['beam']['launcher_cpu']:.1f} → "
                 f"{large['beam']['cpu'] - large['beam']['launcher_cpu']:.1f}.")
  return lines


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--grid", default=json.dumps(GRID), help="JSON list of [corpus MB, chunk MB, shards]")
  parser.add_argument("--repeat", type=int, default=1, metavar="N",
                      help="run the grid N times, each row's engines in the other order each time")
  parser.add_argument("--out", help="write the section into this Markdown file (BENCHMARKS.md)")
  parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary folder)")
  args = parser.parse_args(argv)
  grid = [tuple(row) for row in json.loads(args.grid)]
  folder = args.keep or tempfile.mkdtemp(prefix="shard-writer-benchmark-")
  os.makedirs(folder, exist_ok=True)
  try:
    rows = run(grid, folder, progress=lambda message: print(message, file=sys.stderr, flush=True),
               repeat=args.repeat)
  finally:
    if not args.keep:
      shutil.rmtree(folder, ignore_errors=True)
  section = report(rows)
  from benchmarks.keras3 import publish
  publish(section, args.out, SECTION_TITLE)
  return 0


if __name__ == "__main__":
  sys.exit(main())
