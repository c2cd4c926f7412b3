"""Hugging Face Funnel directories and `hf://` handles through keras-hub's own entry points.

keras-hub reads a Hugging Face directory (config.json, safetensors, tokenizer files) through
the converter of its `model_type`; it has none for "funnel". `install()` (run by
`import zoo.keras3` when keras-hub is installed) gives it this module's, so Funnel loads as
BERT does:

    import keras_hub
    import zoo.keras3

    backbone = keras_hub.models.Backbone.from_preset("funnel-dir")   # a FunnelBackbone
    tokenizer = keras_hub.models.Tokenizer.from_preset("hf://funnel-transformer/small")
    classifier = keras_hub.models.TextClassifier.from_preset("funnel-dir", num_classes=2, sequence_length=64)
    trained = keras_hub.models.TextClassifier.from_preset("funnel-sst2-dir")   # its head and classes
    masked_lm = keras_hub.models.MaskedLM.from_preset("funnel-dir")  # a FunnelForMaskedLM's head too
    keras_hub.models.Backbone.from_preset("funnel_small_base_en")    # a registered preset (`funnel_presets`)

- The config maps through `zoo.convert.hf_funnel.zoo_config`, as `python -m zoo.convert
  hf-funnel` maps it: Hugging Face's pooling semantics, the decoder's residual, ... The
  decoder is built for `FunnelModel` and the task models on it (masked LM, pre-training,
  token classification, question answering), not for `FunnelBaseModel` and the sequence
  classification and multiple-choice models on it. The backbone takes any length (see
  `zoo.keras3.models.encoder.EncoderModel`); its graph is built first for the config's
  `max_position_embeddings` (512 by default) or `Backbone.from_preset(path, seq_length=128)`.
- The weights are read from the directory's safetensors files (single or sharded, with
  safetensors' numpy API: no TensorFlow checkpoint reader) and checked by the converter's
  rules: each encoder weight is used once with its shape, and Hugging Face's missing query
  bias is 0. A classification head's `linear_hidden` (`FunnelForSequenceClassification`,
  `FunnelForMultipleChoice`) is the backbone's pooler; `TextClassifier.from_preset` on a
  `FunnelForSequenceClassification` without `num_classes` takes its label count and
  `linear_out` as its logits layer (`load_text_classifier`). Other heads are left out.
- The tokenizer is the vocabulary with the settings of the tokenizer files as transformers 5
  reads them (`zoo.convert.tokenizer_files.keras_hub_settings`), a `FunnelTokenizer` with
  transformers' rules (`zoo.keras3.models.tokenizer`): transformers' ids on any text. The
  preprocessors trim text pairs as transformers does (`zoo.keras3.models.packing`).

BERT directories keep keras-hub's own converter (`BertBackbone`, keras-hub's BERT tasks), with
the tokenizer and preprocessors of `zoo.keras3.models.bert` (keras-hub's, giving transformers'
ids and trimming pairs as transformers), the tokenizer built from the same settings for every
layout of tokenizer files (keras-hub's own reads vocab.txt and `do_lower_case` only), and
`sequence_length=` honoured by every task's `from_preset` (keras-hub's own loader drops it).
"""

import os
import types

import numpy as np

from zoo.convert import hf_funnel
from zoo.convert import tokenizer_files
from zoo.convert import weights as weight_formats
from zoo.keras3.models.funnel.funnel_presets import published_presets

# The Funnel models of transformers without the decoder (on `FunnelBaseModel`).
WITHOUT_DECODER = ("FunnelBaseModel", "FunnelForSequenceClassification", "FunnelForMultipleChoice")
ENCODER_PREFIXES = ("embeddings.", "encoder.", "decoder.")
DEFAULT_SEQ_LENGTH = 512


def _fetch(preset, names):
  """The local directory holding those of `names` the preset has (downloaded first for `hf://`
  handles, into the Hugging Face cache, as keras-hub does); None when it has none of them."""
  from keras_hub.src.utils.preset_utils import check_file_exists
  from keras_hub.src.utils.preset_utils import get_file
  directory = None
  for name in names:
    if check_file_exists(preset, name):
      directory = os.path.dirname(get_file(preset, name))
  return directory


def with_decoder(config):
  """Whether the model of a Funnel `config.json` has the decoder (see the module docstring)."""
  architectures = set(config.get("architectures") or ())
  return bool(config.get("num_decoder_layers")) and not architectures & set(WITHOUT_DECODER)


