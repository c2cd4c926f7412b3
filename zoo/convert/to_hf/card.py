"""The model card (`README.md`) of an export to Hugging Face.

`model_card` writes the Hub's front matter (library, pipeline tag, model type), a table of the
preset and its overrides, task, sequence length, training steps, source and weights' dtype,
the run's evaluation results, how to load and call the model with transformers' Auto classes
(and what padding a Funnel needs to compute the zoo model's outputs; an embed run's with
sentence-transformers, and what its vectors are), and how the directory was converted: the
command, the date, and what the export leaves out or computes otherwise.
"""

import datetime
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from zoo import presets
from zoo.convert.to_hf.plan import Plan
from zoo.convert.to_hf.plan import counts_in_words
from zoo.convert.to_hf.pooling_change import SAME
from zoo.convert.to_hf.pooling_change import PoolingChange
from zoo.model_dir import ModelDir

PIPELINE_TAGS = dict(encoder="feature-extraction", base="feature-extraction", masked_lm="fill-mask",
                     discriminator="feature-extraction", sequence="text-classification",
                     token="token-classification", span="question-answering", choice="multiple-choice")
# The Auto class that loads each kind of export.
AUTO_CLASSES = {"encoder": "AutoModel", "base": "AutoModel", "masked_lm": "AutoModelForMaskedLM",
                "discriminator": "AutoModelForPreTraining", "sequence": "AutoModelForSequenceClassification",
                "token": "AutoModelForTokenClassification", "span": "AutoModelForQuestionAnswering",
                "choice": "AutoModelForMultipleChoice"}


def model_size(family: str, encoder: Mapping[str, Any]) -> str:
  """The size of an encoder (constructor arguments) in the papers' notation: `B6-3x2-3x2-H768` (a
  Funnel's blocks, repeats and width, and its decoder), `L12/H768/A12` (a Transformer's layers, width and
  heads, and ALBERT's savings)."""
  width, heads = encoder["hidden_size"], encoder["num_heads"]
  if family == "funnel":
    repeats = encoder.get("block_repeats") or (1,) * len(encoder["block_sizes"])
    blocks = "-".join(f"{size}x{repeat}" if repeat > 1 else str(size)
                      for size, repeat in zip(encoder["block_sizes"], repeats, strict=True))
    decoder = int(encoder.get("num_decoder_layers") or 0)
    return (f"Funnel-Transformer B{blocks}-H{width}/A{heads}"
            + (f" with a {decoder}-layer decoder" if decoder else ", encoder only"))
  size = f"L{encoder['num_layers']}/H{width}/A{heads}"
  if encoder.get("embedding_width") not in (None, width):
    size += f", E{encoder['embedding_width']}"
  if encoder.get("layer_sharing", "none") != "none":
    size += f", layer_sharing={encoder['layer_sharing']}"
  return size


def _summary(model_dir, settings, plan_, dtype, parameters=None):
  """The front matter, the title and the table of what the model is and where it comes from."""
  task = settings.get("task")
  source = model_dir.read_source() if os.path.exists(model_dir.source_path) else None
  if plan_.embedding:   # a sentence-transformers folder
    front = ["library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "tags:",
             "- sentence-transformers", "- feature-extraction"]
  else:
    front = ["library_name: transformers", f"pipeline_tag: {PIPELINE_TAGS[plan_.head or 'encoder']}", "tags:"]
  lines = ["---", *front, f"- {plan_.hf_config['model_type']}", "---", "",
           f"# {os.path.basename(os.path.normpath(model_dir.path))}", ""]
  preset = presets.get(settings["model"])
  overrides = settings.get("model_overrides") or {}
  size = model_size(plan_.family, plan_.encoder)
  as_preset = size == model_size(preset.family, preset.config)
  built = (f"the preset `{settings['model']}` ({preset.description})"
           + ("" if not overrides else " with the overrides below" if as_preset
              else " with the overrides below, which make it another size"))
  what = (f"A sentence-transformers model (a `{plan_.architecture}`, then its pooling)" if plan_.embedding
          else f"A `{plan_.architecture}`")
  lines += [f"{what} exported from a zoo model directory: {size}, built from {built}.", "",
            "| | |", "|---|---|",
            f"| preset | `{settings['model']}`"
            + (f" with `{json.dumps(overrides, sort_keys=True)}`" if overrides else "") + " |",
            f"| size | {size}" + (f", {parameters:,} parameters" if parameters else "") + " |",
            f"| task | {task or 'none (a converted checkpoint)'} |",
            f"| sequence length | {settings.get('seq_length')} tokens |"]
  if task and not source:   # a converted directory's checkpoint counts no training steps
    steps = model_dir.latest_step()
    checkpoint = os.path.basename(model_dir.latest_checkpoint())
    lines.append(f"| training steps | {steps} (checkpoint `{checkpoint}`) |")
  if source:
    origin = source.get("hub_id") or source.get("path")
    lines.append(f"| converted from | {source.get('format')} `{origin}` |")
  return lines + [f"| weights | {dtype} |", ""]


def _evaluation(model_dir, task):
  """The run's evaluation results (none for a directory without a task, or a converted one)."""
  if os.path.exists(model_dir.source_path):
    return []
  if task and os.path.exists(model_dir.eval_results_path):
    results = model_dir.read_eval_results()
    lines = ["## Evaluation", "", "| metric | value |", "|---|---|"]
    lines += [f"| {name} | {value:.6g} |" if isinstance(value, float) else f"| {name} | {value} |"
              for name, value in sorted(results.items())]
    return lines + [""]
  if task:
    return ["## Evaluation", "", "The run wrote no evaluation results (`eval_results.json`).", ""]
  return []


