"""The zoo's encoders in keras-hub: backbones, a WordPiece tokenizer, a preprocessor, a classifier.

Used the way keras-hub's BERT is:

    import zoo.keras3.hub as zoo_hub

    classifier = zoo_hub.classifier_from_model_dir("runs/sst2", num_classes=2)
    classifier.fit(x=["a good film", "a bad film"], y=[1, 0], batch_size=2)
    classifier.predict(["a wonderful film"])
    classifier.save_to_preset("presets/funnel_sst2")
    keras_hub.models.TextClassifier.from_preset("presets/funnel_sst2")   # a FunnelTextClassifier

- `FunnelBackbone`, `TransformerBackbone`: `keras_hub.models.Backbone`s around a
  `zoo.keras3` encoder, with keras-hub's inputs (`token_ids`, `segment_ids`,
  `padding_mask`) and outputs (`sequence_output`, `pooled_output`). The encoder's
  constructor arguments are the backbone's config (`encoder_config`).
- `FunnelTokenizer`, `TransformerTokenizer`: keras-hub WordPiece tokenizers with the
  model directory's vocabulary, casing and special-token names (Funnel checkpoints
  name theirs `<cls>`, `<sep>`, ...).
- `FunnelTextClassifierPreprocessor`, ...: keras-hub's `[CLS] a [SEP] b [SEP]` packing to
  the preprocessor's `sequence_length` (any length the backbone takes: `length_problem`).
- `FunnelTextClassifier`, `TransformerTextClassifier`: dropout and float32 logits on the
  pooled [cls] vector, like keras-hub's `BertTextClassifier`.

`*_from_model_dir` build them from a zoo model directory (`zoo.keras3.load_model_dir`).
Imports keras-hub, and through it TensorFlow for the tokenizer's string ops (tf.data
preprocessing, as in every keras-hub text model); the encoder runs on Keras' backend.
"""

import keras
import keras_hub
from keras import ops

from zoo.choices import recorded_pooling_semantics
from zoo.keras3.encoders import FunnelEncoder
from zoo.keras3.encoders import PerLengthFunctions
from zoo.keras3.encoders import TransformerEncoder
from zoo.keras3.encoders import dtype_policy
from zoo.keras3.loading import DEFAULT_SPECIAL_TOKENS
from zoo.keras3.loading import load_model_dir
from zoo.model_dir import MODEL_ROOT
from zoo.model_dir import ModelDir
from zoo.named_weights import checkpoint_arrays
from zoo.named_weights import copy_weights

# ---------------------------------------------------------------------------------------------
# Backbones.


