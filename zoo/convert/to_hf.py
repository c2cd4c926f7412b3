"""A zoo model directory as a Hugging Face checkpoint that `transformers` loads with no code of ours.

    python -m zoo.convert to-hf MODEL_DIR --out DIR [--dtype float32|bfloat16]

`to_hf(model_dir, out)` reads a training run's directory (`tpu.train`) or a converted
one (`zoo.convert hf-funnel|hf-bert|tf1-bert`) and writes DIR as `save_pretrained`
does, for `transformers.AutoModel*.from_pretrained(DIR)` and
`AutoTokenizer.from_pretrained(DIR)`:

- `config.json` (`model_type`, `architectures`, the label names of a classifier or tagger);
- `model.safetensors` (float32, or bfloat16 with `dtype="bfloat16"`), written with
  safetensors' numpy API (no torch), under the names transformers' PyTorch classes use;
- `vocab.txt`, `tokenizer.json` (built with Hugging Face's `tokenizers`),
  `tokenizer_config.json`, `special_tokens_map.json`: the run's own tokenization;
- `README.md`: a model card with the preset, task, training steps, evaluation results
  and how the directory was converted.

The class follows the run's task: the encoder alone (a directory without a task or
head) is `FunnelModel` (with the decoder) / `FunnelBaseModel`, or `BertModel`; a
masked-LM run or head is `FunnelForMaskedLM` / `BertForMaskedLM`; ELECTRA is
`FunnelForPreTraining` / `ElectraForPreTraining` (the discriminator and its head);
`classify` and `regress` are `...ForSequenceClassification` (`num_labels`, `id2label`,
`problem_type`), `tag` `...ForTokenClassification`, `squad`
`...ForQuestionAnswering` and `multiple_choice` (or a converted directory with a `choice_head`)
`...ForMultipleChoice` (the pooler and the scoring layer; Funnel's `classifier.linear_hidden`
and `linear_out`). A TransformerEncoder with ALBERT's savings (factorized
embeddings, or every layer shared) is transformers' ALBERT (`AlbertModel`,
`AlbertForMaskedLM`, `AlbertFor...`): one layer group when every layer is shared, else a
group per layer, and an identity projection when the embeddings have the model width.

Weights are the importers' entries read backwards (`zoo.convert.rules`), so a Hugging
Face checkpoint converted in and exported again gives back its tensors, name for name;
a directory converted from Hugging Face also gives back the config fields the zoo has
no use for (kept in its `source.json`).

What transformers cannot compute is refused before anything is written, each reason
named (`plan`): RealFormer's residual attention, Pre-LN, the relative Transformer,
a Funnel's factorized embeddings or shared layers, sharing only attention or only the
feed-forward nets, an ALBERT-shaped ELECTRA discriminator, a Funnel pooling with the
zoo's padding semantics, a decoder fed from another layer than Hugging Face's, heads
transformers' classes do not have (a Funnel masked-LM head with BERT's transform, a head
activation other than the encoder's), activations it does not name, and tasks it has no
class for.

Tokenizer: a SentencePiece model directory (`hf-albert`) gets its `spiece.model` and the
`tokenizer.json` of transformers' `AlbertTokenizer` (unigram, its normalizers and
`Metaspace`). A WordPiece one: `FunnelTokenizer` / `BertTokenizer` when they compute the
run's tokenizer (words of at most 100 characters, [CLS]'s token type theirs), else
`PreTrainedTokenizerFast`, which runs `tokenizer.json` as written. A Funnel's [CLS] has
token type 2 in Hugging Face (the zoo's Funnel gives the first token segment 2 whatever
its type id, Hugging Face's the tokens of type 2), so the Funnel tokenizer gives it 2.
"""

import dataclasses
import datetime
import json
import os

import numpy as np

from zoo import presets
from zoo.atomic_files import atomic_path
from zoo.choices import ABSOLUTE
from zoo.choices import AUTHORS_POOLING
from zoo.choices import AUTHORS_TF_POSITIONS
from zoo.choices import FACTORIZED
from zoo.choices import HF_POOLING
from zoo.choices import SHIFT
from zoo.choices import ZOO_POOLING
from zoo.convert.errors import ConversionError
from zoo.convert.rules import exported
from zoo.convert.rules import flat
from zoo.convert.rules import same
from zoo.convert.rules import torch_linear
from zoo.model_dir import CHOICE_HEAD_ROOT
from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import ModelDir
from zoo.model_dir import checkpoint_roots
from zoo.model_dir import encoder_root

DTYPES = ("float32", "bfloat16")
# zoo `activation` -> transformers `hidden_act` (the importers' table, backwards).
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu", "swish": "silu"}
FUNNEL_ATTENTION_TYPES = {FACTORIZED: "factorized", SHIFT: "relative_shift"}
# What each task's model is in transformers, per encoder family ("head": the zoo head it carries).
TASK_HEADS = {"classify": "sequence", "regress": "sequence", "tag": "token", "squad": "span",
              "mlm": "masked_lm", "electra": "discriminator", "multiple_choice": "choice"}
# The heads that score the pooled output (the zoo's pooler travels with them).
POOLED_HEADS = ("sequence", "choice")
ARCHITECTURES = {
    "funnel": dict(encoder="FunnelModel", base="FunnelBaseModel", masked_lm="FunnelForMaskedLM",
                   discriminator="FunnelForPreTraining", sequence="FunnelForSequenceClassification",
                   token="FunnelForTokenClassification", span="FunnelForQuestionAnswering",
                   choice="FunnelForMultipleChoice"),
    "transformer": dict(encoder="BertModel", masked_lm="BertForMaskedLM",
                        discriminator="ElectraForPreTraining", sequence="BertForSequenceClassification",
                        token="BertForTokenClassification",
                        span="BertForQuestionAnswering", choice="BertForMultipleChoice"),
    # A TransformerEncoder with ALBERT's savings: factorized embeddings, every layer shared.
    "albert": dict(encoder="AlbertModel", masked_lm="AlbertForMaskedLM",
                   sequence="AlbertForSequenceClassification", token="AlbertForTokenClassification",
                   span="AlbertForQuestionAnswering", choice="AlbertForMultipleChoice"),
}
# Where each class keeps its encoder ("" for the encoder classes themselves).
PREFIXES = {"FunnelModel": "", "FunnelBaseModel": "", "BertModel": "", "ElectraForPreTraining": "electra.",
            "AlbertModel": ""}
