"""The tensors of an export to Hugging Face: the zoo model restored, and its variables under the names
transformers' PyTorch classes use.

`restore` rebuilds the directory's encoder and heads from config.json and reads them from its
checkpoint; `tensors` gives `{transformers name: float32 array}`. The names are the importers'
entries read backwards (`zoo.convert.rules`, `entries`), so a Hugging Face checkpoint converted in
and exported again gives back its tensors, name for name.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from zoo import presets
from zoo.convert.errors import ConversionError
from zoo.convert.rules import Rule
from zoo.convert.rules import exported
from zoo.convert.rules import flat
from zoo.convert.rules import same
from zoo.convert.rules import torch_linear
from zoo.convert.to_hf.plan import POOLED_HEADS
from zoo.convert.to_hf.plan import Plan
from zoo.convert.to_hf.plan import heads_settings
from zoo.model_dir import CHOICE_HEAD_ROOT
from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import encoder_root

# Where each class keeps its encoder ("" for the encoder classes themselves).
PREFIXES = {"FunnelModel": "", "FunnelBaseModel": "", "BertModel": "", "ElectraForPreTraining": "electra.",
            "AlbertModel": ""}


def restore(plan_: Plan, settings: Mapping[str, Any], prefix: str) -> tuple[Any, dict[str, Any]]:
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
    transform, activation = heads_settings(settings, encoder.get_config())
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


def _encoder_entries(plan_, encoder):
  """(transformers name, zoo variable, rule) of the encoder's tensors (and the pooler's, where the class
  has one), under the class's prefix."""
  from zoo.convert import albert
  from zoo.convert import bert
  from zoo.convert import hf_funnel
  if plan_.hf_config["model_type"] == "albert":
    base = albert.encoder_entries(encoder)
    if plan_.head in (None, *POOLED_HEADS):
      base += albert.pooler_entries(encoder)
    prefix = PREFIXES.get(plan_.architecture, albert.PREFIX)
  elif plan_.family == "funnel":
    base = hf_funnel.encoder_entries(encoder, None if plan_.with_decoder else 0)
    if not encoder.config.use_segment_bias:
      base = [entry for entry in base if not entry[0].endswith((".r_s_bias", ".seg_embed"))]
    prefix = PREFIXES.get(plan_.architecture, "funnel.")
  else:
    base = bert.encoder_entries(encoder, "hf")
    if plan_.head in (None, *POOLED_HEADS):
      base += bert.pooler_entries(encoder, "hf")
    prefix = PREFIXES.get(plan_.architecture, "bert.")
  return [(prefix + name, variable, rule) for name, variable, rule in base]


def _head_entries(plan_, encoder, layers):
  """(transformers name, zoo variable, rule) of the head's tensors (a Funnel's pooler with its scorer)."""
  linear = torch_linear(1)
  head = plan_.head
  if head in POOLED_HEADS and plan_.family == "funnel":
    pooler = encoder.get_layer("pooler")
    return [("classifier.linear_hidden.weight", pooler.kernel, linear),
            ("classifier.linear_hidden.bias", pooler.bias, same()),
            ("classifier.linear_out.weight", layers["output"].kernel, linear),
            ("classifier.linear_out.bias", layers["output"].bias, same())]
  if head in ("sequence", "token", "choice"):
    return [("classifier.weight", layers["output"].kernel, linear),
            ("classifier.bias", layers["output"].bias, same())]
  if head == "span":
    return [("qa_outputs.weight", layers["output"].kernel, linear),
            ("qa_outputs.bias", layers["output"].bias, same())]
  if head == "masked_lm" and plan_.family == "funnel":
    return [("lm_head.bias", layers["masked_lm"].bias, same())]
  if head == "masked_lm" and plan_.hf_config["model_type"] == "albert":
    mlm = layers["masked_lm"]
    return [("predictions.dense.weight", mlm.dense.kernel, linear),
            ("predictions.dense.bias", mlm.dense.bias, same()),
            ("predictions.LayerNorm.weight", mlm.layer_norm.gamma, same()),
            ("predictions.LayerNorm.bias", mlm.layer_norm.beta, same()),
            ("predictions.bias", mlm.bias, flat())]
  if head == "masked_lm":
    mlm = layers["masked_lm"]
    return [("cls.predictions.transform.dense.weight", mlm.dense.kernel, linear),
            ("cls.predictions.transform.dense.bias", mlm.dense.bias, same()),
            ("cls.predictions.transform.LayerNorm.weight", mlm.layer_norm.gamma, same()),
            ("cls.predictions.transform.LayerNorm.bias", mlm.layer_norm.beta, same()),
            ("cls.predictions.bias", mlm.bias, flat())]
  if head == "discriminator":
    return [("discriminator_predictions.dense.weight", layers["transform"].kernel, linear),
            ("discriminator_predictions.dense.bias", layers["transform"].bias, same()),
            ("discriminator_predictions.dense_prediction.weight", layers["logits"].kernel, linear),
            ("discriminator_predictions.dense_prediction.bias", layers["logits"].bias, same())]
  return []


def entries(plan_: Plan, encoder: Any, layers: Mapping[str, Any]) -> list[tuple[str, Any, Rule]]:
  """(transformers name, zoo variable, rule) of every tensor the export writes."""
  return _encoder_entries(plan_, encoder) + _head_entries(plan_, encoder, layers)


def tensors(plan_: Plan, encoder: Any, layers: Mapping[str, Any]) -> dict[str, np.ndarray]:
  """`{transformers name: float32 array}` of the export.

  A Funnel's query projection has a bias in the zoo and none in transformers (`q_head`):
  the query meets only the content, position and segment biases added to it (`(q + b +
  r_w_bias)·k`, `(q + b + r_r_bias)·r`, `(q + b + r_s_bias)·seg`), so the bias `b` moves
  into those three, which gives the same scores.
  """
  from zoo.convert import hf_funnel
  arrays = exported(entries(plan_, encoder, layers))
  if plan_.hf_config["model_type"] == "albert":
    if encoder.get_layer("embeddings").projection is None:   # E = D: ALBERT still maps E -> D
      prefix = PREFIXES.get(plan_.architecture, "albert.") + "encoder.embedding_hidden_mapping_in."
      width = plan_.hf_config["hidden_size"]
      arrays[prefix + "weight"] = np.eye(width, dtype=np.float32)
      arrays[prefix + "bias"] = np.zeros([width], np.float32)
    return arrays
  if plan_.family != "funnel":
    return arrays
  config = encoder.config
  prefix = PREFIXES.get(plan_.architecture, "funnel.")
  shape = [config.num_heads, plan_.hf_config["d_head"]]
  decoder_layers = config.num_decoder_layers if plan_.with_decoder else 0
  for hf_prefix, name in hf_funnel.layers(config.block_sizes, decoder_layers):
    attention = f"{prefix}{hf_prefix}.attention."
    if not config.use_segment_bias:   # no segment term: zeros make transformers' term 0 too
      arrays[attention + "r_s_bias"] = np.zeros(shape, np.float32)
      arrays[attention + "seg_embed"] = np.zeros([2, *shape], np.float32)
    query_bias = encoder.get_layer(name).attention.query_dense.bias.numpy().reshape(shape)
    for bias in ("r_w_bias", "r_r_bias", "r_s_bias"):
      arrays[attention + bias] = arrays[attention + bias] + query_bias
  return arrays