class ZooBackbone(PerLengthFunctions, keras_hub.models.Backbone):
  """A keras-hub backbone around a `zoo.keras3` encoder (`encoder_class`) built from `encoder_config`.

  Inputs `token_ids`, `segment_ids`, `padding_mask` (`[B, T]`, any length T the encoder takes:
  `length_problem`); outputs `sequence_output` and `pooled_output` (the tanh dense on [cls]).
  `seq_length` is the length the encoder's graph is built for first (a Funnel's has no
  maximum; an absolute position table's maximum is `max_sequence_length`). `dtype` (or a
  `dtype` in `encoder_config`; default the global policy) is the policy of every layer of
  the encoder: "bfloat16" keeps bfloat16 weights, "mixed_bfloat16" float32 weights and
  bfloat16 compute; layer norms, attention scores and probabilities stay float32.
  `word_embeddings`: another backbone's `token_embedding` to share (ELECTRA's generator).
  """

  encoder_class = None

  def __init__(self, encoder_config, dtype=None, seq_length=None, word_embeddings=None, **kwargs):
    encoder_config = dict(encoder_config)
    if seq_length is not None:   # e.g. `from_preset(path, seq_length=128)`
      encoder_config["seq_length"] = seq_length
    configured = encoder_config.pop("dtype", None)   # the backbone's `dtype` wins
    dtype = dtype if dtype is not None else configured
    for key in ("block_sizes", "block_repeats"):
      if encoder_config.get(key) is not None:
        encoder_config[key] = tuple(encoder_config[key])
    if "pooling_semantics" in encoder_config:   # a preset saved when "authors" named Hugging Face's
      encoder_config["pooling_semantics"] = recorded_pooling_semantics(encoder_config["pooling_semantics"])
    policy = dtype_policy(dtype)   # the encoder's layers are built with it
    encoder = self.encoder_class(**encoder_config, dtype=policy, word_embeddings=word_embeddings,
                                 name="encoder")
    # Any length, as keras-hub's BERT takes (the encoder rewires itself per length; see
    # `zoo.keras3.encoders.EncoderModel`).
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
    padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
    outputs = encoder(dict(input_word_ids=token_ids, input_mask=ops.cast(padding_mask, "int32"),
                           input_type_ids=segment_ids))
    super().__init__(
        inputs=dict(token_ids=token_ids, segment_ids=segment_ids, padding_mask=padding_mask),
        outputs=dict(sequence_output=outputs["sequence_output"], pooled_output=outputs["pooled_output"]),
        dtype=policy, **kwargs)
    self.encoder = encoder
    self.encoder_config = encoder_config
    self.token_embedding = encoder.get_embedding_layer()

  @property
  def vocabulary_size(self):
    return self.encoder_config["vocab_size"]

  def length_problem(self, length):
    """Why the backbone cannot run on `length` tokens (naming the lengths it takes), or None."""
    return self.encoder.length_problem(length)

  def get_config(self):
    config = super().get_config()
    config.update(encoder_config=dict(self.encoder_config))
    if self.dtype_policy.name.startswith("mixed_"):
      # Saved in `encoder_config` rather than as the layer's `dtype`: keras-hub 0.32's preset loader
      # cannot read a saved mixed policy back (`Invalid dtype: mixed_bfloat16`), and reads this one (a
      # `dtype` given to `from_preset` still wins). Plain float policies stay keras-hub's `dtype`,
      # which a load casts to the global policy.
      config.update(encoder_config=dict(self.encoder_config, dtype=self.dtype_policy.name), dtype=None)
    return config


@keras.saving.register_keras_serializable(package="zoo")
class FunnelBackbone(ZooBackbone):
  """The Funnel-Transformer (`zoo.keras3.FunnelEncoder`) as a keras-hub backbone."""
  encoder_class = FunnelEncoder


@keras.saving.register_keras_serializable(package="zoo")
class TransformerBackbone(ZooBackbone):
  """BERT, Pre-LN, RealFormer and the relative Transformer (`zoo.keras3.TransformerEncoder`)."""
  encoder_class = TransformerEncoder


# ---------------------------------------------------------------------------------------------
# Tokenizers and preprocessors.


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


@keras.saving.register_keras_serializable(package="zoo")
class FunnelTokenizer(ZooTokenizer):
  backbone_cls = FunnelBackbone


@keras.saving.register_keras_serializable(package="zoo")
class TransformerTokenizer(ZooTokenizer):
  backbone_cls = TransformerBackbone


@keras.saving.register_keras_serializable(package="zoo")
class FunnelTextClassifierPreprocessor(keras_hub.models.TextClassifierPreprocessor):
  backbone_cls = FunnelBackbone
  tokenizer_cls = FunnelTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerTextClassifierPreprocessor(keras_hub.models.TextClassifierPreprocessor):
  backbone_cls = TransformerBackbone
  tokenizer_cls = TransformerTokenizer


# ---------------------------------------------------------------------------------------------
# Classifiers.