def _use_embedding(settings, plan_, change=None):
  """How to load a sentence-transformers export and what its vectors are."""
  length = settings.get("seq_length")
  pooling = dict(cls="the first token's ([CLS]'s) hidden state", mean="the mean of the hidden states of the "
                 "text's tokens", max="the element-wise maximum of the hidden states of the text's tokens")
  scaled = ", scaled to unit length" if plan_.embedding["normalize"] else ""
  lines = ["## Use", "", "```python", "from sentence_transformers import SentenceTransformer",
           "model = SentenceTransformer(PATH)",
           'embeddings = model.encode(["...", "..."])   # [texts, width]',
           "scores = model.similarity(embeddings, embeddings)   # cosine similarity", "```", "",
           f"A text's vector is {pooling[plan_.embedding['pooling']]} (`1_Pooling`: "
           f"`{plan_.embedding['pooling']}`){scaled}, as the zoo model's `embed` signature returns it; texts "
           f"are truncated to {length} tokens (`max_seq_length`). The transformer alone loads with "
           f"`AutoModel.from_pretrained(PATH)` (`{plan_.architecture}`, whose `last_hidden_state` the "
           "pooling reads).", ""]
  if plan_.family == "funnel":
    lines += [f"A Funnel's outputs depend on how far a batch is padded (transformers' Funnel treats a pooled "
              f"pair of tokens that holds a pad as padding): `sentence_bert_config.json` pads every text to "
              f"{length} tokens (`processing_kwargs`), which gives "
              + ("the same vectors" if change else "the run's vectors") + " whatever the batch.", ""]
  return lines + _pooling_change(change)


def _pooling_change(change):
  """What a Funnel exported with other pooling semantics than it trained with computes otherwise, as
  measured (`zoo.convert.to_hf.pooling_change`)."""
  if change is None:
    return []
  differing = change.differing
  after = [count - 1 for count in differing]
  agree = len(change.counts) - len(differing)
  return [f"**Not the zoo model's outputs on every padded input.** The run trained with the "
          f"{change.semantics!r} pooling semantics; this export computes Hugging Face's "
          "(`--change-pooling`). "
          f"Measured at conversion, the same weights under both, on random tokens, one input for each of "
          f"{len(change.counts)} counts of real tokens padded to {change.seq_length}: {len(differing)} "
          f"counts compute otherwise (real tokens after [cls]: {counts_in_words(after, 12) or 'none'}), "
          f"{change.output} moving by up to {change.largest:.3g} (median "
          f"{change.median_differing():.3g} over those), and the other {agree} agree within {SAME:g} "
          "(inputs that fill the length, or whose pooling windows are wholly real or wholly padding). "
          "The zoo model's SavedModel computes the trained semantics.", ""]


def _use(settings, plan_, change=None):
  """How to load and call the model, with what each kind of head takes and gives (and what it computes
  otherwise than the zoo model, `change`)."""
  if plan_.embedding:
    return _use_embedding(settings, plan_, change)
  auto = AUTO_CLASSES[plan_.head or ("encoder" if plan_.with_decoder or plan_.family != "funnel" else "base")]
  length = settings.get("seq_length")
  lines = ["## Use", "", "```python", f"from transformers import AutoTokenizer, {auto}",
           "tokenizer = AutoTokenizer.from_pretrained(PATH)", f"model = {auto}.from_pretrained(PATH)",
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
    same = ("they are the zoo model's (and its SavedModel's, which runs every call at "
            f"{length}, or, exported with --padding-dependent-buckets, at shorter lengths that keep the "
            "pooling windows of the real tokens whole, with the same outputs)" if change is None else
            "they are the same whatever the batch (and the zoo model's where the measurement below says)")
    lines += [f"Pad to {length} tokens, as above. A Funnel pools pairs of tokens, and transformers' Funnel "
              "treats a pooled pair that holds a pad as padding, so its outputs depend on how far a batch "
              f"is padded: padded to {length} {same}. Pipelines pad "
              "to the longest text of a batch and compute other outputs, which can change a short text's "
              "label; give them the same padding:", ""]
    if plan_.head == "sequence":
      lines += ["```python", "from transformers import pipeline",
                'classifier = pipeline("text-classification", model=PATH)',
                f'classifier(["..."], padding="max_length", max_length={length}, truncation=True)', "```", ""]
  return lines + _pooling_change(change)


def _conversion(plan_, command):
  """The command and date of the conversion, and what the export leaves out or computes otherwise."""
  lines = ["## Conversion", "", f"Written by `{command}` on {datetime.date.today().isoformat()}.", ""]
  if plan_.left_out:
    lines += ["Not carried over:", ""] + [f"- {what}" for what in plan_.left_out] + [""]
  if plan_.changed:
    lines += ["Computed otherwise than the zoo model:", ""] + [f"- {what}" for what in plan_.changed] + [""]
  return lines


def model_card(model_dir: ModelDir, settings: Mapping[str, Any], plan_: Plan, dtype: str, command: str,
               arrays: Mapping[str, np.ndarray] | None = None, change: PoolingChange | None = None) -> str:
  """The text of the export's `README.md` (`model_dir` a `zoo.model_dir.ModelDir`, `plan_` the export's
  `Plan`, `command` the command line that wrote it, `arrays` the exported tensors, whose sizes it counts,
  `change` a `zoo.convert.to_hf.pooling_change.PoolingChange` measured for a Funnel exported with other
  pooling semantics than it trained with)."""
  parameters = sum(int(np.prod(array.shape)) for array in arrays.values()) if arrays else None
  lines = _summary(model_dir, settings, plan_, dtype, parameters)
  lines += _evaluation(model_dir, settings.get("task"))
  lines += _use(settings, plan_, change)
  lines += _conversion(plan_, command)
  return "\n".join(lines)
