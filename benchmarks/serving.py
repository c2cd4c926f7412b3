"""Serving speed of exported classifiers: latency, throughput and the share spent tokenizing.

    python -m benchmarks.serving                  # the demo model and a bert_base-size one; prints the report
    python -m benchmarks.serving --out BENCHMARKS.md   # also puts it into that file as section 7
    python -m benchmarks.serving --quick          # fewer calls and rounds

Each model is made by the public command line, `python -m tpu.train ... --steps 1`, which
trains one step and exports a SavedModel to `MODEL_DIR/export/1` (weights after one step
serve as fast as trained ones). The SavedModel is loaded with `tf.saved_model.load`
after `import tensorflow_text`, as a server would, and timed through its signatures:

- `serving_default`: raw text in, tokenized in the graph, classified;
- `from_token_ids`: the same model on already tokenized inputs;
- tokenizing alone: `zoo.text.TextEncoder.encode` with the export's vocabulary and
  length in a `tf.function`, the code the export runs before `from_token_ids`.

The three run interleaved (`benchmarks.measure.interleaved_medians`), one call each per
round, so the tokenizing share is taken within one run: tokenizing alone over
`serving_default`, and `1 - from_token_ids / serving_default` as a check. Batch 1 gives
the latency (median and 99th percentile of the rounds), batch 32 the throughput
(examples per second at the median). The texts are demo sentences joined to at least
the model's length in words, so every example fills the sequence and the tokenizer
does the most work it can per example.
"""

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.report import log
from benchmarks.report import machine_description
from benchmarks.report import project_env
from benchmarks.report import table
from zoo.atomic_files import write_atomically
from zoo.model_dir import ModelDir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "## 7. Serving an exported classifier"
TOKENIZE_SHARE_TARGET = 0.10   # of serving_default's time at batch 32, bert_base size


@dataclasses.dataclass(frozen=True)
class Model:
  """One classifier to export: a label and the `python -m tpu.train` flags that make it."""
  label: str
  flags: tuple
  target: bool = False   # whether the tokenizing share target applies


DEMO = Model("demo (tpu/configs/demo.json)", ("--config", "tpu/configs/demo.json"))
BERT_BASE = Model("bert_base, T=128", (
    "--model", "bert_base", "--task", "classify", "--data", "demo", "--seq-length", "128",
    "--batch-size", "8", "--eval-batch-size", "100", "--vocab-size", "400"), target=True)


@dataclasses.dataclass
class Settings:
  models: tuple = (DEMO, BERT_BASE)
  latency_calls: int = 300     # interleaved rounds at batch 1
  batch_size: int = 32
  throughput_rounds: int = 15  # interleaved rounds at batch_size
  warmup: int = 3

  @classmethod
  def full(cls):
    return cls()

  @classmethod
  def quick(cls):
    return cls(latency_calls=60, throughput_rounds=5)