PIPELINE_TAGS = dict(encoder="feature-extraction", base="feature-extraction", masked_lm="fill-mask",
                     discriminator="feature-extraction", sequence="text-classification",
                     token="token-classification", span="question-answering", choice="multiple-choice")
# Fields of transformers' config.json that say nothing about the model (left out of comparisons).
BOOKKEEPING_FIELDS = ("transformers_version", "dtype", "torch_dtype", "_name_or_path")
HF_MAX_CHARS_PER_WORD = 100   # transformers' BertTokenizer / FunnelTokenizer WordPiece
FUNNEL_CLS_TYPE_ID = 2
MASKED_LM_LAYER_NORM_EPSILON = 1e-12   # zoo.models.MaskedLMHead's (Model Garden's MaskedLM)


@dataclasses.dataclass
class Plan:
  """What `to_hf` writes, decided from config.json alone (`plan`).

  `family` and `encoder` (constructor arguments) describe the zoo encoder; `head` is None
  or a key of `TASK_HEADS`' values; `with_decoder` whether the export keeps the Funnel
  decoder; `architecture` the transformers class; `hf_config` its config.json; `left_out`
  what of the zoo model the export does not carry, in words; `changed` what the export
  computes otherwise, as the user asked (`change_pooling`).
  """
  family: str
  encoder: dict
  head: str | None
  with_decoder: bool
  architecture: str
  hf_config: dict
  left_out: list
  changed: list = dataclasses.field(default_factory=list)


def _head_of(settings, roots):
  task = settings.get("task")
  if task:
    if task not in TASK_HEADS:
      raise ConversionError(f"task {task!r} has no transformers class; to-hf exports the tasks "
                            f"{', '.join(TASK_HEADS)} and directories without a task")
    return TASK_HEADS[task]
  if MASKED_LM_ROOT in roots:
    return "masked_lm"
  if DISCRIMINATOR_HEAD_ROOT in roots:
    return "discriminator"
  if CHOICE_HEAD_ROOT in roots:   # a converted ...ForMultipleChoice
    return "choice"
  return None


def _label_fields(settings, head):
  if head not in ("sequence", "token"):
    return {}
  if settings.get("task") == "regress":
    return dict(id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0}, problem_type="regression")
  names = settings.get("label_names") or [str(i) for i in range(int(settings.get("num_classes") or 0))]
  if not names:
    raise ConversionError("config.json has neither label_names nor num_classes for the classifier's labels")
  fields = dict(id2label={str(i): str(name) for i, name in enumerate(names)},
                label2id={str(name): i for i, name in enumerate(names)})
  if head == "sequence":
    fields["problem_type"] = "single_label_classification"
  return fields


def _heads_settings(settings, encoder):
  """(mlm_transform, head_activation) of the directory's heads, as its task builds them."""
  transform = settings.get("mlm_transform")
  activation = settings.get("head_activation") or encoder["activation"]
  return transform, activation


def _sharing_problems(encoder, model):
  problems = []
  if encoder.get("attention_window") is not None:
    problems.append(f"local attention (attention_window={encoder['attention_window']}): transformers' "
                    f"{model} attends to every token")
  sharing = encoder.get("layer_sharing", "none")
  if sharing != "none":
    problems.append(f"cross-layer sharing (layer_sharing={sharing!r}): transformers' {model} has weights of "
                    "its own in every layer")
  return problems


def _is_albert(family, encoder):
  """A TransformerEncoder with ALBERT's savings (factorized embeddings or shared layers): transformers'
  ALBERT classes, not BERT's."""
  return family == "transformer" and (encoder.get("layer_sharing", "none") != "none"
                                      or encoder.get("embedding_width") not in (None, encoder["hidden_size"]))


# What transformers' Funnel (Hugging Face's pooling semantics) computes otherwise than a Funnel with other
# pooling semantics, and on which inputs.
_MIXED_WINDOWS = ("padded inputs whose last real token shares a pooling window with padding (with "
                  "separate_cls and truncate_seq: an odd number of real tokens after [cls]), while inputs "
                  "without padding, or padded in whole windows, compute the same")
POOLING_DIFFERENCES = {
    ZOO_POOLING: "the zoo's pooling semantics (pooling_semantics='zoo': a pooled window is real when any of "
                 "its tokens is, and pools its real tokens only): transformers' Funnel makes such a window "
                 "padding (all its tokens must be real) and pools the padding with it, so outputs differ on "
                 + _MIXED_WINDOWS,
    AUTHORS_POOLING: "the Funnel authors' pooling semantics (pooling_semantics='funnel_authors', what their "
                     "code and the paper's checkpoints compute: a pooled window is real when any of its "
                     "tokens is): transformers' Funnel makes such a window padding (all its tokens must be "
                     "real), so outputs differ on " + _MIXED_WINDOWS,
}


