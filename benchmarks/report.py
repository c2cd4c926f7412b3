"""What the benchmark reports share: the machine's description, Markdown tables, progress lines and the
environment of the commands they start.

`benchmarks.run` (sections 1 to 6), `benchmarks.serving` (section 7) and `benchmarks.real_lengths`
(section 12) import this module and not each other's helpers.
"""

import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(message):
  """A progress line on stderr, with the time."""
  print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def project_env():
  """The environment for a command of the project's (`python -m tpu.train ...`): the repository importable,
  TensorFlow's log quiet unless set."""
  return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
              TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))


def machine_description():
  """The CPU, cores, memory and the TensorFlow and tf-keras versions, for a report's header."""
  import tensorflow as tf
  import tf_keras as keras

  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as cpuinfo:
      cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
  except (OSError, StopIteration):
    pass
  memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
  return (f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB; Python {platform.python_version()}, "
          f"TensorFlow {tf.__version__}, tf-keras {keras.__version__}; graph mode (no XLA)")


def table(header, rows):
  """A Markdown table.

  Example:
    >>> print(table(["model", "step (s)"], [["bert_base", "0.5"]]))
    | model | step (s) |
    |---|---|
    | bert_base | 0.5 |
  """
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
  return "\n".join(lines)


def write_section(path, section, heading):
  """Writes `section` (Markdown starting with the line `heading`) into the file `path` at once: in place of
  the section of that heading, or at the end."""
  from zoo.atomic_files import write_atomically
  text = open(path, encoding="utf-8").read() if os.path.exists(path) else "# Benchmarks\n"
  start = text.find(heading)
  if start < 0:
    text = text.rstrip("\n") + "\n\n" + section
  else:
    end = text.find("\n## ", start + len(heading))
    text = text[:start] + section + ("" if end < 0 else text[end:])
  write_atomically(path, text)
