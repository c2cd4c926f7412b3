"""Pre-training text: `text:GLOB`, one document per line (data type "text", only "text_a").

The matching files are read in sorted order; blank lines are skipped.
"""

from tpu.data.registry import DataSource
from tpu.data.registry import Source
from tpu.data.registry import matching_files
from tpu.data.registry import register
from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")


@register
class TextFilesSource(Source):
  scheme = "text"
  usage = "text:GLOB"
  description = "pre-training text files, one document per line"
  options = frozenset({"data_type"})
  data_types = ("text",)

  def load(self, target, split, *, data_type):
    self.check_data_type(target, data_type)
    lines = tf.data.TextLineDataset(matching_files(target)).map(tf.strings.strip)
    documents = lines.filter(lambda line: tf.strings.length(line) > 0)
    return DataSource(documents.map(lambda line: {"text_a": line}), "text")