def _funnel_problems(encoder, head, settings, change_pooling=False):
  problems = []
  if encoder.get("residual_attention"):
    problems.append("RealFormer residual attention (residual_attention=True): transformers' Funnel adds no "
                    "previous layer's scores to the attention")
  semantics = encoder.get("pooling_semantics", HF_POOLING)
  if semantics != HF_POOLING and not change_pooling:
    problems.append(POOLING_DIFFERENCES[semantics] + " (pass --change-pooling to export it with "
                    "transformers' semantics anyway, and the model card says so)")
  if encoder.get("position_rules") == AUTHORS_TF_POSITIONS and not encoder["separate_cls"]:
    shifted = ", pooled queries at 1 - 2^b + 2^b·i" if encoder.get("position_encoding") == SHIFT else ""
    problems.append("the authors' TensorFlow position rules without separate_cls (position_rules="
                    "'authors_tf': token 0's position and segment terms zeroed" + shifted
                    + "): transformers' Funnel gives token 0 those terms, so every input, padded or not, "
                    "computes otherwise")
  if encoder.get("embedding_width") not in (None, encoder["hidden_size"]):
    problems.append(f"factorized embeddings (embedding_width={encoder['embedding_width']}): transformers' "
                    "Funnel embeds at the model width")
  problems += _sharing_problems(encoder, "Funnel")
  if encoder.get("position_encoding") not in FUNNEL_ATTENTION_TYPES:
    problems.append(f"position_encoding={encoder.get('position_encoding')!r}: transformers' Funnel computes "
                    f"{' or '.join(FUNNEL_ATTENTION_TYPES)} relative attention only")
  decoder_layers = encoder.get("num_decoder_layers") or 0
  if decoder_layers and head not in POOLED_HEADS:
    sizes = encoder["block_sizes"]
    repeats = encoder.get("block_repeats") or (1,) * len(sizes)
    residual = encoder.get("decoder_residual_layer")
    residual = sizes[0] * repeats[0] - 1 if residual is None else residual
    if residual != sizes[0] - 1:
      problems.append(f"the decoder adds the output of layer application {residual} "
                      f"(decoder_residual_layer): transformers' FunnelModel adds that of application "
                      f"{sizes[0] - 1} (hidden_states[block_sizes[0]], counting repeats)")
  if head in ("masked_lm", "discriminator", "token", "span") and not decoder_layers:
    problems.append(f"a {head} head on an encoder-only Funnel: transformers' heads read the decoder's "
                    "full-length output")
  transform, activation = _heads_settings(settings, encoder)
  if head == "masked_lm" and transform is not False:
    problems.append("the masked-LM head has BERT's dense and layer norm (mlm_transform=true): transformers' "
                    "FunnelForMaskedLM is one projection tied to the word embeddings (pre-train Funnels with "
                    "mlm_transform false, the default for Funnel presets)")
  if head == "discriminator" and activation != encoder["activation"]:
    problems.append(f"the discriminator head's activation {activation!r} differs from the encoder's "
                    f"{encoder['activation']!r}: transformers' FunnelForPreTraining uses hidden_act for both")
  return problems


def _transformer_problems(encoder, head, settings, albert=False):
  """What BERT's classes (or with `albert`, ALBERT's) cannot compute of a TransformerEncoder."""
  model = "ALBERT" if albert else "BERT"
  problems = []
  if encoder.get("norm_first"):
    problems.append("Pre-LN (norm_first=True): BERT normalises after each residual (Post-LN), and "
                    "transformers has no Pre-LN BERT")
  if encoder.get("residual_attention"):
    problems.append("RealFormer residual attention (residual_attention=True): BERT adds no previous layer's "
                    "scores to the attention")
  if encoder.get("position_encoding", ABSOLUTE) != ABSOLUTE:
    problems.append(f"the relative Transformer (position_encoding={encoder['position_encoding']!r}): BERT's "
                    "positions are absolute embeddings")
  if encoder.get("attention_window") is not None:
    problems.append(f"local attention (attention_window={encoder['attention_window']}): transformers' "
                    f"{model} attends to every token")
  sharing = encoder.get("layer_sharing", "none")
  if albert and sharing not in ("none", "all"):
    problems.append(f"layer_sharing={sharing!r}: transformers' ALBERT shares whole layers ('all') or none")
  if albert and head == "discriminator":
    problems.append("an ELECTRA discriminator with ALBERT's savings: transformers has no ALBERT "
                    "pre-training class with a discriminator")
  transform, activation = _heads_settings(settings, encoder)
  if head in ("masked_lm", "discriminator") and activation != encoder["activation"]:
    what = {"masked_lm": "masked-LM", "discriminator": "discriminator"}[head]
    problems.append(f"the {what} head's activation {activation!r} differs from the encoder's "
                    f"{encoder['activation']!r}: transformers' heads use hidden_act for both")
  if head == "masked_lm" and transform is False:
    problems.append(f"the masked-LM head has no dense and layer norm (mlm_transform=false): {model}'s "
                    "masked-LM head has BERT's transform")
  if head == "masked_lm" and encoder.get("layer_norm_epsilon", 1e-12) != MASKED_LM_LAYER_NORM_EPSILON:
    problems.append(f"layer_norm_epsilon={encoder['layer_norm_epsilon']} with a masked-LM head, whose layer "
                    f"norm uses {MASKED_LM_LAYER_NORM_EPSILON}: transformers' {model} uses layer_norm_eps "
                    "for both")
  return problems


def _funnel_config(encoder):
  """transformers' FunnelConfig fields of a zoo Funnel; `num_decoder_layers` only when it has a decoder
  (a FunnelBaseModel's config keeps the value of the checkpoint it came from, else 0)."""
  decoder = {"num_decoder_layers": encoder["num_decoder_layers"]} if encoder.get("num_decoder_layers") else {}
  return dict(
      model_type="funnel", vocab_size=encoder["vocab_size"], block_sizes=list(encoder["block_sizes"]),
      block_repeats=list(encoder.get("block_repeats") or [1] * len(encoder["block_sizes"])), **decoder,
      d_model=encoder["hidden_size"], n_head=encoder["num_heads"],
      d_head=encoder.get("head_size") or encoder["hidden_size"] // encoder["num_heads"],
      d_inner=encoder["intermediate_size"], hidden_act=HF_ACTIVATIONS[encoder["activation"]],
      hidden_dropout=encoder["dropout"], attention_dropout=encoder["attention_dropout"],
      activation_dropout=encoder.get("activation_dropout", 0.0),
      initializer_range=encoder["initializer_range"], layer_norm_eps=encoder["layer_norm_epsilon"],
      pooling_type=encoder["pooling_type"],
      attention_type=FUNNEL_ATTENTION_TYPES[encoder["position_encoding"]],
      separate_cls=encoder["separate_cls"], truncate_seq=encoder["truncate_seq"],
      pool_q_only=encoder["pool_q_only"])


