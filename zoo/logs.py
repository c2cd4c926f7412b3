"""Quiet TensorFlow by default in command-line tools; `-v` shows everything.

TensorFlow's C++ runtime prints notices at import (CUDA stubs, oneDNN, CPU features)
unless `TF_CPP_MIN_LOG_LEVEL` is set before the import, so the command-line tools call
`quiet_tensorflow` after parsing their arguments and before importing TensorFlow.
`error_reason` gives the line of an error that a one-line message quotes, `command_name` the
name a command's usage gives it (`zoo-train` or `python -m tpu.train`, as it was run).
"""

import logging
import os
import sys


def quiet_tensorflow(verbose=False):
  """Hides TensorFlow's C++ and Python log lines below errors (all of them when `verbose`)."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0" if verbose else "3"
  if not verbose:
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
  for name in ("absl", "tensorflow"):
    logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.ERROR)


def error_reason(error):
  """The first line of `error`'s message (TensorFlow's run to many), or its type's name without one."""
  text = str(error).strip()
  return text.splitlines()[0] if text else type(error).__name__


def command_name(module, program=None):
  """The name a command's usage and help give it: what the user typed to run `module`.

  The console scripts of `pyproject.toml` (`zoo-train`, `zoo-convert`, ...) run with a path ending
  in their own name as `sys.argv[0]` (`program`); `python -m tpu.train` runs with the module's
  file there, and a notebook or a test calling `main` with its own runner's.

  Example:
    >>> command_name("tpu.train", "/venv/bin/zoo-train"), command_name("tpu.train", "/zoo/tpu/train.py")
    ('zoo-train', 'python -m tpu.train')
  """
  if program is None:
    program = sys.argv[0] if sys.argv else ""
  name = os.path.basename(program)
  return name if name.startswith("zoo-") else f"python -m {module}"


def error_prefix(module, program=None):
  """What a command's error lines start with: the console script's name (`zoo-train: error: ...`), or
  the module's (`tpu.train: error: ...`).

  >>> error_prefix("tpu.train", "/venv/bin/zoo-train"), error_prefix("tpu.train", "/zoo/tpu/train.py")
  ('zoo-train', 'tpu.train')
  """
  name = command_name(module, program)
  return name if name.startswith("zoo-") else module
