"""The zoo's keras-hub tokenizer: WordPiece with a model directory's vocabulary, casing and special tokens."""

import keras_hub

from zoo.keras3.loading import DEFAULT_SPECIAL_TOKENS


class ZooTokenizer(keras_hub.tokenizers.WordPieceTokenizer):
  """WordPiece with a zoo model directory's vocabulary, casing and special tokens.

  Args:
    vocabulary: the tokens (index = id) or a vocabulary file.
    lowercase: lower-case first (BERT uncased, the zoo's default).
    special_tokens_names: `{role: token}` for `pad`, `unk`, `cls`, `sep`, `mask`
      (defaults BERT's `[PAD]`, ...).
    strip_accents: strip accents first; None (the default) follows `lowercase`, as BERT's
      uncased and cased tokenizers do (a Hugging Face directory can set it either way).
    **kwargs: `WordPieceTokenizer`'s (e.g. `split_on_cjk`, which the config keeps too).
  """

  def __init__(self, vocabulary=None, lowercase=True, special_tokens_names=None, strip_accents=None,
               **kwargs):
    names = {**DEFAULT_SPECIAL_TOKENS, **(special_tokens_names or {})}
    self.special_tokens_names = names
    for role in ("cls", "sep", "pad", "mask"):
      self._add_special_token(names[role], f"{role}_token")
    self._add_special_token(names["cls"], "start_token")
    self._add_special_token(names["sep"], "end_token")
    kwargs.pop("oov_token", None)
    super().__init__(vocabulary=vocabulary, lowercase=lowercase,
                     strip_accents=lowercase if strip_accents is None else strip_accents,
                     oov_token=names["unk"], **kwargs)

  def get_config(self):
    config = super().get_config()   # with `strip_accents` as applied
    config.update(special_tokens_names=dict(self.special_tokens_names), split_on_cjk=self.split_on_cjk)
    return config