def _bert_config(encoder, model_type):
  config = dict(
      model_type=model_type, vocab_size=encoder["vocab_size"], hidden_size=encoder["hidden_size"],
      num_hidden_layers=encoder["num_layers"], num_attention_heads=encoder["num_heads"],
      intermediate_size=encoder["intermediate_size"], hidden_act=HF_ACTIVATIONS[encoder["activation"]],
      hidden_dropout_prob=encoder["dropout"], attention_probs_dropout_prob=encoder["attention_dropout"],
      max_position_embeddings=encoder["max_sequence_length"], type_vocab_size=encoder["type_vocab_size"],
      initializer_range=encoder["initializer_range"], layer_norm_eps=encoder["layer_norm_epsilon"])
  if model_type == "electra":
    config["embedding_size"] = encoder["hidden_size"]
  return config


def _albert_config(encoder):
  from zoo.convert.albert import groups_of
  return dict(
      model_type="albert", vocab_size=encoder["vocab_size"],
      embedding_size=encoder.get("embedding_width") or encoder["hidden_size"],
      hidden_size=encoder["hidden_size"],
      num_hidden_layers=encoder["num_layers"], num_hidden_groups=groups_of(encoder), inner_group_num=1,
      num_attention_heads=encoder["num_heads"], intermediate_size=encoder["intermediate_size"],
      hidden_act=HF_ACTIVATIONS[encoder["activation"]], hidden_dropout_prob=encoder["dropout"],
      attention_probs_dropout_prob=encoder["attention_dropout"],
      max_position_embeddings=encoder["max_sequence_length"], type_vocab_size=encoder["type_vocab_size"],
      initializer_range=encoder["initializer_range"], layer_norm_eps=encoder["layer_norm_epsilon"],
      position_embedding_type="absolute")


def plan(settings, roots=(), change_pooling=False):
  """The `Plan` of exporting a model directory whose config.json holds `settings` and whose
  checkpoint has the roots `roots`. A Funnel pooling with other semantics than Hugging Face's is
  refused unless `change_pooling`; the plan's `changed` then says what the export computes otherwise.

  Raises:
    ConversionError: what transformers cannot express, every reason named.
  """
  family, arguments = presets.encoder_arguments(settings)
  _, encoder = presets.resolve(settings["model"], arguments)
  head = _head_of(settings, roots)
  albert = _is_albert(family, encoder)
  if family == "funnel":
    problems = _funnel_problems(encoder, head, settings, change_pooling)
  else:
    problems = _transformer_problems(encoder, head, settings, albert)
  if encoder["activation"] not in HF_ACTIVATIONS:
    problems.append(f"activation {encoder['activation']!r}: transformers has counterparts of "
                    f"{', '.join(sorted(HF_ACTIVATIONS))} only")
  if problems:
    raise ConversionError("transformers cannot express this model: " + "; ".join(problems))

  decoder_layers = int(encoder.get("num_decoder_layers") or 0)
  with_decoder = family == "funnel" and bool(decoder_layers) and head not in POOLED_HEADS
  left_out, changed = [], []
  if family == "funnel":
    kind = head or ("encoder" if with_decoder else "base")
    architecture = ARCHITECTURES["funnel"][kind]
    hf_config = _funnel_config(encoder)
    if encoder.get("pooling_semantics", HF_POOLING) != HF_POOLING:
      changed.append("pooling: trained with " + POOLING_DIFFERENCES[encoder["pooling_semantics"]]
                     + ". Exported as asked (--change-pooling).")
    if decoder_layers and not with_decoder:   # AutoModel (FunnelModel) then builds no untrained decoder
      hf_config["num_decoder_layers"] = 0
    if head not in POOLED_HEADS:
      left_out.append("the pooler (transformers' Funnel has none; only its sequence classifier and its "
                      "multiple-choice model have one)")
    if decoder_layers and not with_decoder:
      left_out.append(f"the {decoder_layers}-layer decoder ({architecture} reads the encoder's output)")
  elif albert:
    architecture = ARCHITECTURES["albert"][head or "encoder"]
    hf_config = _albert_config(encoder)
    if head not in (None, *POOLED_HEADS):
      left_out.append(f"the pooler ({architecture} has none)")
  else:
    architecture = ARCHITECTURES["transformer"][head or "encoder"]
    hf_config = _bert_config(encoder, "electra" if head == "discriminator" else "bert")
    if head not in (None, *POOLED_HEADS):
      left_out.append(f"the pooler ({architecture} has none)")
  if head == "discriminator":
    left_out.append("the ELECTRA generator (transformers' pre-training class holds the discriminator)")
  hf_config.update(architectures=[architecture], **_label_fields(settings, head))
  return Plan(family, arguments, head, with_decoder, architecture, hf_config, left_out, changed)


