"""A zoo model directory as a Keras 3 encoder: what `tpu.train` trained or `zoo.convert` converted.

`load_model_dir(path)` rebuilds the encoder that `config.json` describes (its preset and
overrides, vocabulary size, static length) with `zoo.keras3`, under the current Keras
backend, and gives it the weights of the directory's latest checkpoint, moved by name
(`zoo.named_weights`). The tokenizer settings beside them (vocabulary, casing, special
tokens, [cls]'s token type) come along for the keras-hub tokenizer (`zoo.keras3.hub`).
The checkpoint is TensorFlow's format, read with TensorFlow (any build: no TPU one is
needed) and never with `tf_keras`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.configs import EncoderConfig
from zoo.keras3.models.funnel_encoder import FunnelEncoder
from zoo.keras3.models.transformer_encoder import TransformerEncoder
from zoo.model_dir import ModelDir
from zoo.model_dir import encoder_root
from zoo.model_dir import tokenizer_as_written
from zoo.named_weights import assign_named_arrays
from zoo.named_weights import checkpoint_arrays
from zoo.presets import encoder_config

ENCODER_CLASSES = {"transformer": TransformerEncoder, "funnel": FunnelEncoder}
# The special tokens of a directory whose config.json names none: BERT's (zoo.text.SPECIAL_TOKENS).
DEFAULT_SPECIAL_TOKENS = dict(pad="[PAD]", unk="[UNK]", cls="[CLS]", sep="[SEP]", mask="[MASK]")


@dataclasses.dataclass
class LoadedModelDir:
  """What `load_model_dir` returns: the encoder and the tokenizer settings of the directory.

  `encoder_config` is the encoder's configuration (`zoo.configs`; `family` says which),
  `vocab` the WordPiece tokens (index = id), `special_tokens` the names of
  `pad`/`unk`/`cls`/`sep`/`mask`, `cls_type_id` the token type of [cls] (2 for Funnel's
  tokenizer), and `num_classes`/`label_names` the task's, when the directory has them;
  `tokenizer_kind` "sentencepiece" for a SentencePiece directory (`zoo.convert hf-albert`),
  whose `vocab` is the model's pieces; `max_chars_per_word` and `truncator` (of text pairs) its
  `zoo.text.TextEncoder`'s.
  """
  encoder: object
  family: str
  encoder_config: EncoderConfig
  vocab: list
  lower_case: bool
  special_tokens: dict
  cls_type_id: int
  max_chars_per_word: int
  seq_length: int | None
  num_classes: int | None = None
  label_names: list | None = None
  tokenizer_kind: str = "wordpiece"
  truncator: str = "longest_first"


def load_model_dir(path: str, **overrides: Any) -> LoadedModelDir:
  """The encoder of the zoo model directory `path` with its latest weights, as a `LoadedModelDir`.

  Args:
    path: a model directory (local or gs://) with `config.json`, `vocab.txt` and a checkpoint.
    **overrides: encoder arguments that do not change the weights, e.g. `seq_length`,
      `dropout`, `attention_dropout`, `output_attention_probs`, `dtype` (a Keras dtype
      policy such as "mixed_bfloat16").

  Raises:
    FileNotFoundError: no config.json, vocab.txt or checkpoint.
    zoo.named_weights.WeightMismatch: the checkpoint does not fit the configuration.
  """
  model_dir = ModelDir(path)
  settings = model_dir.read_config()
  overrides = dict(overrides)
  dtype = overrides.pop("dtype", None)
  config = encoder_config(settings, **overrides)
  prefix = model_dir.latest_checkpoint()
  if prefix is None:
    raise FileNotFoundError(f"{path} holds no checkpoint in {model_dir.checkpoint_dir}")
  encoder = ENCODER_CLASSES[config.family](config, dtype=dtype)
  assign_named_arrays(encoder, checkpoint_arrays(prefix, encoder_root(prefix)),
                      source=f"the checkpoint {prefix}")
  return LoadedModelDir(
      encoder=encoder, family=config.family, encoder_config=config,
      seq_length=config.built_length, num_classes=settings.get("num_classes"),
      label_names=settings.get("label_names"), **tokenizer_settings(model_dir, settings))


# `zoo.text.TextEncoder`'s default `max_chars_per_word` (zoo.text.tokenizer.MAX_CHARS_PER_WORD, not
# imported: that module loads TensorFlow), what a directory recording none tokenizes with.
TEXT_ENCODER_MAX_CHARS_PER_WORD = 400


def tokenizer_settings(model_dir: ModelDir, settings: dict[str, Any]) -> dict[str, Any]:
  """The `LoadedModelDir` fields of a model directory's tokenizer: `vocab`, `lower_case`,
  `special_tokens`, `cls_type_id`, `max_chars_per_word`, `tokenizer_kind` and `truncator`, as the
  directory's `zoo.text.TextEncoder` has them (`zoo.model_dir.tokenizer_as_written`)."""
  tokenizer = tokenizer_as_written(settings)
  return dict(vocab=list(model_dir.read_vocab()), lower_case=bool(settings.get("lower_case", True)),
              special_tokens={**DEFAULT_SPECIAL_TOKENS, **tokenizer.get("special_tokens", {})},
              cls_type_id=int(tokenizer.get("cls_type_id", 0)),
              max_chars_per_word=int(tokenizer.get("max_chars_per_word", TEXT_ENCODER_MAX_CHARS_PER_WORD)),
              tokenizer_kind=tokenizer.get("kind", "wordpiece"), truncator=tokenizer["truncator"])
