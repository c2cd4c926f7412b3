"""sentence-transformers' folder layout: what `to-hf` writes for an embed run, what the
`sentence-transformers` format reads.

A `SentenceTransformer` folder runs the modules `modules.json` lists (`idx`, `name`, `path`,
`type`), in order. The ones the zoo's `TextEmbedder` computes, and so the only ones read or written:

- `Transformer`: a transformers model with its tokenizer, in the folder itself (path "", as
  sentence-transformers 3 and later save it) or a subfolder (`0_Transformer`, older folders),
  with `sentence_bert_config.json` (`max_seq_length`, `do_lower_case`; since version 6 also
  `transformer_task`, `modality_config`, `module_output_name`, `processing_kwargs`); its output is
  the model's `last_hidden_state` on the texts padded to the batch's longest, or with
  `processing_kwargs` `PAD_TO_MAX_LENGTH` to `max_seq_length` (which a Funnel needs to compute the
  zoo model's outputs: its pooling reads padding);
- `Pooling` (`1_Pooling/config.json`): `pooling_mode` "cls" (the first token's state), "mean" or
  "max" (over the tokens of the attention mask), and `embedding_dimension` (before version 6
  `word_embedding_dimension` and one boolean `pooling_mode_..._token(s)` per mode);
- `Normalize` (`2_Normalize`, optional): each vector scaled to unit length.

`config_sentence_transformers.json` holds the prompts (`encode` prepends `default_prompt_name`'s
to every text), the similarity function's name and the versions that saved the folder.

`module_files` gives the files `to-hf` writes beside the transformer, as sentence-transformers
6.2 saves `SentenceTransformer(modules=[Transformer(...), Pooling(...), Normalize()])`;
`read_folder` reads a folder's modules into an `EmbeddingFolder`, refusing what `TextEmbedder`
does not compute (other pooling modes, `include_prompt` false, a default prompt, other modules
such as `Dense`), each named with what is supported.
"""

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from zoo.convert.errors import ConversionError
from zoo.convert.releases import read_json

MODULES_FILE = "modules.json"
TRANSFORMER_CONFIG_FILE = "sentence_bert_config.json"
MODEL_CONFIG_FILE = "config_sentence_transformers.json"
MODULE_CONFIG_FILE = "config.json"
# The version whose layout `module_files` writes (its `__version__` in config_sentence_transformers.json).
LAYOUT_VERSION = "6.2.0"
# The modules' classes as sentence-transformers 6 names them in modules.json; older folders name them
# `sentence_transformers.models.Transformer` and so on. A type of sentence-transformers' own is read by
# its class name.
TYPES = dict(Transformer="sentence_transformers.base.modules.transformer.Transformer",
             Pooling="sentence_transformers.sentence_transformer.modules.pooling.Pooling",
             Normalize="sentence_transformers.base.modules.normalize.Normalize")
POOLING_MODES = ("cls", "mean", "max")
# Pooling's modes in sentence-transformers, and the boolean keys that named them before version 6.
ALL_POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
LEGACY_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                       "pooling_mode_mean_tokens": "mean",
                       "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                       "pooling_mode_weightedmean_tokens": "weightedmean",
                       "pooling_mode_lasttoken": "lasttoken"}
TEXT_MODALITY = {"text": {"method": "forward", "method_output_name": "last_hidden_state"}}
# Every text padded to max_seq_length, not to the batch's longest: what a Funnel needs to compute the zoo
# model's vectors (transformers' Funnel treats a pooled pair of tokens that holds a pad as padding).
PAD_TO_MAX_LENGTH = {"text": {"padding": "max_length"}}
SUPPORTED = ("a Transformer, then a Pooling (pooling_mode cls, mean or max, include_prompt true), then "
             "optionally a Normalize")


@dataclasses.dataclass(frozen=True)
class EmbeddingFolder:
  """What a sentence-transformers folder computes, as `read_folder` reads it.

  Attributes:
    transformer_path: the directory of the transformers model and its tokenizer files.
    pooling: "cls", "mean" or "max".
    normalize: the vectors are scaled to unit length (a `Normalize` module follows the pooling).
    dimension: the pooling's `embedding_dimension`.
    max_seq_length: the tokens a text is truncated to, as the `Transformer` module sets it:
      sentence_bert_config.json's `max_seq_length`, else the tokenizer's `model_max_length` no longer
      than the model's `max_position_embeddings`; None when none of them says.
    do_lower_case: sentence_bert_config.json's `do_lower_case` (lower-case the text before the
      tokenizer's own normalisation).
    pad_to_max_length: every text is padded to `max_seq_length` (`processing_kwargs`
      `PAD_TO_MAX_LENGTH`), not to the batch's longest.
    modules: modules.json's entries.
    settings: config_sentence_transformers.json (its prompts, similarity function and versions).
  """
  transformer_path: str
  pooling: str
  normalize: bool
  dimension: int
  max_seq_length: int | None
  do_lower_case: bool
  pad_to_max_length: bool
  modules: list
  settings: dict


