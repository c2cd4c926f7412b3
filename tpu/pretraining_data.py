"""Pre-training data: a text corpus as full-length token-id examples in TFRecord shards.

  python -m tpu.pretraining_data --input 'corpus/*.txt' --vocab vocab.txt --seq-length 128 \\
      --out shards/pretrain --shards 8
  python -m tpu.pretraining_data --input tfds:wikipedia/20230601.en --text-key text \\
      --vocab vocab.txt --seq-length 512 --out gs://bucket/wiki512 --shards 256 --compress
  python -m tpu.pretraining_data --input 'corpus/*.txt' --vocab vocab.txt --seq-length 128 \\
      --out shards/pretrain --shards 8 --runner DirectRunner \\
      --direct_num_workers 2 --direct_running_mode multi_processing

Input: UTF-8 text files (local or `gs://`, globs) in BERT's pre-training format, one
sentence or paragraph per line and a blank line between documents, or with
`--documents line` one document per line (as the training job's `text:` source reads
files); a file's end also ends a document. Or a TFDS text dataset, one document per
example (`--text-key`).

Examples (`tpu.data.documents`, the rule the training job's input pipeline uses too):
the corpus is cut into chunks of about 16 MB (`--chunk-mb`, at document boundaries
found within a bounded look-ahead, else at line boundaries; lines longer than 1 MiB are
read in pieces, so memory stays flat on any layout; the rule is in
`tpu/data/corpus_reading.py`), a TFDS corpus one chunk per file shard;
in each chunk the WordPiece tokens of its documents, in order, are concatenated with
`[SEP]` between documents and cut into examples of exactly T ids, `[CLS]` + T - 2
tokens + `[SEP]`; only a chunk's last example is shorter (padded with `[PAD]`). Every
token of the corpus lands in an example; a long document spans several. Numbered
across chunks, example k goes to shard k mod N, in order, so shard sizes differ by at
most one example; a corpus of fewer examples than shards is refused.

Engines: this process (the default), or an Apache Beam pipeline with `--runner`
(DirectRunner, DataflowRunner, FlinkRunner, SparkRunner) and any of Beam's pipeline
options after it; both write the same bytes (`tpu.data.shard_writer`,
`tpu.data.beam_writer`; the Dataflow command is in tpu/README.md).

Output in `--out`:

  pretrain-00000-of-00008.tfrecord[.gz]   `tf.train.Example`s with an int64 feature
                                          `input_word_ids` of length T
  vocab.txt                               the vocabulary the ids index
  metadata.json                           T, casing, the tokenizer's special tokens
                                          and [CLS] token type, vocabulary size and
                                          SHA-256, the special-token ids, counts per
                                          shard and in all

`--vocab` may be a model directory instead of a file (`python -m zoo.convert`'s output
for a published checkpoint, or a training run): its vocabulary comes with its casing
and special tokens (a Funnel checkpoint's `<cls>`, `<sep>`, ... and [CLS] token type 2).

Resume: an interrupted run (killed, preempted) rerun with the same command keeps the
chunks it packed and the shards it completed, says so on stderr and does the rest; the
result is byte for byte that of an uninterrupted run. When corpus files changed since
(a bad line fixed), the rerun keeps the packed chunks whose bytes did not change (each
records a SHA-256 of the bytes it depends on), repacks the rest and rewrites the shards,
as a fresh run would. Output made with other settings (vocabulary, casing, sequence
length, shards, compression, chunk size, input), or finished from a corpus that changed
since, is refused with the differences named; `--overwrite` replaces it. Transient
storage errors are retried by every step, Beam's workers' too, for `--retry-seconds`;
then the run stops with one message naming the file, its work kept. Temporary files of killed runs
are removed, and a finished run leaves none. The corpus is streamed: memory stays flat
whatever its size. The training job reads the output with
`--data tfrecord:DIR/*.tfrecord` (core TensorFlow ops only, so it runs on TPU pod hosts).
"""

import argparse
import json
import os
import sys
from collections.abc import Sequence

