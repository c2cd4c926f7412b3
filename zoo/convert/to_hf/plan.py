"""What an export to Hugging Face writes, and what it refuses, decided from config.json alone.

`plan(settings, roots)` gives the `Plan`: the transformers class, its config.json
(`zoo.convert.to_hf.configs`), and in words what the export leaves out or computes
otherwise.

The class follows the run's task: the encoder alone (a directory without a task or
head) is `FunnelModel` (with the decoder) / `FunnelBaseModel`, or `BertModel`; a
masked-LM run or head is `FunnelForMaskedLM` / `BertForMaskedLM`; ELECTRA is
`FunnelForPreTraining` / `ElectraForPreTraining` (the discriminator and its head);
`classify` and `regress` are `...ForSequenceClassification` (`num_labels`, `id2label`,
`problem_type`), `tag` `...ForTokenClassification`, `squad`
`...ForQuestionAnswering` and `multiple_choice` (or a converted directory with a `choice_head`)
`...ForMultipleChoice` (the pooler and the scoring layer; Funnel's `classifier.linear_hidden`
and `linear_out`). An `embed` run is the encoder's class (`FunnelModel` with its decoder,
`BertModel`, `AlbertModel`) with `Plan.embedding`, its pooling and normalisation, which the export
writes as a sentence-transformers folder (`zoo.convert.sentence_transformers`). A
TransformerEncoder with ALBERT's savings (factorized embeddings, or every layer shared) is
transformers' ALBERT (`AlbertModel`, `AlbertForMaskedLM`, `AlbertFor...`): one layer group when
every layer is shared, else a group per layer, and an identity projection when the embeddings
have the model width.

What transformers cannot compute is refused before anything is written, each reason
named: RealFormer's residual attention, Pre-LN, the relative Transformer,
a Funnel's factorized embeddings or shared layers, sharing only attention or only the
feed-forward nets, an ALBERT-shaped ELECTRA discriminator, a Funnel pooling with the
zoo's padding semantics, an embed run on a Funnel without a decoder, a decoder fed from
another layer than Hugging Face's, heads transformers' classes do not have (a Funnel
masked-LM head with BERT's transform, a head activation other than the encoder's),
activations it does not name, and tasks it has no class for.
"""

import dataclasses
import json
from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from zoo import presets
from zoo.choices import ABSOLUTE
from zoo.choices import AUTHORS_POOLING
from zoo.choices import AUTHORS_TF_POSITIONS
from zoo.choices import HF_POOLING
from zoo.choices import SHIFT
from zoo.choices import ZOO_POOLING
from zoo.convert.errors import ConversionError
from zoo.convert.to_hf.configs import FUNNEL_ATTENTION_TYPES
from zoo.convert.to_hf.configs import HF_ACTIVATIONS
from zoo.convert.to_hf.configs import albert_config
from zoo.convert.to_hf.configs import bert_config
from zoo.convert.to_hf.configs import funnel_config
from zoo.model_dir import CHOICE_HEAD_ROOT
from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
from zoo.model_dir import MASKED_LM_ROOT

# What each task's model is in transformers, per encoder family ("head": the zoo head it carries).
TASK_HEADS = {"classify": "sequence", "regress": "sequence", "tag": "token", "squad": "span",
              "mlm": "masked_lm", "electra": "discriminator", "multiple_choice": "choice"}
# The heads that score the pooled output (the zoo's pooler travels with them).
POOLED_HEADS = ("sequence", "choice")
# The task whose model is the encoder with a pooling of its hidden states: a sentence-transformers model.
EMBED_TASK = "embed"
EMBED_POOLING = ("cls", "mean", "max")
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
MASKED_LM_LAYER_NORM_EPSILON = 1e-12   # zoo.models.MaskedLMHead's (Model Garden's MaskedLM)


@dataclasses.dataclass
class Plan:
  """What `to_hf` writes, decided from config.json alone (`plan`).

  `family` and `encoder` (constructor arguments) describe the zoo encoder; `head` is None
  or a key of `TASK_HEADS`' values; `with_decoder` whether the export keeps the Funnel
  decoder; `architecture` the transformers class; `hf_config` its config.json; `left_out`
  what of the zoo model the export does not carry, in words; `changed` what the export
  computes otherwise, as the user asked (`change_pooling`); `embedding` of an embed run
  `{"pooling": "cls" | "mean" | "max", "normalize": bool}` (a sentence-transformers folder), else None.
  """
  family: str
  encoder: dict
  head: str | None
  with_decoder: bool
  architecture: str
  hf_config: dict
  left_out: list
  changed: list = dataclasses.field(default_factory=list)
  embedding: dict | None = None


def _head_of(settings, roots):
  task = settings.get("task")
  if task == EMBED_TASK:   # the encoder alone, its pooling in the sentence-transformers modules
    return None
  if task:
    if task not in TASK_HEADS:
      raise ConversionError(f"task {task!r} has no transformers class; to-hf exports the tasks "
                            f"{', '.join((*TASK_HEADS, EMBED_TASK))} and directories without a task")
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


def heads_settings(settings: Mapping[str, Any], encoder: Mapping[str, Any]) -> tuple[bool | None, str]:
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
# pooling semantics.
_SEMANTICS = {
    ZOO_POOLING: "the zoo's pooling semantics (pooling_semantics='zoo': a pooled window is real when any of "
                 "its tokens is, and pools its real tokens only): transformers' Funnel makes such a window "
                 "padding (all its tokens must be real) and pools the padding with it",
    AUTHORS_POOLING: "the Funnel authors' pooling semantics (pooling_semantics='funnel_authors', what their "
                     "code and the paper's checkpoints compute: a pooled window is real when any of its "
                     "tokens is): transformers' Funnel makes such a window padding (all its tokens must be "
                     "real)",
}