def export_model(model, model_dir):
  """Trains `model` for one step with the training job's CLI; returns the version dir it exported."""
  command = [sys.executable, "-m", "tpu.train", *model.flags, "--model-dir", model_dir, "--steps", "1",
             "--warmup-steps", "0"]
  log(f"exporting {model.label}: {' '.join(command[1:])}")
  result = subprocess.run(command, cwd=ROOT, env=project_env(), capture_output=True, text=True, check=False)
  if result.returncode:
    raise RuntimeError(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
  export_dir = ModelDir(model_dir).latest_export()
  if export_dir is None:
    raise RuntimeError(f"{' '.join(command)} exported nothing to {ModelDir(model_dir).export_dir}")
  return export_dir


def long_texts(count, min_words, seed=0):
  """`count` texts of at least `min_words` words: demo validation sentences joined with "and"."""
  from tpu.data import demo as demo_data

  sentences = demo_data.examples("validation", seed)[0]
  texts, index = [], 0
  for _ in range(count):
    words = []
    while len(words) < min_words:
      words += (["and"] if words else []) + sentences[index % len(sentences)].split()
      index += 1
    texts.append(" ".join(words))
  return texts


def _percentile(values, q):
  return float(np.percentile(np.asarray(values), q))


def measure(model_dir, settings):
  """Times the latest export of a model directory's classifier; returns the report's fields.

  Fields: seconds, examples per second and tokenizing shares per batch size.
  """
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

  from benchmarks import measure as timing
  from zoo.text import TextEncoder

  model_dir = ModelDir(model_dir)
  export_dir = model_dir.latest_export()
  config = model_dir.read_config()
  seq_length = config["seq_length"]
  loaded = tf.saved_model.load(export_dir)
  serve, from_ids = loaded.signatures["serving_default"], loaded.signatures["from_token_ids"]
  encoder = TextEncoder(model_dir.vocab_path, seq_length=seq_length,
                        lower_case=config.get("lower_case", True))
  tokenize = tf.function(lambda text: encoder.encode(text), autograph=False)

  def functions(batch):
    texts = tf.constant(long_texts(batch, seq_length))
    features = {name: tensor for name, tensor in tokenize(texts).items() if name in (
        "input_word_ids", "input_mask", "input_type_ids")}
    # The export and the benchmark's tokenizer agree, and so do both signatures.
    served, direct = serve(text=texts), from_ids(**features)
    np.testing.assert_allclose(served["logits"].numpy(), direct["logits"].numpy(), rtol=1e-4, atol=1e-5)
    tokens = float(tf.reduce_mean(tf.reduce_sum(features["input_mask"], axis=1)))
    return tokens, {
        "serving_default": lambda: serve(text=texts)["logits"].numpy(),
        "from_token_ids": lambda: from_ids(**features)["logits"].numpy(),
        "tokenize": lambda: tokenize(texts)["input_word_ids"].numpy(),
    }

  result = dict(seq_length=seq_length, batch_size=settings.batch_size, export_dir=export_dir,
                parameters=sum(variable.shape.num_elements() for variable in loaded.model_variables))
  for key, batch, rounds in (("batch1", 1, settings.latency_calls),
                             ("batched", settings.batch_size, settings.throughput_rounds)):
    log(f"timing batch {batch}: {rounds} interleaved rounds")
    tokens, calls = functions(batch)
    timed = timing.interleaved_medians(calls, rounds, warmup=settings.warmup)
    serving_median, serving_times = timed["serving_default"]
    result[key] = dict(
        batch=batch, rounds=rounds, tokens_per_example=tokens,
        median=serving_median, p99=_percentile(serving_times, 99),
        from_token_ids=timed["from_token_ids"][0], tokenize=timed["tokenize"][0],
        throughput=batch / serving_median,
        tokenize_share=timed["tokenize"][0] / serving_median,
        difference_share=1.0 - timed["from_token_ids"][0] / serving_median)
  return result


def run(settings, work_dir=None):
  """Exports and times every model of `settings`; returns {label: measure()'s fields}."""
  with tempfile.TemporaryDirectory(prefix="zoo-serving-") as scratch:
    results = {}
    for index, model in enumerate(settings.models):
      model_dir = os.path.join(work_dir or scratch, f"model_{index}")
      export_model(model, model_dir)
      results[model.label] = dict(measure(model_dir, settings), target=model.target)
    return results


def _status(share):
  met = share <= TOKENIZE_SHARE_TARGET
  return f"≤ {TOKENIZE_SHARE_TARGET:.0%}: {'met' if met else 'MISSED'}"


def report(results, settings, command):
  """Section 7 of BENCHMARKS.md, in Markdown."""
  rows = []
  for label, r in results.items():
    one, many = r["batch1"], r["batched"]
    size = r["parameters"]
    rows.append([
        label, f"{size / 1e6:.1f}M" if size >= 1e5 else f"{size / 1e3:.0f}k",
        f"{r['seq_length']} ({one['tokens_per_example']:.0f})",
        f"{one['median'] * 1e3:.1f}", f"{one['p99'] * 1e3:.1f}", f"{one['tokenize_share']:.1%}",
        f"{many['throughput']:.1f}", f"{many['median'] * 1e3:.0f}", f"{many['tokenize'] * 1e3:.1f}",
        f"{many['tokenize_share']:.2%} ({many['difference_share']:.1%})",
        _status(many["tokenize_share"]) if r["target"] else ""])
  header = ["model", "parameters", "T (real tokens)", "batch 1 median (ms)", "batch 1 p99 (ms)",
            "batch 1 tokenizing", f"batch {settings.batch_size} examples/s",
            f"batch {settings.batch_size} median (ms)", f"batch {settings.batch_size} tokenizing (ms)",
            f"batch {settings.batch_size} tokenizing share (1 − from_token_ids / serving)", "target"]
  return "\n\n".join([
      SECTION,
      f"Machine: {machine_description()}. Command: `{command}`.",
      "Each classifier is made by `python -m tpu.train ... --steps 1` and its export loaded with "
      "`tf.saved_model.load` (`benchmarks/serving.py`). `serving_default` takes raw text and tokenizes "
      "it in the graph; tokenizing alone is `zoo.text.TextEncoder.encode` with the export's vocabulary "
      "in a `tf.function`; `from_token_ids` is the model on tokenized input. The three run interleaved, "
      f"one call each per round: {settings.latency_calls} rounds at batch 1 (latency: median and 99th "
      f"percentile of `serving_default`), {settings.throughput_rounds} at batch {settings.batch_size} "
      "(throughput at the median). Texts are demo sentences joined to at least T words, so every example "
      "fills the sequence. Tokenizing share: tokenizing alone over `serving_default`, in parentheses "
      "the same share estimated as 1 − `from_token_ids` / `serving_default`.",
      table(header, rows)]) + "\n"


def write_section(path, text):
  """Replaces section 7 of the Markdown file `path` with `text`, or appends it."""
  existing = ""
  if os.path.exists(path):
    with open(path) as file:
      existing = file.read()
  start = existing.find(SECTION)
  if start >= 0:
    end = existing.find("\n## ", start + len(SECTION))
    updated = existing[:start] + text + (existing[end + 1:] if end >= 0 else "")
  else:
    updated = existing.rstrip("\n") + "\n\n" + text if existing else text
  write_atomically(path, updated)


def main(argv=None):
  parser = argparse.ArgumentParser(
      prog="python -m benchmarks.serving", description=__doc__.split("\n\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
  parser.add_argument("--quick", action="store_true", help="60 rounds at batch 1 and 5 at batch 32")
  parser.add_argument("--out", help="put the report into this Markdown file as section 7, e.g. BENCHMARKS.md")
  parser.add_argument("--work-dir", help="keep the trained and exported models here (default: temporary)")
  args = parser.parse_args(argv)
  settings = Settings.quick() if args.quick else Settings.full()
  command = "python -m benchmarks.serving" + (" --quick" if args.quick else "")
  started = time.perf_counter()
  results = run(settings, args.work_dir)
  text = report(results, settings, command)
  text += f"\nThe serving run took {(time.perf_counter() - started) / 60:.1f} minutes.\n"
  print(text)
  if args.out:
    write_section(args.out, text)
    log(f"wrote {args.out}")


if __name__ == "__main__":
  main()