# The model: rebuilt from config.json and restored from the checkpoint.
def _restore(plan_, settings, prefix):
  """`(encoder, head layers)` of the directory, restored from `prefix` in float32."""
  import tensorflow as tf
  import tf_keras as keras

  from zoo import models
  from zoo.models.pretrainers import discriminator_head
  from zoo.models.pretrainers import head_activation

  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy("float32")
  try:
    encoder = presets.build(settings["model"], **plan_.encoder)
    layers, roots = {}, {}
    if plan_.head == "choice":   # multiple-choice runs and converted ...ForMultipleChoice save both roots
      scorer = keras.layers.Dense(1, dtype="float32", name="logits")
      scorer.build([None, encoder.get_config()["hidden_size"]])
      roots.update({encoder_root(prefix): encoder, CHOICE_HEAD_ROOT: scorer})
      layers["output"] = scorer
    elif plan_.head in ("sequence", "token", "span") and settings.get("task"):
      num_classes = int(settings.get("num_classes") or 1)
      task_model = {"sequence": lambda: models.SequenceClassifier(encoder, num_classes=num_classes),
                    "token": lambda: models.TokenClassifier(encoder, num_classes=num_classes),
                    "span": lambda: models.SpanQA(encoder)}[plan_.head]()
      roots["model"] = task_model
      layers["output"] = task_model.get_layer({"span": "span_logits"}.get(plan_.head, "logits"))
    else:
      roots[encoder_root(prefix)] = encoder
    transform, activation = _heads_settings(settings, encoder.get_config())
    if plan_.head == "masked_lm":
      head = models.MaskedLMHead(encoder.get_embedding_table(), activation=head_activation(activation),
                                 transform=transform is not False, name="masked_lm")
      head(tf.zeros([1, 1, encoder.get_config()["hidden_size"]]), masked_positions=tf.zeros([1, 1], tf.int32))
      roots[MASKED_LM_ROOT] = head
      layers["masked_lm"] = head
    if plan_.head == "discriminator":
      width = encoder.get_config()["hidden_size"]
      dense = keras.layers.Dense(width, activation=head_activation(activation),
                                 name="discriminator_transform")
      logits = keras.layers.Dense(1, name="discriminator_logits")
      logits(dense(tf.zeros([1, width])))
      roots[DISCRIMINATOR_HEAD_ROOT] = discriminator_head(dense, logits)
      layers.update(transform=dense, logits=logits)
  finally:
    keras.mixed_precision.set_global_policy(previous)
  try:
    tf.train.Checkpoint(**roots).read(prefix).expect_partial().assert_existing_objects_matched()
  except (AssertionError, ValueError) as error:
    raise ConversionError(f"{prefix} does not hold the model its config.json describes ({error})") from None
  return encoder, layers


def _entries(plan_, encoder, layers):
  """(transformers name, zoo variable, rule) of every tensor the export writes."""
  from zoo.convert import albert
  from zoo.convert import bert
  from zoo.convert import hf_funnel
  is_albert = plan_.hf_config["model_type"] == "albert"
  if is_albert:
    base = albert.encoder_entries(encoder)
    if plan_.head in (None, *POOLED_HEADS):
      base += albert.pooler_entries(encoder)
    prefix = PREFIXES.get(plan_.architecture, albert.PREFIX)
  elif plan_.family == "funnel":
    decoder_layers = plan_.encoder["num_decoder_layers"] if plan_.with_decoder else 0
    config = dict(plan_.encoder, num_decoder_layers=decoder_layers)
    base = hf_funnel.encoder_entries(encoder, config)
    if not encoder.get_config().get("use_segment_bias", True):
      base = [entry for entry in base if not entry[0].endswith((".r_s_bias", ".seg_embed"))]
    prefix = PREFIXES.get(plan_.architecture, "funnel.")
  else:
    base = bert.encoder_entries(encoder, "hf")
    if plan_.head in (None, *POOLED_HEADS):
      base += bert.pooler_entries(encoder, "hf")
    prefix = PREFIXES.get(plan_.architecture, "bert.")
  entries = [(prefix + name, variable, rule) for name, variable, rule in base]
  linear = torch_linear(1)
  head = plan_.head
  if head in POOLED_HEADS and plan_.family == "funnel":
    pooler = encoder.get_layer("pooler")
    entries += [("classifier.linear_hidden.weight", pooler.kernel, linear),
                ("classifier.linear_hidden.bias", pooler.bias, same()),
                ("classifier.linear_out.weight", layers["output"].kernel, linear),
                ("classifier.linear_out.bias", layers["output"].bias, same())]
  elif head in ("sequence", "token", "choice"):
    entries += [("classifier.weight", layers["output"].kernel, linear),
                ("classifier.bias", layers["output"].bias, same())]
  elif head == "span":
    entries += [("qa_outputs.weight", layers["output"].kernel, linear),
                ("qa_outputs.bias", layers["output"].bias, same())]
  elif head == "masked_lm" and plan_.family == "funnel":
    entries += [("lm_head.bias", layers["masked_lm"].bias, same())]
  elif head == "masked_lm" and is_albert:
    mlm = layers["masked_lm"]
    entries += [("predictions.dense.weight", mlm.dense.kernel, linear),
                ("predictions.dense.bias", mlm.dense.bias, same()),
                ("predictions.LayerNorm.weight", mlm.layer_norm.gamma, same()),
                ("predictions.LayerNorm.bias", mlm.layer_norm.beta, same()),
                ("predictions.bias", mlm.bias, flat())]
  elif head == "masked_lm":
    mlm = layers["masked_lm"]
    entries += [("cls.predictions.transform.dense.weight", mlm.dense.kernel, linear),
                ("cls.predictions.transform.dense.bias", mlm.dense.bias, same()),
                ("cls.predictions.transform.LayerNorm.weight", mlm.layer_norm.gamma, same()),
                ("cls.predictions.transform.LayerNorm.bias", mlm.layer_norm.beta, same()),
                ("cls.predictions.bias", mlm.bias, flat())]
  elif head == "discriminator":
    entries += [("discriminator_predictions.dense.weight", layers["transform"].kernel, linear),
                ("discriminator_predictions.dense.bias", layers["transform"].bias, same()),
                ("discriminator_predictions.dense_prediction.weight", layers["logits"].kernel, linear),
                ("discriminator_predictions.dense_prediction.bias", layers["logits"].bias, same())]
  return entries


