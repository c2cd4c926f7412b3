"""`files_run(call)`: the project's `zoo` files whose code runs during `call()`, for the tests that hold an
encoder's forward pass to a few files (what a reader of it opens), in either edition."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.path.join(ROOT, "zoo")


def files_run(call):
  """The sorted paths, relative to the repository, of the `zoo` files a function was called in."""
  files = set()

  def profile(frame, event, argument):
    path = os.path.abspath(frame.f_code.co_filename)
    if event == "call" and path.startswith(ZOO + os.sep):
      files.add(os.path.relpath(path, ROOT))

  sys.setprofile(profile)
  try:
    call()
  finally:
    sys.setprofile(None)
  return sorted(files)
