"""Quiet TensorFlow by default in command-line tools; `-v` shows everything.

TensorFlow's C++ runtime prints notices at import (CUDA stubs, oneDNN, CPU features)
unless `TF_CPP_MIN_LOG_LEVEL` is set before the import, so the command-line tools call
`quiet_tensorflow` after parsing their arguments and before importing TensorFlow.
`error_reason` gives the line of an error that a one-line message quotes.
"""

import logging
import os


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