def _optional_json(path):
  return read_json(path, "") if os.path.isfile(path) else {}


def module_kind(entry: Mapping[str, Any]) -> str:
  """The class name of a modules.json entry of sentence-transformers' own ("Transformer", "Pooling",
  ...); "" for a class of other code (a repository's own module, which may compute anything)."""
  kind = str(entry.get("type", ""))
  return kind.rsplit(".", 1)[-1] if kind.startswith("sentence_transformers.") else ""


def read_modules(src: str) -> list[dict[str, Any]]:
  """modules.json's entries of the folder `src`, in order; a ConversionError names the file when it is
  missing or malformed."""
  path = os.path.join(src, MODULES_FILE)
  entries = read_json(path, "a sentence-transformers folder (modules.json, the modules it lists and their "
                             "files)", list)
  for entry in entries:
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) or "path" not in entry:
      raise ConversionError(f"{path}: every module needs a type and a path, got {entry!r}")
    if os.path.isabs(entry["path"]) or ".." in entry["path"].replace("\\", "/").split("/"):
      raise ConversionError(f"{path}: module path {entry['path']!r} is not inside the folder")
  return sorted(entries, key=lambda entry: entry.get("idx", 0))


def transformer_folder(src: str) -> str:
  """The path (relative to `src`) of the folder's Transformer module: "" (the folder itself) unless
  modules.json names a subfolder; "" also without a modules.json."""
  if not os.path.isfile(os.path.join(src, MODULES_FILE)):
    return ""
  for entry in read_modules(src):
    if module_kind(entry) == "Transformer":
      return entry["path"]
  return ""


def pooling_mode(config: Mapping[str, Any], path: str) -> str:
  """The mode of a Pooling config (`pooling_mode`, or the boolean keys before sentence-transformers 6,
  "mean" when none is set, as sentence-transformers reads them); a ConversionError for modes the zoo
  does not compute, concatenated modes and `include_prompt` false."""
  mode = config.get("pooling_mode")
  if mode is None:
    modes = [name for key, name in LEGACY_POOLING_KEYS.items() if config.get(key)]
    mode = modes or "mean"
  if isinstance(mode, list | tuple):
    mode = mode[0] if len(mode) == 1 else tuple(mode)
  if isinstance(mode, tuple):
    raise ConversionError(f"{path}: pooling modes {list(mode)} concatenated into one vector; the zoo's "
                          f"TextEmbedder pools with one of {', '.join(POOLING_MODES)}")
  if mode not in POOLING_MODES:
    known = "" if mode in ALL_POOLING_MODES else " (not a sentence-transformers pooling mode either)"
    raise ConversionError(f"{path}: pooling_mode {mode!r}{known}: the zoo's TextEmbedder pools with cls, "
                          "mean or max (choose one of those)")
  if config.get("include_prompt", True) is False:
    raise ConversionError(f"{path}: include_prompt false (prompt tokens left out of the pooling): the zoo's "
                          "TextEmbedder pools every token of the text; supported: include_prompt true")
  return mode


def _check_transformer_config(config, path):
  """Refuses a Transformer module whose sentence_bert_config.json makes it compute otherwise than the
  model's `last_hidden_state` on the tokenizer's ids, padded to the batch's longest text or to
  `max_seq_length`."""
  task = config.get("transformer_task", "feature-extraction")
  if task != "feature-extraction":
    raise ConversionError(f"{path}: transformer_task {task!r}: a zoo embedder pools the encoder's hidden "
                          "states (transformer_task 'feature-extraction')")
  modality = config.get("modality_config")
  if modality is not None and modality.get("text") != TEXT_MODALITY["text"]:
    raise ConversionError(f"{path}: modality_config {modality!r}: the zoo reads text only, pooling "
                          f"the model's last_hidden_state ({TEXT_MODALITY!r})")
  output = config.get("module_output_name", "token_embeddings")
  if output != "token_embeddings":
    raise ConversionError(f"{path}: module_output_name {output!r}: the Pooling module reads "
                          "'token_embeddings'")
  processing = config.get("processing_kwargs") or {}
  if processing and processing != PAD_TO_MAX_LENGTH:
    raise ConversionError(f"{path}: processing_kwargs {processing!r} change how texts are tokenized; the zoo "
                          f"converts folders that tokenize with the tokenizer's own settings, padded to the "
                          f"batch's longest text or to max_seq_length ({PAD_TO_MAX_LENGTH!r})")


def max_seq_length(transformer_path: str, transformer_config: Mapping[str, Any]) -> int | None:
  """The length the Transformer module truncates texts to (`EmbeddingFolder.max_seq_length`)."""
  if transformer_config.get("max_seq_length") is not None:
    return int(transformer_config["max_seq_length"])
  tokenizer = _optional_json(os.path.join(transformer_path, "tokenizer_config.json"))
  model = _optional_json(os.path.join(transformer_path, "config.json"))
  lengths = [value for value in (tokenizer.get("model_max_length"), model.get("max_position_embeddings"))
             if isinstance(value, int) and 0 < value < 1e9]
  return min(lengths) if lengths else None


