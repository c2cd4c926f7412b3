"""The zoo in keras-hub: its classes built from a zoo preset or a model directory.

Used the way keras-hub's BERT is:

    import zoo.keras3.hub as zoo_hub

    classifier = zoo_hub.classifier_from_model_dir("runs/sst2", num_classes=2)
    classifier.fit(x=["a good film", "a bad film"], y=[1, 0], batch_size=2)
    classifier.predict(["a wonderful film"])
    classifier.save_to_preset("presets/funnel_sst2")
    keras_hub.models.TextClassifier.from_preset("presets/funnel_sst2")   # a FunnelTextClassifier
    masked_lm = zoo_hub.masked_lm_from_preset("funnel_b4_4_4_decoder", vocab, seq_length=128)

- `FAMILIES`: each family's keras-hub classes (`zoo.keras3.models.funnel`,
  `zoo.keras3.models.transformer`: backbone, tokenizer, preprocessors, text classifier,
  masked LM, ELECTRA, text embedder).
- `backbone_from_model_dir`, `classifier_from_model_dir`: a zoo model directory's encoder
  (`zoo.keras3.load_model_dir`) as a backbone, or a text classifier with a classification
  run's trained head.
- `embedder_from_model_dir`: a text embedder (`zoo.keras3.models.text_embedder`) on a model
  directory's encoder, pooling and normalising as an `embed` run does.
- `classifier_from_preset`, `embedder_from_preset`, `masked_lm_from_preset`, `electra_from_preset`:
  a task with its preprocessor on a zoo preset's encoder (`zoo.presets`), random weights.

Imports keras-hub, and through it TensorFlow for the tokenizer's string ops (tf.data
preprocessing, as in every keras-hub text model); the encoder runs on Keras' backend.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import numpy as np

from zoo.keras3.loading import DEFAULT_SPECIAL_TOKENS
from zoo.keras3.loading import LoadedModelDir
from zoo.keras3.loading import load_model_dir
from zoo.keras3.models.backbone import ZooBackbone
from zoo.keras3.models.electra import ZooElectra
from zoo.keras3.models.electra import electra_generator_config
from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
from zoo.keras3.models.funnel.funnel_electra import FunnelElectra
from zoo.keras3.models.funnel.funnel_electra import FunnelElectraPreprocessor
from zoo.keras3.models.funnel.funnel_masked_lm import FunnelMaskedLM
from zoo.keras3.models.funnel.funnel_masked_lm import FunnelMaskedLMPreprocessor
from zoo.keras3.models.funnel.funnel_text_classifier import FunnelTextClassifier
from zoo.keras3.models.funnel.funnel_text_classifier import FunnelTextClassifierPreprocessor
from zoo.keras3.models.funnel.funnel_text_embedder import FunnelTextEmbedder
from zoo.keras3.models.funnel.funnel_text_embedder import FunnelTextEmbedderPreprocessor
from zoo.keras3.models.funnel.funnel_tokenizer import FunnelTokenizer
from zoo.keras3.models.masked_lm import ZooMaskedLM
from zoo.keras3.models.text_classifier import ZooTextClassifier
from zoo.keras3.models.text_embedder import ZooTextEmbedder
from zoo.keras3.models.tokenizer import ZooTokenizer
from zoo.keras3.models.transformer.transformer_backbone import TransformerBackbone
from zoo.keras3.models.transformer.transformer_electra import TransformerElectra
from zoo.keras3.models.transformer.transformer_electra import TransformerElectraPreprocessor
from zoo.keras3.models.transformer.transformer_masked_lm import TransformerMaskedLM
from zoo.keras3.models.transformer.transformer_masked_lm import TransformerMaskedLMPreprocessor
from zoo.keras3.models.transformer.transformer_text_classifier import TransformerTextClassifier
from zoo.keras3.models.transformer.transformer_text_classifier import TransformerTextClassifierPreprocessor
from zoo.keras3.models.transformer.transformer_text_embedder import TransformerTextEmbedder
from zoo.keras3.models.transformer.transformer_text_embedder import TransformerTextEmbedderPreprocessor
from zoo.keras3.models.transformer.transformer_tokenizer import TransformerTokenizer
from zoo.model_dir import MODEL_ROOT
from zoo.model_dir import ModelDir
from zoo.named_weights import checkpoint_arrays
from zoo.named_weights import copy_weights

# Each family's keras-hub classes, by `zoo.presets` family name.
FAMILIES = {
    "funnel": types.SimpleNamespace(
        backbone=FunnelBackbone, tokenizer=FunnelTokenizer,
        classifier_preprocessor=FunnelTextClassifierPreprocessor, classifier=FunnelTextClassifier,
        masked_lm_preprocessor=FunnelMaskedLMPreprocessor, masked_lm=FunnelMaskedLM,
        electra_preprocessor=FunnelElectraPreprocessor, electra=FunnelElectra,
        embedder_preprocessor=FunnelTextEmbedderPreprocessor, embedder=FunnelTextEmbedder),
    "transformer": types.SimpleNamespace(
        backbone=TransformerBackbone, tokenizer=TransformerTokenizer,
        classifier_preprocessor=TransformerTextClassifierPreprocessor, classifier=TransformerTextClassifier,
        masked_lm_preprocessor=TransformerMaskedLMPreprocessor, masked_lm=TransformerMaskedLM,
        electra_preprocessor=TransformerElectraPreprocessor, electra=TransformerElectra,
        embedder_preprocessor=TransformerTextEmbedderPreprocessor, embedder=TransformerTextEmbedder),
}


def backbone_from_model_dir(path: str, **overrides: Any) -> tuple[ZooBackbone, LoadedModelDir]:
  """The backbone of a zoo model directory, with its weights, and the `LoadedModelDir`."""
  loaded = load_model_dir(path, **overrides)
  backbone_class = FAMILIES[loaded.family].backbone
  backbone = backbone_class(loaded.encoder_config, dtype=overrides.get("dtype"))
  copy_weights(loaded.encoder, backbone.encoder)
  return backbone, loaded


def not_wordpiece(kind: str) -> str:
  return (f"the directory's tokenizer is a {kind} model; the Keras 3 edition's keras-hub tokenizers are "
          "WordPiece: backbone_from_model_dir gives its encoder, to run on ids from "
          "zoo.text.SentencePieceEncoder or from the directory's export")


def tokenizer_from_loaded(loaded: Any) -> ZooTokenizer:
  """The keras-hub tokenizer of a `LoadedModelDir`'s vocabulary and tokenizer settings: the ids of the
  directory's `zoo.text.TextEncoder` (`rules="bert"`, its `max_chars_per_word`).

  Raises:
    ValueError: a SentencePiece directory: the zoo's keras-hub tokenizers are WordPiece (its
      backbone loads; tokenize with the directory's own exported model or `zoo.text`).
  """
  if loaded.tokenizer_kind != "wordpiece":
    raise ValueError(not_wordpiece(loaded.tokenizer_kind))
  tokenizer_class = FAMILIES[loaded.family].tokenizer
  return tokenizer_class(vocabulary=loaded.vocab, lowercase=loaded.lower_case,
                         special_tokens_names=loaded.special_tokens, rules="bert",
                         max_chars_per_word=loaded.max_chars_per_word)


# The tasks of `tpu.train` whose model is a sequence classifier: its `logits` layer is this
# classifier's head (`zoo.models.SequenceClassifier`: dropout, then one dense layer on the pooled output).
SEQUENCE_CLASSIFIER_TASKS = ("classify", "regress")


# The heads of the other tasks, none of which keras-hub has a task class for (its text tasks
# are TextClassifier, MaskedLM, CausalLM and Seq2SeqLM).
OTHER_HEADS = {
    "tag": "a token-classification head (a label for every token), and keras-hub has no "
           "token-classification task",
    "squad": "a question-answering head (start and end logits over the tokens), and keras-hub has no "
             "question-answering task",
    "mlm": "a masked-LM head: keras_hub.models.MaskedLM.from_preset(path) (after import zoo.keras3) gives "
           "the run's masked LM with its trained head",
    "electra": "a generator and a discriminator: its discriminator is the encoder (and "
               "keras_hub.models.MaskedLM.from_preset(path) puts a new masked-LM head on it)",
}


def not_a_classifier(path: str, task: str | None) -> str:
  """Why a directory without a sequence classifier loads as a text classifier only with `num_classes`."""
  what = f"a {task!r} run has {OTHER_HEADS.get(task, 'no classifier head')}" if task else (
      "converted weights have no task head")
  return (f"{path}: {what}; no text classifier head to load. backbone_from_model_dir gives its encoder with "
          "the trained weights (and its SavedModel export the whole model); pass num_classes for a new text "
          "classifier on that encoder")


def trained_head(path: str, num_classes: int) -> list[np.ndarray] | None:
  """`[kernel [D, C], bias [C]]` of a classification run's trained logits layer, or None when the
  directory is no such run (a converted checkpoint, another task) or its classes are not `num_classes`."""
  model_dir = ModelDir(path)
  settings = model_dir.read_config()
  if settings.get("task") not in SEQUENCE_CLASSIFIER_TASKS or settings.get("num_classes") != num_classes:
    return None
  prefix = model_dir.latest_checkpoint()
  if prefix is None:
    raise FileNotFoundError(f"{path} holds no checkpoint in {model_dir.checkpoint_dir}")
  arrays = checkpoint_arrays(prefix, MODEL_ROOT)
  return [arrays["logits/kernel"], arrays["logits/bias"]]


def classifier_from_model_dir(path: str, num_classes: int | None = None, activation: str | None = None,
                              dropout: float = 0.1, **overrides: Any) -> ZooTextClassifier:
  """A keras-hub text classifier (with its preprocessor) on a zoo model directory's encoder.

  A classification run's classifier carries its trained head, so it predicts as the run
  does (and as its SavedModel export). `num_classes` defaults to a classification run's;
  any other directory needs it (a converted checkpoint, a run of another task, whose head
  keras-hub has no task for: the error says so), and any other number of classes starts a
  new head (a warning says so for a classification run). `overrides` go to the encoder
  (e.g. `dropout`, `seq_length`, `dtype`).
  """
  settings = ModelDir(path).read_config()
  kind = (settings.get("tokenizer") or {}).get("kind", "wordpiece")
  if kind != "wordpiece":
    raise ValueError(not_wordpiece(kind))
  task = settings.get("task")
  run_classes = settings.get("num_classes") if task in SEQUENCE_CLASSIFIER_TASKS else None
  if not (num_classes or run_classes):
    raise ValueError(not_a_classifier(path, task))
  backbone, loaded = backbone_from_model_dir(path, **overrides)
  classes = int(num_classes or run_classes or 0)   # one of them is set (checked above)
  family = FAMILIES[loaded.family]
  preprocessor_class, classifier_class = family.classifier_preprocessor, family.classifier
  preprocessor = preprocessor_class(tokenizer_from_loaded(loaded), sequence_length=loaded.seq_length,
                                    truncate=loaded.truncator)
  classifier = classifier_class(backbone, classes, preprocessor=preprocessor, activation=activation,
                                dropout=dropout)
  head = trained_head(path, classes)
  if head is not None:
    classifier.output_dense.set_weights(head)
  elif run_classes:
    import warnings
    warnings.warn(f"{path} is a run of {run_classes} classes; a classifier of {classes} starts a new, "
                  "random head", stacklevel=2)
  return classifier


# The task of `tpu.train` whose model is a text embedder (`tpu.tasks.embedding`, `zoo.models.TextEmbedder`).
EMBED_TASK = "embed"


def embed_settings(settings: dict[str, Any]) -> dict[str, Any]:
  """`{pooling_mode, normalize}` of an `embed` run's config.json (its `pooling` and `normalize`
  settings); `{}` for any other directory."""
  if settings.get("task") != EMBED_TASK:
    return {}
  return dict(pooling_mode=settings.get("pooling", "mean"), normalize=bool(settings.get("normalize", True)))


def embedder_from_model_dir(path: str, pooling_mode: str | None = None, normalize: bool | None = None,
                            **overrides: Any) -> ZooTextEmbedder:
  """A keras-hub text embedder (with its preprocessor, packing to the directory's length) on a zoo
  model directory's encoder.

  An `embed` run's embedder pools and normalises as the run does (its `pooling` and `normalize`
  settings), so it gives the vectors of the run's model and of its export's `embed` signature;
  `pooling_mode` ("cls", "mean" or "max") and `normalize` override them. Any other directory (a
  converted checkpoint, another task's run: its encoder, any head left out) takes keras-hub's
  defaults, "mean" and True. `overrides` go to the encoder (e.g. `seq_length`, `dtype`).
  """
  settings = ModelDir(path).read_config()
  kind = (settings.get("tokenizer") or {}).get("kind", "wordpiece")
  if kind != "wordpiece":
    raise ValueError(not_wordpiece(kind))
  run = embed_settings(settings)
  backbone, loaded = backbone_from_model_dir(path, **overrides)
  family = FAMILIES[loaded.family]
  preprocessor = family.embedder_preprocessor(tokenizer_from_loaded(loaded),
                                              sequence_length=loaded.seq_length, truncate=loaded.truncator)
  return family.embedder(backbone, preprocessor=preprocessor,
                         pooling_mode=pooling_mode or run.get("pooling_mode", "mean"),
                         normalize=run.get("normalize", True) if normalize is None else normalize)


def check_special_tokens(vocab: Sequence[str], special_tokens: dict[str, str] | None = None) -> None:
  """Raises a `ValueError` naming the `special_tokens` argument when the vocabulary lacks one of the
  special tokens (default BERT's `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`), with the names to pass
  when it holds Funnel's `<pad>`-style ones."""
  from zoo.convert.tokenizer_files import FUNNEL_NAMES
  names = {**DEFAULT_SPECIAL_TOKENS, **(special_tokens or {})}
  tokens = set(vocab)
  missing = {role: token for role, token in names.items() if token not in tokens}
  if not missing:
    return
  hint = ""
  if all(token in tokens for token in FUNNEL_NAMES.values()):
    hint = f" This vocabulary has Funnel's: pass special_tokens={FUNNEL_NAMES}."
  raise ValueError(f"the vocabulary ({len(vocab)} tokens) lacks the special token(s) {missing}: name the "
                   f"tokens it uses for these roles with special_tokens={{role: token}} (roles pad, unk, "
                   f"cls, sep, mask).{hint}")


def _preset_parts(preset: str, vocab: Sequence[str], seq_length: int, lower_case: bool,
                  special_tokens: dict[str, str] | None, overrides: dict[str, Any]
                  ) -> tuple[Any, ZooBackbone, ZooTokenizer]:
  """`(the family's classes, backbone, tokenizer)` of a zoo preset's encoder with random weights, over
  `vocab` at `seq_length`; `overrides` are encoder arguments over the preset's, and `dtype`."""
  from zoo import presets
  check_special_tokens(vocab, special_tokens)
  chosen = presets.get(preset)
  overrides = dict(overrides)
  dtype = overrides.pop("dtype", None)
  config = chosen.encoder_config(**{**overrides, "vocab_size": len(vocab), "seq_length": seq_length})
  family = FAMILIES[chosen.family]
  tokenizer = family.tokenizer(vocabulary=list(vocab), lowercase=lower_case,
                               special_tokens_names=special_tokens)
  return family, family.backbone(config, dtype=dtype), tokenizer


def classifier_from_preset(preset: str, vocab: Sequence[str], num_classes: int, seq_length: int,
                           lower_case: bool = True, special_tokens: dict[str, str] | None = None,
                           activation: str | None = None, dropout: float = 0.1,
                           **overrides: Any) -> ZooTextClassifier:
  """A keras-hub text classifier on a zoo preset's encoder (`zoo.presets`) with random weights.

  `vocab`: the WordPiece tokens (index = id), which set the vocabulary size;
  `special_tokens`: their names by role (default BERT's `[CLS]`, ...); `overrides`:
  encoder arguments over the preset's.
  """
  family, backbone, tokenizer = _preset_parts(preset, vocab, seq_length, lower_case, special_tokens,
                                              overrides)
  preprocessor = family.classifier_preprocessor(tokenizer, sequence_length=seq_length)
  return family.classifier(backbone, num_classes, preprocessor=preprocessor, activation=activation,
                           dropout=dropout)


def embedder_from_preset(preset: str, vocab: Sequence[str], seq_length: int, pooling_mode: str = "mean",
                         normalize: bool = True, lower_case: bool = True,
                         special_tokens: dict[str, str] | None = None, **overrides: Any) -> ZooTextEmbedder:
  """A keras-hub text embedder on a zoo preset's encoder (`zoo.presets`) with random weights.

  `vocab`, `special_tokens`, `overrides`: as for `classifier_from_preset`; `pooling_mode` and
  `normalize`: `ZooTextEmbedder`'s.
  """
  family, backbone, tokenizer = _preset_parts(preset, vocab, seq_length, lower_case, special_tokens,
                                              overrides)
  preprocessor = family.embedder_preprocessor(tokenizer, sequence_length=seq_length)
  return family.embedder(backbone, preprocessor=preprocessor, pooling_mode=pooling_mode, normalize=normalize)


def _pretraining_parts(kind: str, preset: str, vocab: Sequence[str], seq_length: int, lower_case: bool,
                       special_tokens: dict[str, str] | None, mask_selection_length: int | None,
                       overrides: dict[str, Any]) -> tuple[type, ZooBackbone, Any]:
  """`(task class, backbone, preprocessor)` of a pre-training task (`kind`: "masked_lm" or "electra") on a
  zoo preset's encoder with random weights; see `masked_lm_from_preset`."""
  family, backbone, tokenizer = _preset_parts(preset, vocab, seq_length, lower_case, special_tokens,
                                              overrides)
  selected = mask_selection_length or max(1, round(0.15 * seq_length))
  preprocessor = getattr(family, f"{kind}_preprocessor")(tokenizer, sequence_length=seq_length,
                                                         mask_selection_length=selected)
  return getattr(family, kind), backbone, preprocessor


def masked_lm_from_preset(preset: str, vocab: Sequence[str], seq_length: int, lower_case: bool = True,
                          special_tokens: dict[str, str] | None = None, activation: str | None = None,
                          mlm_transform: bool = True, mask_selection_length: int | None = None,
                          **overrides: Any) -> ZooMaskedLM:
  """A masked-LM task with its preprocessor on a zoo preset's encoder (`zoo.presets`), random weights.

  `vocab`: the WordPiece tokens (index = id); `special_tokens`: their names by role
  (default BERT's); `mask_selection_length`: the most positions masked per sequence
  (default 15% of `seq_length`, at least 1); `overrides`: encoder arguments over the
  preset's (e.g. `hidden_size`, `dtype`).
  """
  task_class, backbone, preprocessor = _pretraining_parts(
      "masked_lm", preset, vocab, seq_length, lower_case, special_tokens, mask_selection_length, overrides)
  return task_class(backbone, preprocessor=preprocessor, activation=activation, mlm_transform=mlm_transform)


def electra_from_preset(preset: str, vocab: Sequence[str], seq_length: int, lower_case: bool = True,
                        special_tokens: dict[str, str] | None = None, activation: str | None = None,
                        mlm_transform: bool = True, mask_selection_length: int | None = None,
                        generator_overrides: dict[str, Any] | None = None, discriminator_weight: float = 50.0,
                        **overrides: Any) -> ZooElectra:
  """An ELECTRA task with its preprocessor on a zoo preset's encoder (the discriminator), random weights.

  The arguments are `masked_lm_from_preset`'s, plus `generator_overrides` (the generator's encoder
  arguments over `electra_generator_config`'s quarter width) and `discriminator_weight` (λ).
  """
  task_class, backbone, preprocessor = _pretraining_parts(
      "electra", preset, vocab, seq_length, lower_case, special_tokens, mask_selection_length, overrides)
  return task_class(backbone, preprocessor=preprocessor, activation=activation, mlm_transform=mlm_transform,
                    discriminator_weight=discriminator_weight,
                    generator_config=electra_generator_config(backbone.encoder_config, generator_overrides))


def family_of(backbone: ZooBackbone) -> str:
  return next(name for name, family in FAMILIES.items() if isinstance(backbone, family.backbone))