class TrainsWhatItReads:
  """A task mixin (before the keras-hub task in the bases): the encoder layers its outputs never read
  (`unused_layers`, name prefixes: a classifier's Funnel decoder, a masked LM's pooler) are not among
  its trainable variables, so its optimizer keeps no slots for them and no backend warns that they
  have no gradients. Their weights stay in the backbone, saved and loaded as before, and train again
  in a task that reads them."""

  unused_layers = ()

  def _unused_ids(self):
    backbones = [getattr(self, name, None) for name in ("backbone", "generator")]
    return {id(variable) for backbone in backbones if backbone is not None
            for layer in backbone.encoder.layers if layer.name.startswith(self.unused_layers)
            for variable in layer.weights}

  def _split(self, trainable):
    unused = self._unused_ids()
    return ([v for v in trainable if id(v) not in unused], [v for v in trainable if id(v) in unused])

  @property
  def trainable_variables(self):
    return self._split(super().trainable_variables)[0]

  @property
  def non_trainable_variables(self):
    return super().non_trainable_variables + self._split(super().trainable_variables)[1]

  @property
  def trainable_weights(self):
    return self._split(super().trainable_weights)[0]

  @property
  def non_trainable_weights(self):
    return super().non_trainable_weights + self._split(super().trainable_weights)[1]


def apply_sequence_length(task, sequence_length=None, seq_length=None):
  """A task's `sequence_length` (keras-hub's name: `TextClassifier.from_preset(path, sequence_length=32)`;
  `seq_length`, the zoo's, means the same): the length its preprocessor packs to, checked against the
  lengths the backbone takes."""
  if sequence_length is not None and seq_length is not None and sequence_length != seq_length:
    raise ValueError(f"sequence_length={sequence_length} and seq_length={seq_length}: give one")
  length = sequence_length if sequence_length is not None else seq_length
  if length is None:
    return
  problem = task.backbone.length_problem(int(length))
  if problem:
    raise ValueError(f"sequence_length={length}: {problem}")
  if task.preprocessor is not None:
    task.preprocessor.sequence_length = int(length)


class ZooTextClassifier(TrainsWhatItReads, PerLengthFunctions, keras_hub.models.TextClassifier):
  """Dropout and a dense layer on the backbone's `pooled_output`: `BertTextClassifier`'s head.

  The logits are float32 under any dtype policy (the zoo's convention). `sequence_length`
  (or `seq_length`): the preprocessor's length (`apply_sequence_length`). A Funnel decoder is
  not trained (the head reads the pooled [cls] of the encoder: `TrainsWhatItReads`).
  """

  unused_layers = ("decoder_layer_",)

  def __init__(self, backbone, num_classes, preprocessor=None, activation=None, dropout=0.1,
               sequence_length=None, seq_length=None, **kwargs):
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.output_dropout = keras.layers.Dropout(dropout, dtype=backbone.dtype_policy,
                                               name="classifier_dropout")
    self.output_dense = keras.layers.Dense(
        num_classes, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        activation=activation, dtype="float32", name="logits")
    inputs = backbone.input
    pooled = self.output_dropout(backbone(inputs)["pooled_output"])
    outputs = self.output_dense(pooled)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.num_classes = num_classes
    self.activation = keras.activations.get(activation)
    self.dropout = dropout
    apply_sequence_length(self, sequence_length, seq_length)

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes, activation=keras.activations.serialize(self.activation),
                  dropout=self.dropout)
    return config


@keras.saving.register_keras_serializable(package="zoo")
class FunnelTextClassifier(ZooTextClassifier):
  backbone_cls = FunnelBackbone
  preprocessor_cls = FunnelTextClassifierPreprocessor


@keras.saving.register_keras_serializable(package="zoo")
class TransformerTextClassifier(ZooTextClassifier):
  backbone_cls = TransformerBackbone
  preprocessor_cls = TransformerTextClassifierPreprocessor


FAMILIES = {
    "funnel": (FunnelBackbone, FunnelTokenizer, FunnelTextClassifierPreprocessor, FunnelTextClassifier),
    "transformer": (TransformerBackbone, TransformerTokenizer, TransformerTextClassifierPreprocessor,
                    TransformerTextClassifier),
}


# ---------------------------------------------------------------------------------------------
# From a zoo model directory.


def backbone_from_model_dir(path, **overrides):
  """The backbone of a zoo model directory, with its weights, and the `LoadedModelDir`."""
  loaded = load_model_dir(path, **overrides)
  backbone_class = FAMILIES[loaded.family][0]
  backbone = backbone_class(loaded.encoder_config, dtype=overrides.get("dtype"))
  copy_weights(loaded.encoder, backbone.encoder)
  return backbone, loaded


