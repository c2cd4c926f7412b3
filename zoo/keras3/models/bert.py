"""keras-hub's BERT tokenizer and preprocessors as Hugging Face BERT directories get them after
`import zoo.keras3` (`zoo.keras3.hf_presets`): transformers' ids and transformers' pair truncation.

keras-hub loads a Hugging Face BERT directory into its own `BertBackbone` and BERT tasks. Their
tokenizer is `BertTokenizer` here, keras-hub's with the zoo's tokenization
(`zoo.keras3.models.tokenizer`, `rules="transformers"`: transformers' ids on any text), and their
preprocessors the ones here, keras-hub's trimming text pairs longest first
(`zoo.keras3.models.packing`). They keep keras-hub's class names, registered under the package
"zoo", so a preset saved from them names these.
"""

import keras
import keras_hub

from zoo.keras3.models.packing import PairTruncation
from zoo.keras3.models.tokenizer import ZooWordPiece


@keras.saving.register_keras_serializable(package="zoo")
class BertTokenizer(ZooWordPiece, keras_hub.models.BertTokenizer):
  """keras-hub's `BertTokenizer` (`[CLS]`-style special tokens) tokenizing as transformers does.

  Args:
    vocabulary, lowercase: keras-hub's.
    strip_accents: None (the default) follows `lowercase`, as transformers' BERT tokenizer.
    rules, max_chars_per_word, clean_text, added_tokens, normalized_added_tokens: `ZooTokenizer`'s,
      `rules` default "transformers".
    **kwargs: keras-hub's (`split_on_cjk`, `oov_token`, ...).
  """

  def __init__(self, vocabulary=None, lowercase=False, strip_accents=None, rules="transformers",
               max_chars_per_word=None, clean_text=True, added_tokens=None, normalized_added_tokens=None,
               **kwargs):
    strip_accents = lowercase if strip_accents is None else strip_accents
    self._set_rules(rules, lowercase, strip_accents, kwargs.get("split_on_cjk", True), max_chars_per_word,
                    clean_text, added_tokens, normalized_added_tokens)
    super().__init__(vocabulary=vocabulary, lowercase=lowercase, strip_accents=strip_accents, **kwargs)


@keras.saving.register_keras_serializable(package="zoo")
class BertTextClassifierPreprocessor(PairTruncation, keras_hub.models.BertTextClassifierPreprocessor):
  """keras-hub's, trimming text pairs as transformers does (`truncate="longest_first"`)."""


@keras.saving.register_keras_serializable(package="zoo")
class BertMaskedLMPreprocessor(PairTruncation, keras_hub.models.BertMaskedLMPreprocessor):
  """keras-hub's, trimming text pairs as transformers does (`truncate="longest_first"`)."""


@keras.saving.register_keras_serializable(package="zoo")
class BertTextEmbedderPreprocessor(PairTruncation, keras_hub.models.BertTextEmbedderPreprocessor):
  """keras-hub's, trimming text pairs as transformers does (`truncate="longest_first"`)."""


# keras-hub's preprocessors of BERT tasks -> the ones a Hugging Face BERT directory gets.
PREPROCESSORS = {keras_hub.models.BertTextClassifierPreprocessor: BertTextClassifierPreprocessor,
                 keras_hub.models.BertMaskedLMPreprocessor: BertMaskedLMPreprocessor,
                 keras_hub.models.BertTextEmbedderPreprocessor: BertTextEmbedderPreprocessor}
