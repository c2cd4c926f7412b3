"""What a run reports: a progress display on stderr, TensorBoard summaries and `history.jsonl`."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING
from typing import Any

import tensorflow as tf

if TYPE_CHECKING:
  from zoo.model_dir import ModelDir


class Progress:
  """Progress on stderr: a tqdm bar on a terminal, else a log line every `LOG_SECONDS` (for log files)."""

  LOG_SECONDS = 10.0

  def __init__(self, total: int, initial: int) -> None:
    self.total, self.step, self.initial = total, initial, initial
    self.bar = None
    if sys.stderr.isatty():
      from tqdm import tqdm
      self.bar = tqdm(total=total, initial=initial, unit="step", file=sys.stderr, dynamic_ncols=True)
    self.started = self.last_log = time.monotonic()

  def update(self, steps: int, values: dict[str, float]) -> None:
    self.step += steps
    shown = " ".join(f"{name}={value:.4g}" for name, value in values.items())
    if self.bar is not None:
      self.bar.set_postfix_str(shown, refresh=False)
      self.bar.update(steps)
      return
    now = time.monotonic()
    if now - self.last_log >= self.LOG_SECONDS or self.step == self.total:
      rate = (self.step - self.initial) / max(now - self.started, 1e-9)
      remaining = (self.total - self.step) / rate if rate else float("inf")
      print(f"step {self.step}/{self.total} ({100 * self.step // self.total}%), {rate:.2f} steps/s, "
            f"{remaining:.0f} s left: {shown}", file=sys.stderr, flush=True)
      self.last_log = now

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()


class RunLog:
  """Training and evaluation values to TensorBoard (`train/`, `eval/`) and to `history.jsonl`.

  With `write=False` (a worker other than the chief) it writes nothing.
  """

  def __init__(self, model_dir: ModelDir, write: bool = True) -> None:
    self.model_dir = model_dir
    self.write = write
    self.writers = {name: tf.summary.create_file_writer(model_dir.summaries_dir(name))
                    for name in ("train", "eval")} if write else {}

  def _write(self, name, step, values):
    with self.writers[name].as_default(step=step):
      for key, value in values.items():
        tf.summary.scalar(key, value)

  def training(self, step: int, learning_rate: float, values: dict[str, float]) -> None:
    if self.write:
      self._write("train", step, dict(values, learning_rate=learning_rate))
      self.model_dir.append_history(dict(step=step, learning_rate=learning_rate, **values))

  def evaluation(self, step: int, results: dict[str, Any]) -> None:
    if self.write:
      self._write("eval", step, results)
      self.model_dir.append_history(dict(step=step, eval=results))

  def flush(self) -> None:
    for writer in self.writers.values():
      writer.flush()