def not_wordpiece(kind):
  return (f"the directory's tokenizer is a {kind} model; the Keras 3 edition's keras-hub tokenizers are "
          "WordPiece: backbone_from_model_dir gives its encoder, to run on ids from "
          "zoo.text.SentencePieceEncoder or from the directory's export")


def tokenizer_from_loaded(loaded):
  """The keras-hub tokenizer of a `LoadedModelDir`'s vocabulary and tokenizer settings.

  Raises:
    ValueError: a SentencePiece directory: the zoo's keras-hub tokenizers are WordPiece (its
      backbone loads; tokenize with the directory's own exported model or `zoo.text`).
  """
  if loaded.tokenizer_kind != "wordpiece":
    raise ValueError(not_wordpiece(loaded.tokenizer_kind))
  tokenizer_class = FAMILIES[loaded.family][1]
  return tokenizer_class(vocabulary=loaded.vocab, lowercase=loaded.lower_case,
                         special_tokens_names=loaded.special_tokens)


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


def not_a_classifier(path, task):
  """Why a directory without a sequence classifier loads as a text classifier only with `num_classes`."""
  what = f"a {task!r} run has {OTHER_HEADS.get(task, 'no classifier head')}" if task else (
      "converted weights have no task head")
  return (f"{path}: {what}; no text classifier head to load. backbone_from_model_dir gives its encoder with "
          "the trained weights (and its SavedModel export the whole model); pass num_classes for a new text "
          "classifier on that encoder")


def trained_head(path, num_classes):
  """`[kernel [D, C], bias [C]]` of a classification run's trained logits layer, or None when the
  directory is no such run (a converted checkpoint, another task) or its classes are not `num_classes`."""
  model_dir = ModelDir(path)
  settings = model_dir.read_config()
  if settings.get("task") not in SEQUENCE_CLASSIFIER_TASKS or settings.get("num_classes") != num_classes:
    return None
  arrays = checkpoint_arrays(model_dir.latest_checkpoint(), MODEL_ROOT)
  return [arrays["logits/kernel"], arrays["logits/bias"]]


def classifier_from_model_dir(path, num_classes=None, activation=None, dropout=0.1, **overrides):
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
  num_classes = num_classes or run_classes
  _, _, preprocessor_class, classifier_class = FAMILIES[loaded.family]
  preprocessor = preprocessor_class(tokenizer_from_loaded(loaded), sequence_length=loaded.seq_length)
  classifier = classifier_class(backbone, num_classes, preprocessor=preprocessor, activation=activation,
                                dropout=dropout)
  head = trained_head(path, num_classes)
  if head is not None:
    classifier.output_dense.set_weights(head)
  elif run_classes:
    import warnings
    warnings.warn(f"{path} is a run of {run_classes} classes; a classifier of {num_classes} starts a new, "
                  "random head", stacklevel=2)
  return classifier


def check_special_tokens(vocab, special_tokens=None):
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


def classifier_from_preset(preset, vocab, num_classes, seq_length, lower_case=True, special_tokens=None,
                           activation=None, dropout=0.1, **overrides):
  """A keras-hub text classifier on a zoo preset's encoder (`zoo.presets`) with random weights.

  `vocab`: the WordPiece tokens (index = id), which set the vocabulary size;
  `special_tokens`: their names by role (default BERT's `[CLS]`, ...); `overrides`:
  encoder arguments over the preset's.
  """
  from zoo import presets
  check_special_tokens(vocab, special_tokens)
  chosen = presets.get(preset)
  config = {**chosen.config, **overrides, "vocab_size": len(vocab), "seq_length": seq_length}
  backbone_class, tokenizer_class, preprocessor_class, classifier_class = FAMILIES[chosen.family]
  tokenizer = tokenizer_class(vocabulary=list(vocab), lowercase=lower_case,
                              special_tokens_names=special_tokens)
  preprocessor = preprocessor_class(tokenizer, sequence_length=seq_length)
  return classifier_class(backbone_class(config), num_classes, preprocessor=preprocessor,
                          activation=activation, dropout=dropout)