def _tensors(plan_, encoder, layers):
  """`{transformers name: float32 array}` of the export.

  A Funnel's query projection has a bias in the zoo and none in transformers (`q_head`):
  the query meets only the content, position and segment biases added to it (`(q + b +
  r_w_bias)·k`, `(q + b + r_r_bias)·r`, `(q + b + r_s_bias)·seg`), so the bias `b` moves
  into those three, which gives the same scores.
  """
  from zoo.convert import hf_funnel
  tensors = exported(_entries(plan_, encoder, layers))
  if plan_.hf_config["model_type"] == "albert":
    if encoder.get_layer("embeddings").projection is None:   # E = D: ALBERT still maps E -> D
      prefix = PREFIXES.get(plan_.architecture, "albert.") + "encoder.embedding_hidden_mapping_in."
      width = plan_.hf_config["hidden_size"]
      tensors[prefix + "weight"] = np.eye(width, dtype=np.float32)
      tensors[prefix + "bias"] = np.zeros([width], np.float32)
    return tensors
  if plan_.family != "funnel":
    return tensors
  config = encoder.get_config()
  prefix = PREFIXES.get(plan_.architecture, "funnel.")
  shape = [config["num_heads"], plan_.hf_config["d_head"]]
  decoder_layers = config["num_decoder_layers"] if plan_.with_decoder else 0
  for hf_prefix, name in hf_funnel.layers(dict(config, num_decoder_layers=decoder_layers)):
    attention = f"{prefix}{hf_prefix}.attention."
    if not config.get("use_segment_bias", True):   # no segment term: zeros make transformers' term 0 too
      tensors[attention + "r_s_bias"] = np.zeros(shape, np.float32)
      tensors[attention + "seg_embed"] = np.zeros([2, *shape], np.float32)
    query_bias = encoder.get_layer(name).attention.query_dense.bias.numpy().reshape(shape)
    for bias in ("r_w_bias", "r_r_bias", "r_s_bias"):
      tensors[attention + bias] = tensors[attention + bias] + query_bias
  return tensors


# The tokenizer files.
def _tokenizer_settings(settings, vocab, sentencepiece=None):
  """The run's text encoder settings (casing, special tokens, [CLS]'s type, word length; `kind`
  "sentencepiece" for a SentencePiece model)."""
  from zoo.text import text_encoder
  lower_case = settings.get("lower_case")
  encoder = text_encoder(vocab, seq_length=max(3, int(settings.get("seq_length") or 3)),
                         sentencepiece_model=sentencepiece,
                         lower_case=True if lower_case is None else bool(lower_case),
                         **(settings.get("tokenizer") or {}))
  return encoder.settings()


def sentencepiece_tokenizer_files(model, text, seq_length):
  """`{file name: text or bytes}` of the Hugging Face tokenizer files (`spiece.model` and ALBERT's
  `tokenizer.json`, as transformers' `AlbertTokenizer` builds it) that tokenize as
  `zoo.text.SentencePieceEncoder` with the settings `text` does.

  Raises:
    ConversionError: a SentencePiece model other than unigram (ALBERT's).
  """
  from tokenizers import Tokenizer
  from tokenizers import decoders
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  from tokenizers import processors
  from tokenizers.models import Unigram

  from zoo.text.sentencepiece import describe_model
  described = describe_model(model)
  if described["model_type"] != "unigram":
    raise ConversionError(f"a {described['model_type']} SentencePiece model: transformers' AlbertTokenizer "
                          "runs unigram models only")
  special = text["special_tokens"]
  pieces = [piece for piece, _, _ in described["pieces"]]
  ids = {piece: i for i, piece in reversed(list(enumerate(pieces)))}
  cls, sep = special["cls"], special["sep"]
  tokenizer = Tokenizer(Unigram([(piece, score) for piece, score, _ in described["pieces"]],
                                unk_id=ids[special["unk"]], byte_fallback=False))
  steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
  if not text["keep_accents"]:
    steps += [normalizers.NFKD(), normalizers.StripAccents()]
  if text["lower_case"]:
    steps.append(normalizers.Lowercase())
  if described["precompiled_charsmap"]:
    steps.append(normalizers.Precompiled(described["precompiled_charsmap"]))
  tokenizer.normalizer = normalizers.Sequence(steps)
  tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
      pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
  tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
  cls_type = int(text["cls_type_id"])
  tokenizer.post_processor = processors.TemplateProcessing(
      single=f"{cls}:{cls_type} $A:0 {sep}:0", pair=f"{cls}:{cls_type} $A:0 {sep}:0 $B:1 {sep}:1",
      special_tokens=[(cls, ids[cls]), (sep, ids[sep])])
  tokenizer.add_special_tokens([special[role] for role in ("pad", "unk", "cls", "sep", "mask")])
  names = {f"{role}_token": special[role] for role in ("unk", "sep", "pad", "cls", "mask")}
  # The generic class runs tokenizer.json as written (AlbertTokenizer would rebuild its normalizer from
  # its arguments); `token_type_ids` as ALBERT's models take them.
  config = dict(tokenizer_class="PreTrainedTokenizerFast", do_lower_case=text["lower_case"],
                keep_accents=text["keep_accents"], bos_token=cls, eos_token=sep, **names,
                model_max_length=int(seq_length), padding_side="right", truncation_side="right",
                model_input_names=["input_ids", "token_type_ids", "attention_mask"])
  return {"tokenizer.json": tokenizer.to_str(pretty=True),
          "tokenizer_config.json": json.dumps(config, indent=2) + "\n",
          "special_tokens_map.json": json.dumps(names, indent=2) + "\n",
          "spiece.model": bytes(model)}