def read_folder(src: str) -> EmbeddingFolder:
  """The `EmbeddingFolder` of the sentence-transformers folder `src`.

  Raises:
    ConversionError: a missing or malformed file, modules other than a Transformer, a Pooling and a
      Normalize in that order, a pooling the zoo does not compute, a Transformer that pools other
      outputs or tokenizes otherwise, a default prompt; each names the file and what is supported.
  """
  modules = read_modules(src)
  modules_path = os.path.join(src, MODULES_FILE)
  kinds = [module_kind(entry) for entry in modules]
  for entry, kind in zip(modules, kinds, strict=True):
    if kind not in TYPES:
      name = entry.get("name", entry.get("idx"))
      raise ConversionError(f"{modules_path}: module {name!r} ({entry['type']}, path {entry['path']!r}) is "
                            f"not one the zoo computes; supported: {SUPPORTED}")
  if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
    raise ConversionError(f"{modules_path}: modules {kinds}; supported: {SUPPORTED}")
  transformer_path = os.path.normpath(os.path.join(src, modules[0]["path"]))
  config_path = os.path.join(transformer_path, TRANSFORMER_CONFIG_FILE)
  transformer_config = _optional_json(config_path)
  _check_transformer_config(transformer_config, config_path)
  pooling_path = os.path.join(src, modules[1]["path"], MODULE_CONFIG_FILE)
  pooling_config = read_json(pooling_path, "the Pooling module's config")
  mode = pooling_mode(pooling_config, pooling_path)
  dimension = pooling_config.get("embedding_dimension", pooling_config.get("word_embedding_dimension"))
  if not isinstance(dimension, int):
    raise ConversionError(f"{pooling_path}: no embedding_dimension (word_embedding_dimension before "
                          "sentence-transformers 6)")
  settings_path = os.path.join(src, MODEL_CONFIG_FILE)
  settings = _optional_json(settings_path)
  default_prompt = settings.get("default_prompt_name")
  if default_prompt is not None and (settings.get("prompts") or {}).get(default_prompt):
    raise ConversionError(f"{settings_path}: default_prompt_name {default_prompt!r}: encode puts "
                          f"{settings['prompts'][default_prompt]!r} before every text, which the zoo's embed "
                          "export does not; supported: no default prompt (default_prompt_name null)")
  return EmbeddingFolder(transformer_path, mode, len(kinds) == 3, dimension,
                         max_seq_length(transformer_path, transformer_config),
                         bool(transformer_config.get("do_lower_case", False)),
                         transformer_config.get("processing_kwargs") == PAD_TO_MAX_LENGTH, modules, settings)


def _dumps(value, indent):
  """JSON as sentence-transformers writes it (`json.dump` with `indent`, no newline at the end)."""
  return json.dumps(value, indent=indent)


def module_files(pooling: str, normalize: bool, dimension: int, seq_length: int,
                 pad_to_max_length: bool = False) -> dict[str, str]:
  """`{path in the folder: text}` of the sentence-transformers files beside a transformer exported at the
  folder's root: modules.json, sentence_bert_config.json (`max_seq_length` `seq_length`,
  `do_lower_case` false: the tokenizer files do the run's casing; with `pad_to_max_length`, a Funnel's,
  `processing_kwargs` that pad every text to it), config_sentence_transformers.json,
  `1_Pooling/config.json` and with `normalize` `2_Normalize/config.json`."""
  if pooling not in POOLING_MODES:
    raise ValueError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
  kinds = [("Transformer", ""), ("Pooling", "1_Pooling")]
  kinds += [("Normalize", "2_Normalize")] if normalize else []
  modules = [dict(idx=index, name=str(index), path=path, type=TYPES[kind])
             for index, (kind, path) in enumerate(kinds)]
  transformer = dict(transformer_task="feature-extraction", modality_config=TEXT_MODALITY,
                     module_output_name="token_embeddings", max_seq_length=int(seq_length),
                     do_lower_case=False)
  if pad_to_max_length:
    transformer["processing_kwargs"] = PAD_TO_MAX_LENGTH
  settings = {"__version__": {"sentence_transformers": LAYOUT_VERSION}, "default_prompt_name": None,
              "model_type": "SentenceTransformer", "prompts": {"document": "", "query": ""},
              "similarity_fn_name": "cosine"}
  pooling_config = dict(embedding_dimension=int(dimension), pooling_mode=pooling, include_prompt=True)
  files = {MODULES_FILE: _dumps(modules, 2), TRANSFORMER_CONFIG_FILE: _dumps(transformer, 4),
           MODEL_CONFIG_FILE: _dumps(settings, 2),
           f"1_Pooling/{MODULE_CONFIG_FILE}": _dumps(pooling_config, 4)}
  if normalize:
    files[f"2_Normalize/{MODULE_CONFIG_FILE}"] = _dumps(dict(module_input_name="sentence_embedding",
                                                            module_output_name="sentence_embedding"), 4)
  return files
