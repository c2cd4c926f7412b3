"""`python -m tests.zoo.keras3.load_dir MODEL_DIR INPUTS.npz OUT.npz`: a model directory's encoder
under this process's Keras backend (`zoo.keras3.load_model_dir`), run on the inputs by its compiled
prediction step; its outputs saved by name."""

import sys

import numpy as np


def main(model_dir, inputs_path, out_path):
  import keras

  from zoo.keras3 import load_model_dir
  loaded = load_model_dir(model_dir)
  inputs = dict(np.load(inputs_path))
  outputs = loaded.encoder.predict_on_batch(inputs)
  np.savez(out_path, backend=keras.backend.backend(), family=loaded.family,
           special_tokens=repr(sorted(loaded.special_tokens.items())), cls_type_id=loaded.cls_type_id,
           **{key: keras.ops.convert_to_numpy(value) for key, value in outputs.items()
              if key in ("sequence_output", "encoder_sequence_output", "pooled_output")})


if __name__ == "__main__":
  main(*sys.argv[1:4])
