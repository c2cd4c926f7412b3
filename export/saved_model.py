"""SavedModel export of a training run for TensorFlow Serving: raw text in, predictions out.

  python -m export.saved_model --model-dir MODEL_DIR [--out BASE] [--checkpoint PATH]

Rebuilds the model of `MODEL_DIR/config.json` in float32 outside any distribution
strategy, restores the latest checkpoint of `MODEL_DIR/checkpoints/` (or `--checkpoint`)
and writes `BASE/<version>/` in TensorFlow Serving's layout (BASE defaults to
`MODEL_DIR/export`). A version is one more than the highest numeric version in BASE,
starting at 1. The SavedModel is written under a temporary, non-numeric name in BASE
and renamed at the end, so an interrupted export leaves no version TF Serving would
load. The written version directory goes to stdout, errors to stderr. The training job
writes the same SavedModel at its end (`tpu.serving`, which this command calls).

Exporting from the checkpoint in a strategy-free process is the supported path for
TPU-trained models: a checkpoint holds plain variable values, whatever strategy and
mixed precision policy wrote it, and the exported graph runs on CPU and GPU.

Axes: B batch, T the trained `seq_length`, T' the length of `sequence_output` (T, or
shorter for an encoder-only Funnel), D model width, C classes.

Signatures (see README.md):
  serving_default  `text` string [B] (and `text_b` string [B] for sentence-pair models) ->
                     the training task's outputs, e.g. for a classifier `probabilities`
                     float32 [B, C], `label_ids` int32 [B], `labels` string [B], `logits`
                     float32 [B, C]; for a pre-trained encoder `sequence_output` float32
                     [B, T', D] and `pooled_output` float32 [B, D]
  from_token_ids   `input_word_ids`, `input_mask`, `input_type_ids` int32 [B, T] -> as serving_default
  encode           serving_default's inputs -> the encoder's `sequence_output` and `pooled_output`

The text is tokenized in the graph (`zoo.text.TextEncoder`, vocabulary embedded) and
truncated to T. Length buckets (`--length-buckets`, default 'auto'): a call runs at the
smallest length of a ladder (16, 32, 64, ..., T) that holds its longest text, so short
texts cost short-text compute; outputs keep their shapes ([B, T, D] outputs are zeros past
that length) and equal those of padding to T at the real positions. The ladder is in
model_info.json (`length_buckets`). Load the SavedModel after `import tensorflow_text`, which registers
the tokenizer's ops.
"""

import argparse
import sys
from collections.abc import Sequence

from zoo.logs import command_name
from zoo.model_dir import EXPORT_DIR
from zoo.model_dir import ModelDir


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(
      prog=command_name("export.saved_model"), description=__doc__.split("\n\n")[0],
      epilog="Serve with: tensorflow_model_server --model_base_path=BASE --model_name=NAME "
             "--rest_api_port=8501. Processes that load the SavedModel must `import tensorflow_text` first.")
  p.add_argument("--model-dir", required=True, metavar="DIR",
                 help="the --model-dir of a `python -m tpu.train` run (local or gs://)")
  p.add_argument("--out", metavar="BASE",
                 help=f"the model base path; writes BASE/<version> (default: DIR/{EXPORT_DIR})")
  p.add_argument("--checkpoint", metavar="PATH",
                 help="checkpoint prefix or directory (default: the latest in DIR/checkpoints)")
  p.add_argument("--length-buckets", metavar="LADDER",
                 help="the sequence lengths the texts of a call run at, each at the shortest that holds it: "
                      "'auto' (8, 12, 16, 24, 32, 48, ... up to the trained seq_length: two per doubling), "
                      "'off' (every call at seq_length, as trained), or lengths such as "
                      "'32,64' (seq_length is added). Default: the run's own --length-buckets, else 'auto'. "
                      "A model whose pooling reads padding (a Funnel under 'huggingface' or "
                      "'funnel_authors' pooling semantics) gets none unless --padding-dependent-buckets")
  p.add_argument("--padding-dependent-buckets", action="store_true",
                 help="length buckets for a model whose pooling reads padding: each length then holds only "
                      "the texts whose pooling windows it holds whole, so outputs stay those of seq_length")
  p.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's log lines")
  return p


def export(model_dir: str, out: str | None, checkpoint: str | None = None, length_buckets: str | None = None,
           padding_dependent_buckets: bool = False) -> str:
  """Writes `out/<version>` from a model directory; see `tpu.serving.export`."""
  from tpu import serving
  return serving.export(model_dir, out, checkpoint, length_buckets=length_buckets,
                        padding_dependent_buckets=padding_dependent_buckets)


def saved_signatures(path: str) -> dict[str, dict[str, dict[str, str]]]:
  """The signatures of a written SavedModel, as `saved_model_cli show` prints them; see `tpu.serving`."""
  from tpu import serving
  return serving.saved_signatures(path)


def main(argv: Sequence[str] | None = None) -> int:
  args = parser().parse_args(argv)
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow(args.verbose)
  import tensorflow as tf
  try:
    path = export(args.model_dir, args.out or ModelDir(args.model_dir).export_dir, args.checkpoint,
                  length_buckets=args.length_buckets,
                  padding_dependent_buckets=args.padding_dependent_buckets)
  except (FileNotFoundError, ValueError) as error:
    print(f"export.saved_model: error: {error}", file=sys.stderr)
    return 2
  except tf.errors.OpError as error:
    print(f"export.saved_model: error: {error.message}", file=sys.stderr)
    return 1
  print(path)
  return 0


if __name__ == "__main__":
  sys.exit(main())