def tokenizer_files(vocab, text, family, seq_length):
  """`{file name: text}` of the Hugging Face tokenizer files that tokenize as `zoo.text.TextEncoder`
  with the settings `text` (`TextEncoder.settings()`) does."""
  from tokenizers import Tokenizer
  from tokenizers import decoders
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  from tokenizers import processors
  from tokenizers.models import WordPiece

  special = text["special_tokens"]
  ids = {token: i for i, token in enumerate(vocab)}
  cls, sep = special["cls"], special["sep"]
  cls_type = FUNNEL_CLS_TYPE_ID if family == "funnel" else int(text["cls_type_id"])
  tokenizer = Tokenizer(WordPiece(ids, unk_token=special["unk"], continuing_subword_prefix="##",
                                  max_input_chars_per_word=int(text["max_chars_per_word"])))
  tokenizer.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=text["lower_case"],
      lowercase=text["lower_case"])
  tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  tokenizer.decoder = decoders.WordPiece(prefix="##")
  tokenizer.post_processor = processors.TemplateProcessing(
      single=f"{cls}:{cls_type} $A:0 {sep}:0", pair=f"{cls}:{cls_type} $A:0 {sep}:0 $B:1 {sep}:1",
      special_tokens=[(cls, ids[cls]), (sep, ids[sep])])
  tokenizer.add_special_tokens([special[role] for role in ("pad", "unk", "cls", "sep", "mask")])
  # The model's own class when it computes the same ids (it rebuilds WordPiece with 100 characters per
  # word and its own [CLS] type); else the generic class, which runs tokenizer.json as written.
  own_class = "FunnelTokenizer" if family == "funnel" else "BertTokenizer"
  native = text["max_chars_per_word"] == HF_MAX_CHARS_PER_WORD and (family == "funnel" or cls_type == 0)
  names = {f"{role}_token": special[role] for role in ("unk", "sep", "pad", "cls", "mask")}
  config = dict(
      tokenizer_class=own_class if native else "PreTrainedTokenizerFast", do_lower_case=text["lower_case"],
      strip_accents=None, tokenize_chinese_chars=True, clean_text=True, **names,
      bos_token="<s>" if "<s>" in ids else None, eos_token="</s>" if "</s>" in ids else None,
      model_max_length=int(seq_length), padding_side="right", truncation_side="right",
      model_input_names=["input_ids", "token_type_ids", "attention_mask"])
  return {"tokenizer.json": tokenizer.to_str(pretty=True),
          "tokenizer_config.json": json.dumps(config, indent=2) + "\n",
          "special_tokens_map.json": json.dumps(names, indent=2) + "\n",
          "vocab.txt": "".join(token + "\n" for token in vocab)}


# The model card.
def _model_card(model_dir, settings, plan_, dtype, command):
  task = settings.get("task")
  source = model_dir.read_source() if os.path.exists(model_dir.source_path) else None
  lines = ["---", "library_name: transformers", f"pipeline_tag: {PIPELINE_TAGS[plan_.head or 'encoder']}",
           "tags:", f"- {plan_.hf_config['model_type']}", "---", "",
           f"# {os.path.basename(os.path.normpath(model_dir.path))}", ""]
  preset = presets.get(settings["model"])
  overrides = settings.get("model_overrides") or {}
  changed = " with the overrides below" if overrides else ""
  lines += [f"A `{plan_.architecture}` exported from a zoo model directory: the preset `{settings['model']}` "
            f"({preset.description}){changed}.", "",
            "| | |", "|---|---|",
            f"| preset | `{settings['model']}`"
            + (f" with `{json.dumps(overrides, sort_keys=True)}`" if overrides else "") + " |",
            f"| task | {task or 'none (a converted checkpoint)'} |",
            f"| sequence length | {settings.get('seq_length')} tokens |"]
  if task:
    steps = model_dir.latest_step()
    checkpoint = os.path.basename(model_dir.latest_checkpoint())
    lines.append(f"| training steps | {steps} (checkpoint `{checkpoint}`) |")
  if source:
    origin = source.get("hub_id") or source.get("path")
    lines.append(f"| converted from | {source.get('format')} `{origin}` |")
  lines += [f"| weights | {dtype} |", ""]
  if task and os.path.exists(model_dir.eval_results_path):
    results = model_dir.read_eval_results()
    lines += ["## Evaluation", "", "| metric | value |", "|---|---|"]
    lines += [f"| {name} | {value:.6g} |" if isinstance(value, float) else f"| {name} | {value} |"
              for name, value in sorted(results.items())]
    lines.append("")
  elif task:
    lines += ["## Evaluation", "", "The run wrote no evaluation results (`eval_results.json`).", ""]
  auto = {"encoder": "AutoModel", "base": "AutoModel", "masked_lm": "AutoModelForMaskedLM",
          "discriminator": "AutoModelForPreTraining", "sequence": "AutoModelForSequenceClassification",
          "token": "AutoModelForTokenClassification", "span": "AutoModelForQuestionAnswering",
          "choice": "AutoModelForMultipleChoice"}
  kind = plan_.head or ("encoder" if plan_.with_decoder or plan_.family != "funnel" else "base")
  length = settings.get("seq_length")
  lines += ["## Use", "", "```python", f"from transformers import AutoTokenizer, {auto[kind]}",
            "tokenizer = AutoTokenizer.from_pretrained(PATH)", f"model = {auto[kind]}.from_pretrained(PATH)",
            f'inputs = tokenizer(["..."], padding="max_length", max_length={length}, '
            'truncation=True, return_tensors="pt")', "outputs = model(**inputs)", "```", ""]
  if plan_.head == "choice":
    lines += ["Each option is its own text pair: give the model `input_ids` `[batch, options, length]` "
              "(encode the pairs of every option, then reshape); `outputs.logits` `[batch, options]` scores "
              "the options."
              + (f" The run laid its pairs out {settings['choice_layout']} and kept the last "
                 f"{settings.get('max_qa_length')} tokens of the question with an option."
                 if settings.get("choice_layout") else ""), ""]
  if plan_.head == "span":
    lines += ["transformers 5 has no `question-answering` pipeline: the answer is the span between the "
              "argmax of `outputs.start_logits` and of `outputs.end_logits` over the context's tokens.", ""]
  if plan_.family == "funnel":
    lines += [f"Pad to {length} tokens, as above. A Funnel pools pairs of tokens, and transformers' Funnel "
              "treats a pooled pair that holds a pad as padding, so its outputs depend on how far a batch "
              f"is padded: padded to {length} they are the zoo model's (and its SavedModel's). Pipelines pad "
              "to the longest text of a batch and compute other outputs, which can change a short text's "
              "label; give them the same padding:", ""]
    if plan_.head == "sequence":
      lines += ["```python", "from transformers import pipeline",
                'classifier = pipeline("text-classification", model=PATH)',
                f'classifier(["..."], padding="max_length", max_length={length}, truncation=True)', "```", ""]
  lines += ["## Conversion", "", f"Written by `{command}` on {datetime.date.today().isoformat()}.", ""]
  if plan_.left_out:
    lines += ["Not carried over:", ""] + [f"- {what}" for what in plan_.left_out] + [""]
  if plan_.changed:
    lines += ["Computed otherwise than the zoo model:", ""] + [f"- {what}" for what in plan_.changed] + [""]
  return "\n".join(lines)


