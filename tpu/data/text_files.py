"""Pre-training text: `text:GLOB`, one document per line or documents separated by blank lines
(data type "text", only "text_a").

The matching files are read in sorted order. The option `documents` says what separates
documents, as for the shard writer (`python -m tpu.pretraining_data --documents`), whose
reader (`tpu.data.corpus_reading`) defines both:
- "line" (the default): each line is a document; lines are read with core TensorFlow
  ops (`TextLineDataset`), stripped, and whitespace-only lines skipped;
- "blank-line" (BERT's pre-training format): a blank line, or a file's end, ends a
  document; each document is its lines joined by newlines, read by the shard writer's
  own reader (in Python, through `tf.io.gfile`), so with the same vocabulary and one
  chunk the two routes make the same examples.
"""

from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import matching_files
from tpu.data.source_registry import register
from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

# What separates documents without the option `documents`.
DEFAULT_DOCUMENTS = "line"

# What Python's `str.strip` strips (`str.isspace`), in RE2's syntax.
_SPACE = r"[\s\x0b\x1c-\x1f\x85\p{Z}]"


@register
class TextFilesSource(Source):
  scheme = "text"
  usage = "text:GLOB"
  description = "pre-training text files, one document per line (or per blank-line-separated block)"
  options = frozenset({"data_type", "documents"})
  reads_files = True
  data_types = ("text",)

  def load(self, target: str, split: str, *, data_type: str | None, documents: str | None) -> DataSource:
    from tpu.data import corpus_reading
    self.check_data_type(target, data_type)
    documents = corpus_reading.check_documents(documents or DEFAULT_DOCUMENTS)
    files = matching_files(target)
    if documents == "line":
      lines = tf.data.TextLineDataset(files)
      texts = lines.filter(lambda line: tf.logical_not(tf.strings.regex_full_match(line, _SPACE + "*")))
      texts = texts.map(tf.strings.strip)
    else:
      texts = tf.data.Dataset.from_generator(lambda: _blank_line_documents(files),
                                             output_signature=tf.TensorSpec([], tf.string))
    return DataSource(texts.map(lambda text: {"text_a": text}), "text")


def _blank_line_documents(files):
  """The documents of `files` separated by blank lines, each its lines joined by newlines (UTF-8)."""
  from tpu.data import corpus_reading
  for path in files:   # a `records.CorpusError` names the file and line of text that is not UTF-8
    size = tf.io.gfile.stat(path).length
    document = []
    whole_file = max(size, corpus_reading.MAX_LINE_BYTES)   # one piece, lines in segments of at most 1 MiB
    for line in corpus_reading.piece_lines(path, 0, size, size, "blank-line", whole_file):
      if line:
        document.append(line)
      elif document:
        yield "\n".join(document).encode("utf-8")
        document = []
    if document:
      yield "\n".join(document).encode("utf-8")