def convert_backbone_config(transformers_config):
  """`FunnelBackbone` arguments of a Funnel `config.json`."""
  config = hf_funnel.check_hf_config(transformers_config)
  seq_length = int(config.get("max_position_embeddings") or DEFAULT_SEQ_LENGTH)
  return dict(encoder_config=hf_funnel.zoo_config(config, seq_length, with_decoder(config)))


def _weight_files(preset):
  """The local directory of the preset's weights: the safetensors index and every shard it
  names, or the single file."""
  from keras_hub.src.utils.preset_utils import check_file_exists
  from keras_hub.src.utils.preset_utils import load_json
  safetensors, index = weight_formats.SAFETENSORS
  if check_file_exists(preset, index):
    return _fetch(preset, [index, *sorted(set(load_json(preset, index)["weight_map"].values()))])
  directory = _fetch(preset, [safetensors])
  if directory is None:
    raise ValueError(f"{preset}: no {safetensors} or {index}; keras-hub reads Hugging Face weights from "
                     "safetensors files")
  return directory


def convert_weights(backbone, loader, transformers_config):
  """Sets the backbone's encoder from the preset's safetensors files; see the module docstring."""
  directory = _weight_files(loader.preset)
  all_weights = hf_funnel.read_hf_weights(directory)
  weights = all_weights
  if any(name.startswith("funnel.") for name in weights):   # a task model: its encoder is `funnel.`
    weights = {name[len("funnel."):]: value for name, value in weights.items() if name.startswith("funnel.")}
  weights = {name: value for name, value in weights.items() if name.startswith(ENCODER_PREFIXES)}
  config = backbone.encoder_config
  skip = () if config.num_decoder_layers else ("decoder.",)
  source = hf_funnel.weights_source(directory)
  hf_funnel.assign_hf_weights(backbone.encoder, weights, source=source, skip_prefixes=skip)
  head = classification_head(all_weights, source)
  if head is not None:   # FunnelForSequenceClassification / ForMultipleChoice: linear_hidden is the pooler
    backbone.encoder.get_layer("pooler").set_weights(head["pooler"])


def classification_head(weights, source):
  """`{"pooler": [kernel, bias], "logits": [kernel, bias]}` of a Funnel classification head
  (`FunnelClassificationHead`: `linear_hidden`, tanh, dropout, `linear_out` on the first token of
  the encoder's output, as the zoo's pooler and a classifier's logits), or None without one."""
  names = [f"{hf_funnel.CHOICE_HEAD}{layer}.{weight}" for layer in ("linear_hidden", "linear_out")
           for weight in ("weight", "bias")]
  if not any(name in weights for name in names):
    return None
  missing = [name for name in names if name not in weights]
  if missing:
    raise ValueError(f"{source}: the classification head lacks {', '.join(missing)}")
  hidden_weight, hidden_bias, out_weight, out_bias = (np.asarray(weights[name], np.float32) for name in names)
  return dict(pooler=[hidden_weight.T, hidden_bias], logits=[out_weight.T, out_bias])


def num_labels(config):
  """The number of classes of a Hugging Face `...ForSequenceClassification` config.json."""
  return len(config["id2label"]) if config.get("id2label") else int(config.get("num_labels", 2))


def load_text_classifier(loader, cls, load_weights, load_task_weights, **kwargs):
  """A `FunnelTextClassifier` of a Funnel directory: a `FunnelForSequenceClassification`'s
  has its number of classes and trained head unless `num_classes` asks for a new one (keras-hub's rule
  for classifier presets); any other Funnel directory needs `num_classes`."""
  from keras_hub.src.utils.preset_utils import PresetLoader
  architectures = loader.config.get("architectures") or ()
  trained = "FunnelForSequenceClassification" in architectures
  if not trained and kwargs.get("num_classes") is None:
    raise ValueError(f"{loader.preset}: a {'/'.join(architectures) or 'Funnel'} checkpoint has no sequence "
                     "classification head: pass num_classes for a new one")
  kwargs.setdefault("num_classes", num_labels(loader.config))
  task = PresetLoader.load_task(loader, cls, load_weights, load_task_weights, **kwargs)
  if trained and load_weights and load_task_weights:
    weights = hf_funnel.read_hf_weights(_weight_files(loader.preset))
    head = classification_head(weights, loader.preset)
    task.output_dense.set_weights(head["logits"])
  return task