def _source_config(model_dir):
  """The transformers config.json a directory was converted from (its `source.json`), or {}."""
  if not os.path.exists(model_dir.source_path):
    return {}
  config = model_dir.read_source().get("hf_config") or {}
  return {key: value for key, value in config.items() if key not in BOOKKEEPING_FIELDS}


def to_hf(model_dir, out, dtype="float32", command=None, change_pooling=False):
  """Writes the model directory `model_dir` as a Hugging Face checkpoint directory `out`; returns the `Plan`.

  `out` must not exist or be empty; it appears complete or not at all (written beside it
  under a temporary name, then renamed).

  Raises:
    ConversionError: what transformers cannot express (nothing is written).
    FileNotFoundError: no config.json, vocabulary or checkpoint in `model_dir`.
    ValueError: an unknown dtype, or `out` is a non-empty directory.
  """
  from safetensors.numpy import save_file
  if dtype not in DTYPES:
    raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
  directory = ModelDir(model_dir)
  if not os.path.isfile(directory.config_path):
    raise FileNotFoundError(f"{directory.config_path}: not found; expected a zoo model directory "
                            "(a tpu.train --model-dir or a zoo.convert output)")
  if os.path.isdir(out) and os.listdir(out):
    raise ValueError(f"{out} exists and is not empty: choose a new --out")
  settings = directory.read_config()
  prefix = directory.latest_checkpoint()
  plan_ = plan(settings, checkpoint_roots(prefix) if prefix else (), change_pooling)   # refusals first
  if prefix is None:
    raise FileNotFoundError(f"{directory.path} holds no checkpoint in {directory.checkpoint_dir}")
  vocab = directory.read_vocab()
  if len(vocab) != plan_.encoder["vocab_size"]:
    raise ConversionError(f"{directory.vocab_path} has {len(vocab)} tokens, but config.json says vocab_size="
                          f"{plan_.encoder['vocab_size']}")
  sentencepiece = directory.read_sentencepiece()
  text = _tokenizer_settings(settings, vocab, sentencepiece)
  encoder, layers = _restore(plan_, settings, prefix)
  tensors = _tensors(plan_, encoder, layers)
  if dtype == "bfloat16":
    import ml_dtypes
    tensors = {name: value.astype(ml_dtypes.bfloat16) for name, value in tensors.items()}
  source_config = _source_config(directory)
  hf_config = {**source_config, **plan_.hf_config, "dtype": dtype}
  if plan_.hf_config["model_type"] == "albert":   # ALBERT's config names its [CLS] and [SEP] too
    hf_config.update(bos_token_id=vocab.index(text["special_tokens"]["cls"]),
                     eos_token_id=vocab.index(text["special_tokens"]["sep"]))
  if plan_.family != "funnel" and "pad_token_id" not in source_config:
    # A Funnel's config names no pad token: transformers' Funnel zeroes the embedding of `pad_token_id`
    # when it loads, and its whole-window pooling mixes padded positions into real ones, so the row must
    # stay as trained (BERT's loads as written).
    hf_config["pad_token_id"] = vocab.index(text["special_tokens"]["pad"])
  if plan_.family == "funnel":
    hf_config.setdefault("num_decoder_layers", 0)
  seq_length = settings.get("seq_length") or 512
  if text.get("kind") == "sentencepiece":
    files = sentencepiece_tokenizer_files(sentencepiece, text, seq_length)
  else:
    files = tokenizer_files(vocab, text, plan_.family, seq_length)
  files["config.json"] = json.dumps(hf_config, indent=2, sort_keys=True) + "\n"
  command = command or f"python -m zoo.convert to-hf {model_dir} --out {out} --dtype {dtype}"
  files["README.md"] = _model_card(directory, settings, plan_, dtype, command)
  if os.path.isdir(out):
    os.rmdir(out)   # empty: replaced by the complete directory
  with atomic_path(os.path.abspath(out)) as temporary:
    os.makedirs(temporary)
    save_file(tensors, os.path.join(temporary, "model.safetensors"), metadata={"format": "pt"})
    for name, content in files.items():
      binary = isinstance(content, bytes)
      with open(os.path.join(temporary, name), "wb" if binary else "w",
                encoding=None if binary else "utf-8") as file:
        file.write(content)
  return plan_
