"""The command `python -m tpu.pydocs --out DIR`: Python's documentation as a corpus (`tpu.data.pydocs`)."""

import sys

from tpu.data.pydocs import main

if __name__ == "__main__":
  sys.exit(main())