def _tokenizer_settings(preset, funnel):
  """The zoo's keras-hub tokenizer arguments of the preset's tokenizer files (vocab.txt or a WordPiece
  tokenizer.json, tokenizer_config.json, special_tokens_map.json) giving transformers' ids: transformers'
  rules (`zoo.keras3.models.tokenizer`) with the files' settings (`tokenizer_files.keras_hub_settings`)."""
  directory = _fetch(preset, [hf_funnel.CONFIG_FILE, *tokenizer_files.TOKENIZER_FILES])
  return dict(tokenizer_files.keras_hub_settings(directory, funnel=funnel), rules="transformers")


def convert_tokenizer(cls, preset, **kwargs):
  """`cls` (the backbone's tokenizer class) with the preset's vocabulary and tokenizer settings."""
  return cls(**{**_tokenizer_settings(preset, funnel=True), **kwargs})


def bert_converter():
  """keras-hub's own BERT converter, whose tokenizer is `zoo.keras3.models.bert.BertTokenizer` (keras-hub's
  `BertTokenizer` giving transformers' ids) with the settings of every layout of tokenizer files as
  transformers 5 reads them (`tokenizer_files.keras_hub_settings`): the vocabulary from tokenizer.json or
  vocab.txt, accents stripped or kept as `strip_accents` says (keras-hub's own reads vocab.txt and
  do_lower_case only), CJK characters split or not, the added tokens kept whole."""
  from keras_hub.src.utils.preset_utils import check_file_exists
  from keras_hub.src.utils.preset_utils import load_json
  from keras_hub.src.utils.transformers import convert_bert

  from zoo.keras3.models.bert import BertTokenizer

  def bert_tokenizer(cls, preset, **kwargs):
    has_config = check_file_exists(preset, tokenizer_files.TOKENIZER_CONFIG)
    config = load_json(preset, tokenizer_files.TOKENIZER_CONFIG) if has_config else {}
    if "XLMRoberta" in (config.get("tokenizer_class") or ""):   # SentencePiece, which keras-hub's reads
      return convert_bert.convert_tokenizer(cls, preset, **kwargs)
    settings = _tokenizer_settings(preset, funnel=False)
    names = settings.pop("special_tokens_names")
    renamed = {f"{role}_token": token for role, token in names.items()
               if role != "unk" and token != tokenizer_files.BERT_NAMES[role]}
    if renamed:
      raise tokenizer_files.TokenizerFilesError(
          f"{preset}: {tokenizer_files.TOKENIZER_CONFIG} or {tokenizer_files.SPECIAL_TOKENS_MAP} name "
          f"{renamed}; keras-hub's BertTokenizer packs with [CLS], [SEP], [PAD] and [MASK]")
    settings.pop("clean_text")   # BertTokenizer's is always true
    tokenizer_class = cls if issubclass(cls, BertTokenizer) else BertTokenizer
    return tokenizer_class(**{**settings, "oov_token": names["unk"], **kwargs})

  names = {name: getattr(convert_bert, name) for name in dir(convert_bert) if not name.startswith("_")}
  return types.SimpleNamespace(**{**names, "convert_tokenizer": bert_tokenizer})


def masked_lm_head(preset, config):
  """`(mlm_transform, output bias)` of a `FunnelForMaskedLM` directory's head (the single projection tied
  to the word embeddings, and its bias), or None for any other Funnel model (the task's head starts
  random, as keras-hub's own masked-LM tasks do on a directory without one)."""
  if "FunnelForMaskedLM" not in (config.get("architectures") or ()):
    return None
  directory = _weight_files(preset)
  weights = hf_funnel.read_hf_weights(directory)
  source = hf_funnel.weights_source(directory)
  tied = weights.get(f"{hf_funnel.MASKED_LM_HEAD}weight")
  table = weights.get("funnel.embeddings.word_embeddings.weight")
  if tied is not None and table is not None and tied.shape == table.shape and (tied != table).any():
    raise ValueError(f"{source}: lm_head.weight is not tied to the word embeddings "
                     "(tie_word_embeddings=false): the zoo's masked-LM head shares the embedding table")
  bias = weights.get(f"{hf_funnel.MASKED_LM_HEAD}bias")
  if bias is None:
    raise ValueError(f"{source}: a FunnelForMaskedLM without lm_head.bias")
  return False, bias


