"""`python -m tests.tpu.slow_chief SECONDS ARGS...`: `python -m tpu.train ARGS` on a cluster worker
whose chief (task 0 of TF_CONFIG) takes SECONDS more over its first checkpoint save, as a large
model's write with its optimizer slots to a bucket does. Other workers run the job unchanged."""

import json
import os
import sys
import time


def main(argv):
  seconds, args = float(argv[0]), argv[1:]
  import tensorflow as tf  # no op runs before the job makes its strategy
  if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
    save = tf.train.CheckpointManager.save
    slowed = []

    def slow_save(self, *args, **kwargs):
      path = save(self, *args, **kwargs)
      if not slowed:
        slowed.append(path)
        print(f"slow_chief: the save of {path} takes {seconds:g} s more", file=sys.stderr, flush=True)
        time.sleep(seconds)
      return path

    tf.train.CheckpointManager.save = slow_save
  from tpu.train import main as train_main
  return train_main(args)


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
