"""`python -m tests.zoo.keras3.pretrain_run VOCAB OUT_DIR HF_MASKED_LM_DIR`: masked-LM pre-training in the
Keras 3 edition under this process's backend, data-parallel over every device
(`keras.distribution.DataParallel`): for each case of CASES, a keras-hub masked-LM task fitted on raw
strings of real prose, then saved with `save_weights_dir` to OUT_DIR/<case>, with OUT_DIR/<case>.npz
holding masked inputs of prose and the task's logits and the backbone's outputs on them. Then the
Hugging Face FunnelForMaskedLM directory through `keras_hub.models.MaskedLM.from_preset`, its logits on
the inputs of OUT_DIR/hf_inputs.npz into OUT_DIR/hf_logits.npy. OUT_DIR/report.json: the devices, the
losses, the classes from_preset gave and the error of a Funnel masked LM without decoder."""

import json
import os
import sys

import numpy as np

SEQ_LENGTH = 32
SMALL = dict(hidden_size=32, num_heads=2, intermediate_size=64)
# name: (preset, encoder overrides, the head's transform)
CASES = {
    "funnel": ("funnel_b4_4_4_decoder", dict(SMALL, block_sizes=(1, 1, 1), residual_attention=True), False),
    "realformer": ("realformer_small", dict(SMALL, num_layers=2), True),
}
# ELECTRA on a Funnel with its decoder (the discriminator labels every token); the generator at the default
# quarter width, sharing the word embeddings.
ELECTRA_CASE = ("funnel_b4_4_4_decoder", dict(SMALL, block_sizes=(1, 1, 1), num_heads=4))


def main(vocab_path, out_dir, hf_dir):
  import keras
  import keras_hub

  import zoo.keras3.hub as zoo_pretraining
  import zoo.keras3.weights_dir as zoo_weights
  from tpu.data import pydocs
  devices = keras.distribution.list_devices()
  keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
  keras.utils.set_random_seed(0)
  with open(vocab_path, encoding="utf-8") as file:
    vocab = [line.rstrip("\n") for line in file]
  texts = [text for _, text in pydocs.documents("validation")][:48]
  texts = texts[:len(texts) // 8 * 8]   # whole batches: each is split over the devices
  report = dict(devices=[str(device) for device in devices], backend=keras.backend.backend())
  for name, (preset, overrides, transform) in CASES.items():
    task = zoo_pretraining.masked_lm_from_preset(preset, vocab, SEQ_LENGTH, mlm_transform=transform,
                                                 **overrides)
    task.compile(optimizer=keras.optimizers.AdamW(2e-3))
    history = task.fit(x=texts, batch_size=8, epochs=4, verbose=0)
    x, y, weights = task.preprocessor(texts[:4])
    inputs = {key: np.asarray(value) for key, value in x.items()}
    logits = keras.ops.convert_to_numpy(task(inputs, training=False))   # the model itself: no preprocessing
    encoded = {key: keras.ops.convert_to_numpy(value) for key, value in task.backbone(
        {key: inputs[key] for key in ("token_ids", "segment_ids", "padding_mask")}, training=False).items()}
    zoo_weights.save_weights_dir(task, os.path.join(out_dir, name))
    np.savez(os.path.join(out_dir, f"{name}.npz"), **inputs, mask_ids=np.asarray(y),
             mask_weights=np.asarray(weights), logits=np.asarray(logits),
             sequence_output=np.asarray(encoded["sequence_output"]),
             pooled_output=np.asarray(encoded["pooled_output"]))
    report[name] = dict(losses=[float(loss) for loss in history.history["loss"]],
                        masked=int(np.asarray(weights).sum()))
    del task
    _release(keras)
  report["electra"] = _electra(zoo_pretraining, vocab, texts, out_dir)
  _release(keras)
  try:
    zoo_pretraining.masked_lm_from_preset("funnel_b4_4_4", vocab, SEQ_LENGTH, **SMALL)
  except ValueError as error:
    report["no_decoder_error"] = str(error)

  task = keras_hub.models.MaskedLM.from_preset(hf_dir)
  report["hf_classes"] = [type(task).__name__, type(task.preprocessor).__name__]
  inputs = dict(np.load(os.path.join(out_dir, "hf_inputs.npz")))
  task = keras_hub.models.MaskedLM.from_preset(hf_dir, preprocessor=None, backbone=keras_hub.models.Backbone.
                                               from_preset(hf_dir, seq_length=inputs["token_ids"].shape[1]))
  np.save(os.path.join(out_dir, "hf_logits.npy"), keras.ops.convert_to_numpy(task(inputs)))
  with open(os.path.join(out_dir, "report.json"), "w") as file:
    json.dump(report, file)


def _release(keras):
  """Frees a finished case's model and, under JAX, its compiled steps: the cases share one process."""
  import gc
  gc.collect()
  if keras.backend.backend() == "jax":
    import jax
    jax.clear_caches()


def _electra(zoo_pretraining, vocab, texts, out_dir):
  """ELECTRA fitted on raw strings, saved to OUT_DIR/electra; OUT_DIR/electra.npz: masked inputs, the
  generator's masked-LM logits on them, the discriminator's logits and labels on their corruption, the
  task's losses and the backbone's outputs."""
  import keras

  import zoo.keras3.weights_dir as zoo_weights
  preset, overrides = ELECTRA_CASE
  task = zoo_pretraining.electra_from_preset(preset, vocab, SEQ_LENGTH, **overrides)
  task.compile(optimizer=keras.optimizers.AdamW(2e-3))
  history = task.fit(x=texts, batch_size=8, epochs=4, verbose=0)
  x, _, weights = task.preprocessor(texts[:4])
  inputs = {key: np.asarray(value) for key, value in x.items()}
  outputs = {key: keras.ops.convert_to_numpy(value) for key, value in task(inputs, training=False).items()}
  encoder_inputs = dict(token_ids=outputs["corrupted_ids"], segment_ids=inputs["segment_ids"],
                        padding_mask=inputs["padding_mask"])
  encoded = {key: keras.ops.convert_to_numpy(value)
             for key, value in task.backbone(encoder_inputs, training=False).items()}
  disc_logits = task.discriminator_logits(task.discriminator_transform(encoded["sequence_output"]))
  zoo_weights.save_weights_dir(task, os.path.join(out_dir, "electra"))
  losses = {key: float(value) for key, value in task.compute_losses(inputs, outputs).items()}
  np.savez(os.path.join(out_dir, "electra.npz"), **inputs, corrupted_ids=outputs["corrupted_ids"],
           disc_labels=outputs["disc_labels"], **{f"{key}_value": value for key, value in losses.items()},
           mlm_logits=outputs["mlm_logits"], disc_logits=keras.ops.convert_to_numpy(disc_logits)[..., 0],
           sequence_output=encoded["sequence_output"], pooled_output=encoded["pooled_output"])
  task.save(os.path.join(out_dir, "electra.keras"))
  reloaded = keras.saving.load_model(os.path.join(out_dir, "electra.keras"))
  reloaded_logits = keras.ops.convert_to_numpy(reloaded(inputs, training=False)["mlm_logits"])
  return dict(losses=[float(loss) for loss in history.history["loss"]], masked=int(np.asarray(weights).sum()),
              shared=[model.generator.token_embedding is model.backbone.token_embedding
                      for model in (task, reloaded)],
              generator_width=task.generator.encoder_config.hidden_size,
              reloaded_difference=float(np.abs(reloaded_logits - outputs["mlm_logits"]).max()),
              reloaded_class=type(reloaded).__name__)


if __name__ == "__main__":
  main(*sys.argv[1:])