def load_masked_lm(loader, cls, load_weights, load_task_weights, **kwargs):
  """A `FunnelMaskedLM` (`zoo.keras3.models.funnel`) of a Funnel directory: the backbone and preprocessor as
  keras-hub loads any task's, and a `FunnelForMaskedLM`'s head with its weights (`masked_lm_head`)."""
  from keras_hub.src.utils.preset_utils import PresetLoader
  head = masked_lm_head(loader.preset, loader.config) if load_task_weights else None
  if head is not None:
    kwargs.setdefault("mlm_transform", head[0])
  task = PresetLoader.load_task(loader, cls, load_weights, load_task_weights, **kwargs)
  if head is not None and load_weights:
    if task.mlm_transform:
      raise ValueError(f"{loader.preset}: a FunnelForMaskedLM's head has no transform: leave out "
                       "mlm_transform")
    task.masked_lm_head.output_bias.assign(head[1])
  return task


def load_bert_task(loader, cls, load_weights, load_task_weights, load, **kwargs):
  """A keras-hub BERT task of a Hugging Face BERT directory as keras-hub's loader `load` makes it, with its
  preprocessor packing to `sequence_length` when it is given (keras-hub's own loader drops the argument)."""
  length = kwargs.pop("sequence_length", None)
  task = load(loader, cls, load_weights, load_task_weights, **kwargs)
  if length is None:
    return task
  positions = task.backbone.max_sequence_length
  if not 1 <= int(length) <= positions:
    raise ValueError(f"{loader.preset}: sequence_length={length}; the BERT checkpoint has {positions} "
                     "positions (config.json max_position_embeddings)")
  if task.preprocessor is None:
    raise ValueError(f"{loader.preset}: sequence_length={length} is the preprocessor's length, and this "
                     "task has no preprocessor")
  task.preprocessor.sequence_length = int(length)
  return task


def funnel_converter():
  """The converter keras-hub's `TransformersPresetLoader` calls for model_type "funnel"."""
  from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
  return types.SimpleNamespace(backbone_cls=FunnelBackbone, convert_backbone_config=convert_backbone_config,
                               convert_weights=convert_weights, convert_tokenizer=convert_tokenizer)






def install():
  """Makes keras-hub's loader of Hugging Face directories use this module's converters: Funnel's,
  and BERT's with the tokenizer files transformers 5 writes (once; the other model types keep
  keras-hub's); registers the authors' releases (`zoo.keras3.models.funnel.funnel_presets`) as
  `FunnelBackbone` presets."""
  from keras_hub.src.utils.preset_utils import PresetLoader
  from keras_hub.src.utils.transformers.preset_loader import TransformersPresetLoader
  if getattr(TransformersPresetLoader, "zoo_converters", None) is not None:
    return
  from zoo.keras3.models.bert import PREPROCESSORS as BERT_PREPROCESSORS
  converters = {"funnel": funnel_converter(), "bert": bert_converter()}
  keras_hub_init = TransformersPresetLoader.__init__
  keras_hub_load_task = TransformersPresetLoader.load_task
  keras_hub_load_preprocessor = TransformersPresetLoader.load_preprocessor

  def load_task(self, cls, load_weights, load_task_weights, **kwargs):
    from zoo.keras3.models.funnel.funnel_masked_lm import FunnelMaskedLM
    from zoo.keras3.models.funnel.funnel_text_classifier import FunnelTextClassifier
    if self.converter is converters["funnel"] and issubclass(cls, FunnelMaskedLM):
      return load_masked_lm(self, cls, load_weights, load_task_weights, **kwargs)
    if self.converter is converters["funnel"] and issubclass(cls, FunnelTextClassifier):
      return load_text_classifier(self, cls, load_weights, load_task_weights, **kwargs)
    if self.converter is converters["bert"]:
      return load_bert_task(self, cls, load_weights, load_task_weights, keras_hub_load_task, **kwargs)
    return keras_hub_load_task(self, cls, load_weights, load_task_weights, **kwargs)

  def load_preprocessor(self, cls, config_file=None, **kwargs):
    if self.converter is converters["bert"]:   # BERT preprocessors trimming pairs as transformers
      cls = BERT_PREPROCESSORS.get(cls, cls)
    return keras_hub_load_preprocessor(self, cls, config_file, **kwargs)

  def __init__(self, preset, config):
    converter = converters.get(config.get("model_type"))
    if converter is None:
      keras_hub_init(self, preset, config)
      return
    PresetLoader.__init__(self, preset, config)
    self.converter = converter

  TransformersPresetLoader.__init__ = __init__
  TransformersPresetLoader.load_task = load_task
  TransformersPresetLoader.load_preprocessor = load_preprocessor
  TransformersPresetLoader.zoo_converters = converters
  from keras_hub.src.utils.preset_utils import register_presets

  from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
  register_presets(published_presets(), FunnelBackbone)