def counts_in_words(counts: Sequence[int], limit: int = 8) -> str:
  """`[1, 2, 3, 5, ...]` as "1, 2, 3, 5, 6, ...": the first `limit`."""
  return ", ".join(str(count) for count in counts[:limit]) + (", ..." if len(counts) > limit else "")


def mixed_inputs(encoder: Mapping[str, Any]) -> str:
  """The inputs on which the pooling semantics differ, in words, for the encoder arguments `encoder`
  (with `seq_length`): the counts of real tokens whose last one shares a pooling window with padding
  (`zoo.length_buckets.mixed_window_counts`)."""
  from zoo.length_buckets import mixed_window_counts
  length = int(encoder.get("seq_length") or 512)
  blocks = len(encoder["block_sizes"])
  separate_cls, truncate_seq = encoder.get("separate_cls", True), encoder.get("truncate_seq", True)
  counts = mixed_window_counts(length, blocks, separate_cls, truncate_seq)
  after = " after [cls]" if separate_cls else ""
  counts = [count - 1 for count in counts] if separate_cls else counts
  stride = 2 ** (blocks - 1)
  unaligned = [count for count in range(1, length) if count % stride]
  if counts and counts == [count for count in unaligned if count <= counts[-1]]:
    rule = f"every count not a multiple of {stride} up to {counts[-1]}"
  elif set(counts) <= set(unaligned):
    rule = f"counts not a multiple of {stride}, not all of them (truncate_seq cuts some windows)"
  else:
    rule = "these"
  return (f"padded inputs whose last real token shares a pooling window with padding: at {length} tokens "
          f"with {blocks} blocks, {len(counts)} of the {length - 1} counts of real tokens{after} that leave "
          f"padding, {rule} ({counts_in_words(counts)}), while inputs that fill the length, or are padded in "
          "whole windows, compute the same")


def pooling_differences(semantics: str, encoder: Mapping[str, Any]) -> str:
  """What transformers' Funnel computes otherwise than `encoder` (arguments with `seq_length`) trained
  with the pooling `semantics`, and on which inputs."""
  return _SEMANTICS[semantics] + ", so outputs can differ on " + mixed_inputs(encoder)


def _funnel_problems(encoder, head, settings, change_pooling=False):
  problems = []
  if encoder.get("residual_attention"):
    problems.append("RealFormer residual attention (residual_attention=True): transformers' Funnel adds no "
                    "previous layer's scores to the attention")
  semantics = encoder.get("pooling_semantics", HF_POOLING)
  if semantics != HF_POOLING and not change_pooling:
    problems.append(pooling_differences(semantics, encoder) + " (pass --change-pooling to export it with "
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
  if settings.get("task") == EMBED_TASK and not decoder_layers:
    problems.append("an embed run on an encoder-only Funnel (no decoder layers): sentence-transformers "
                    "loads transformers' FunnelModel, whose output is always its decoder's (the last block "
                    "upsampled to full length, plus the first block's output), while the run pools its "
                    "last block's shorter output; embed runs of a Funnel with a decoder (num_decoder_layers) "
                    "export")
  if head in ("masked_lm", "discriminator", "token", "span") and not decoder_layers:
    problems.append(f"a {head} head on an encoder-only Funnel: transformers' heads read the decoder's "
                    "full-length output")
  transform, activation = heads_settings(settings, encoder)
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
  transform, activation = heads_settings(settings, encoder)
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


def plan(settings: Mapping[str, Any], roots: Collection[str] = (), change_pooling: bool = False) -> Plan:
  """The `Plan` of exporting a model directory whose config.json holds `settings` and whose
  checkpoint has the roots `roots`. A Funnel pooling with other semantics than Hugging Face's is
  refused unless `change_pooling`; the plan's `changed` then says what the export computes otherwise.

  Raises:
    ConversionError: what transformers cannot express, every reason named.
  """
  config = presets.encoder_config(settings)
  family, encoder = config.family, json.loads(json.dumps(config.to_dict()))   # as config.json holds it
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
    hf_config = funnel_config(encoder)
    if encoder.get("pooling_semantics", HF_POOLING) != HF_POOLING:
      changed.append("pooling: trained with " + pooling_differences(encoder["pooling_semantics"], encoder)
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
    hf_config = albert_config(encoder)
    if head not in (None, *POOLED_HEADS):
      left_out.append(f"the pooler ({architecture} has none)")
  else:
    architecture = ARCHITECTURES["transformer"][head or "encoder"]
    hf_config = bert_config(encoder, "electra" if head == "discriminator" else "bert")
    if head not in (None, *POOLED_HEADS):
      left_out.append(f"the pooler ({architecture} has none)")
  if head == "discriminator":
    left_out.append("the ELECTRA generator (transformers' pre-training class holds the discriminator)")
  hf_config.update(architectures=[architecture], **_label_fields(settings, head))
  return Plan(family, encoder, head, with_decoder, architecture, hf_config, left_out, changed,
              _embedding(settings))


def _embedding(settings):
  """`Plan.embedding` of an embed run's settings (the embed task's defaults where they say nothing), else
  None."""
  if settings.get("task") != EMBED_TASK:
    return None
  pooling = settings.get("pooling", "mean")
  if pooling not in EMBED_POOLING:
    raise ConversionError(f"config.json: pooling {pooling!r}; an embed run pools with one of "
                          f"{', '.join(EMBED_POOLING)}")
  return dict(pooling=pooling, normalize=bool(settings.get("normalize", True)))