from tpu.data.chunk_plan import CHUNK_MB
from tpu.data.corpus_reading import DOCUMENTS
from tpu.data.records import RETRY_SECONDS
from tpu.data.records import CorpusError
from tpu.data.records import StorageUnavailable
from zoo.logs import command_name
from zoo.logs import error_prefix


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog=command_name("tpu.pretraining_data"), description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
                              epilog="\n\n".join(__doc__.split("\n\n")[2:5]) + "\n\nArguments not "
                                     "listed here are Apache Beam pipeline options (with --runner).")
  p.add_argument("--input", nargs="+", required=True, metavar="GLOB",
                 help="corpus files (globs, local or gs://), or one tfds:NAME[/CONFIG]")
  p.add_argument("--vocab", required=True, metavar="FILE|DIR",
                 help="WordPiece vocabulary (one token per line), or a model directory (a `python -m "
                      "zoo.convert` output or a training run), whose special tokens and casing are used")
  p.add_argument("--seq-length", type=int, required=True, metavar="T", help="ids per example")
  p.add_argument("--out", required=True, metavar="DIR", help="output directory (local or gs://)")
  p.add_argument("--shards", type=int, default=1, metavar="N", help="number of shards (default 1)")
  p.add_argument("--lower-case", action=argparse.BooleanOptionalAction, default=None,
                 help="uncased tokenization (default: a model directory's casing, else on; match the "
                      "vocabulary)")
  p.add_argument("--compress", action="store_true", help="GZIP the shards (.tfrecord.gz)")
  p.add_argument("--text-key", default="text", help="the text feature of a TFDS dataset (default: text)")
  p.add_argument("--split", default="train", help="the TFDS split (default: train)")
  p.add_argument("--data-dir", metavar="DIR", help="TFDS data directory")
  p.add_argument("--runner", metavar="RUNNER",
                 help="run as an Apache Beam pipeline on RUNNER (DirectRunner, DataflowRunner, FlinkRunner, "
                      "SparkRunner), with Beam's pipeline options among the arguments; default: this process")
  p.add_argument("--chunk-mb", type=float, default=CHUNK_MB, metavar="MB",
                 help=f"MB of corpus per chunk, the unit of parallel work and of resume (default "
                      f"{CHUNK_MB}); part of the output's definition")
  p.add_argument("--documents", choices=DOCUMENTS, default=DOCUMENTS[0],
                 help="what separates documents in the files: a blank line (default, BERT's format) or the "
                      "end of each line (one document per line, as the text: source reads files); part of "
                      "the output's definition")
  p.add_argument("--retry-seconds", type=float, default=RETRY_SECONDS, metavar="S",
                 help="seconds each step (in this process or a Beam worker) retries transient storage "
                      "errors (gs:// unavailable, timeouts), with doubling waits of up to a minute, before "
                      f"the run stops with its work kept (default {RETRY_SECONDS:g})")
  p.add_argument("--overwrite", action="store_true",
                 help="replace output that was made with other settings (default: refuse it)")
  p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
  p.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's log lines")
  return p


def main(argv: Sequence[str] | None = None) -> int:
  p = parser()
  args, beam_args = p.parse_known_args(argv)
  if beam_args and not args.runner:
    p.error(f"unrecognized arguments: {' '.join(beam_args)} (Beam pipeline options need --runner)")
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow(args.verbose)
  # TensorFlow's own Keras attribute, which nothing here uses, stays tf_keras: `import tensorflow` then
  # loads no Keras 3 (nor scikit-learn with it), 1.4 CPU-s less in this process and in each local Beam
  # worker, which inherits the setting.
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  try:
    if args.runner:
      import logging
      logging.getLogger("apache_beam").setLevel(logging.INFO if args.verbose else logging.WARNING)
      from tpu.data.beam_writer import write_with_beam
      metadata = write_with_beam(args.input, args.vocab, args.seq_length, args.out, args.shards,
                                 runner=args.runner, pipeline_args=beam_args, lower_case=args.lower_case,
                                 compress=args.compress, text_key=args.text_key, split=args.split,
                                 data_dir=args.data_dir, chunk_mb=args.chunk_mb, documents=args.documents,
                                 overwrite=args.overwrite, retry_seconds=args.retry_seconds)
    else:
      from tpu.data.shard_writer import write_pretraining_data
      metadata = write_pretraining_data(args.input, args.vocab, args.seq_length, args.out, args.shards,
                                        lower_case=args.lower_case, compress=args.compress,
                                        text_key=args.text_key, split=args.split, data_dir=args.data_dir,
                                        progress=args.progress, chunk_mb=args.chunk_mb,
                                        documents=args.documents, overwrite=args.overwrite,
                                        retry_seconds=args.retry_seconds)
  except CorpusError as error:
    print(f"{error_prefix('tpu.pretraining_data')}: error: {error}", file=sys.stderr)
    return 2
  except StorageUnavailable as error:
    print(f"{error_prefix('tpu.pretraining_data')}: error: {error}", file=sys.stderr)
    return 1
  summary = {key: metadata[key] for key in ("seq_length", "documents", "tokens", "examples", "full_examples")}
  print(json.dumps(dict(out=args.out, **summary)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
