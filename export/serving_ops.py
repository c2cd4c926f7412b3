"""Which ops a SavedModel uses, and whether a stock TensorFlow Serving 2.12+ links them all.

  python -m export.serving_ops BASE/1 [BASE/2 ...]   # lists the op types; exit status 1 if one is not served

TF Serving links the core TensorFlow ops and the ops of one tensorflow-text release:
its `SUPPORTED_TENSORFLOW_OPS` include `@org_tensorflow_text//tensorflow_text:ops_lib`,
and TF Serving 2.12 to 2.19 build in tensorflow-text 2.12.1 (tensorflow/serving pull
request 4057, "Update tf-text to 2.18.1", Feb 2025: "updates the embedded TensorFlow
Text from version 2.12.1"; models using tensorflow-text >= 2.16 ops fail there with
`Op type not registered 'TFText>RoundRobinTrim'`, tensorflow/serving issue 2267).
`FastBertNormalize` and `FastWordpieceTokenizeWithOffsets` joined `ops_lib` after TF
Serving 2.11.0 (tensorflow/serving issue 2064, Dec 2022), so 2.12 is the first release
with both.

`TFTEXT_OPS` lists, per kernel target of tensorflow-text 2.12.1's `ops_lib`
(`tensorflow_text/BUILD`), the ops it registers. Not in it: the trimmer ops
(`TFText>RoundRobinTrim`, `TFText>RoundRobinGenerateMask`, `TFText>RoundRobinFit`;
`trimmer_ops_cc` joined `ops_lib` later), the Python-only masking and segment
combining ops (plain TensorFlow ops once traced) and ops of other releases.

An op name is not the whole contract: a newer release can add attributes to an op,
and an older server refuses a node that carries an attribute its op does not declare
(`NodeDef mentions attr '...' not in Op`). Such changes happen: `FastBertNormalize`'s
one attribute was `get_offset_mappings` in one release and is `get_offsets` in others,
and tensorflow-text's development sources give `FastWordpieceTokenizeWithOffsets`
(no attributes up to 2.20) the attributes `get_pieces` and `get_offsets`
(`tensorflow_text/core/kernels/fast_bert_normalizer_kernel_template.h` and
`fast_wordpiece_tokenizer_kernel_template.h` across versions). TensorFlow leaves
attributes at their default out of a saved graph, so a node of such an op is fine as
long as it sets none. `TFTEXT_ATTRS` holds, for the ops checked that way, the
attributes a node may set: those the op has had unchanged since 2.12, none where the
2.12 set is unknown or changed.

The SavedModel is read with protobuf only: nothing here imports tensorflow_text, so
ops registered by an imported tensorflow_text cannot hide a missing one. Core ops are
those of `tf.raw_ops`, which lists the ops TensorFlow itself registers.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from collections.abc import Iterator
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

from zoo.lazy import lazy_module

if TYPE_CHECKING:   # the type checker reads TensorFlow's names; annotations are not evaluated
  import tensorflow as tf
  from tensorflow.core.protobuf import saved_model_pb2
else:   # TensorFlow loads on first use: `--help` answers without it.
  tf = lazy_module("tensorflow")
  saved_model_pb2 = lazy_module("tensorflow.core.protobuf.saved_model_pb2")

# tensorflow-text 2.12.1, `//tensorflow_text:ops_lib`: kernel target -> the op types it registers.
TFTEXT_OPS_BY_TARGET = {
    "constrained_sequence_op_cc": ("ConstrainedSequence",),
    "fast_bert_normalizer_cc": ("FastBertNormalize",),
    "fast_sentencepiece_tokenizer_cc": ("TFText>FastSentencepieceTokenize",
                                        "TFText>FastSentencepieceDetokenize"),
    "fast_wordpiece_tokenizer_cc": ("FastWordpieceTokenizeWithOffsets", "TFText>FastWordpieceDetokenize"),
    "mst_ops_cc": ("MaxSpanningTree",),
    "normalize_ops_cc": ("CaseFoldUTF8", "NormalizeUTF8", "NormalizeUTF8WithOffsetsMap", "FindSourceOffsets"),
    "regex_split_ops_cc": ("RegexSplitWithOffsets",),
    "sentence_breaking_ops_cc": ("SentenceFragments",),
    "sentencepiece_tokenizer_cc": ("SentencepieceOp", "SentencepieceTokenizeOp",
                                   "SentencepieceTokenizeWithOffsetsOp", "SentencepieceDetokenizeOp",
                                   "SentencepieceVocabSizeOp", "SentencepieceIdToStringOp",
                                   "SentencepieceStringToIdOp"),
    "split_merge_from_logits_tokenizer_cc": ("TokenizerFromLogits",),
    "split_merge_tokenizer_cc": ("SplitMergeTokenizeWithOffsets",),
    "state_based_sentence_breaker_op_cc": ("SentenceFragmentsV2",),
    "text_similarity_metric_ops_cc": ("RougeL",),
    "unicode_script_tokenizer_cc": ("UnicodeScriptTokenizeWithOffsets",),
    "whitespace_tokenizer_cc": ("WhitespaceTokenizeWithOffsets",),
    "whitespace_tokenizer_v2_cc": ("TFText>WhitespaceTokenizeWithOffsetsV2",),
    "wordpiece_tokenizer_cc": ("WordpieceTokenizeWithOffsets",),
}
TFTEXT_OPS = frozenset(op for ops in TFTEXT_OPS_BY_TARGET.values() for op in ops)
# The attributes of these ops in tensorflow-text 2.12 (a node may carry no others).
TFTEXT_ATTRS = {
    "CaseFoldUTF8": frozenset(),
    "NormalizeUTF8": frozenset({"normalization_form"}),
    "RegexSplitWithOffsets": frozenset(),
    # Attributes that came or changed later: a node must leave them at their defaults.
    "FastWordpieceTokenizeWithOffsets": frozenset(),
    "FastBertNormalize": frozenset(),
    "WordpieceTokenizeWithOffsets": frozenset({
        "suffix_indicator", "max_bytes_per_word", "max_chars_per_token", "use_unknown_token",
        "unknown_token", "split_unknown_characters", "output_row_partition_type"}),
}
MIN_TF_SERVING = "2.12"


def read_saved_model(path: str) -> saved_model_pb2.SavedModel:
  """The `SavedModel` proto of `path/saved_model.pb` (`path` a SavedModel directory)."""
  with tf.io.gfile.GFile(os.path.join(path, "saved_model.pb"), "rb") as file:
    return saved_model_pb2.SavedModel.FromString(file.read())


def nodes(saved_model: saved_model_pb2.SavedModel) -> Iterator[tuple[str, Any]]:
  """Yields `(where, NodeDef)` for every node: the graphs' and every library function's."""
  for meta_graph in saved_model.meta_graphs:
    for node in meta_graph.graph_def.node:
      yield "graph", node
    for function in meta_graph.graph_def.library.function:
      for node in function.node_def:
        yield function.signature.name, node


def op_types(path: str) -> collections.Counter[str]:
  """`Counter` of op type -> number of nodes, over the graph and all functions of a SavedModel."""
  return collections.Counter(node.op for _, node in nodes(read_saved_model(path)))


def core_ops() -> frozenset[str]:
  """The op types TensorFlow itself registers (`tf.raw_ops`; tensorflow_text adds none there)."""
  return frozenset(name for name in dir(tf.raw_ops) if not name.startswith("_"))


def problems(path: str) -> list[str]:
  """What a stock TF Serving (>= `MIN_TF_SERVING`) cannot run in the SavedModel at `path`; [] if nothing."""
  saved_model = read_saved_model(path)
  core = core_ops()
  found = []
  seen = set()
  for where, node in nodes(saved_model):
    if node.op in core:
      continue
    if node.op not in TFTEXT_OPS:
      if node.op not in seen:
        found.append(f"op {node.op!r} (in {where}) is neither a core TensorFlow op nor in tensorflow-text "
                     "2.12's ops_lib")
        seen.add(node.op)
      continue
    allowed = TFTEXT_ATTRS.get(node.op)
    if allowed is None:   # an op whose attributes are not checked
      continue
    # Attributes starting with "_" are TensorFlow's own and need no declaration.
    extra = sorted(name for name in node.attr if not name.startswith("_") and name not in allowed)
    if extra:
      found.append(f"{node.op} node {node.name!r} (in {where}) sets {extra}, attributes tensorflow-text 2.12 "
                   "does not declare")
  return found


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m export.serving_ops",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("saved_model", nargs="+",
                      help="SavedModel directories (each holding saved_model.pb); with several, each "
                           "one's list starts with a line '# DIRECTORY'")
  args = parser.parse_args(argv)
  core = core_ops()
  failed = False
  for path in args.saved_model:
    if len(args.saved_model) > 1:
      print(f"# {path}")
    for op, count in sorted(op_types(path).items()):
      origin = "core" if op in core else "tensorflow-text" if op in TFTEXT_OPS else "NOT SERVED"
      print(f"{op}\t{count}\t{origin}")
    found = problems(path)
    for problem in found:
      print(f"export.serving_ops: {path}: {problem}", file=sys.stderr)
    failed = failed or bool(found)
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
