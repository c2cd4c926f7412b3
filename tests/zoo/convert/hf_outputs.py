"""`python hf_outputs.py REQUEST.json OUT.npz`: what transformers alone makes of exported directories.

Run in a process where nothing of the project is importable (no PYTHONPATH): each
directory is loaded with `AutoTokenizer` and the Auto class of the request, its texts
are tokenized (padded and truncated to the length given) and the model's outputs saved.

REQUEST.json: `{"length": T, "texts": [...], "exports": {key: [directory, auto class]}}`.
OUT.npz: for each key, `{key}/input_ids`, `/token_type_ids`, `/attention_mask`, `/logits`
(or `/start_logits` and `/end_logits`), `/hidden` (the last hidden state) and a JSON
string `/info` (the loaded class, its dtype and the loading info's missing and
unexpected keys).
"""

import json
import sys

import numpy as np
import torch
import transformers


def outputs(directory, auto_class, texts, length):
  tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
  model, info = getattr(transformers, auto_class).from_pretrained(directory, output_loading_info=True)
  model.eval()
  encoded = tokenizer(texts, padding="max_length", truncation=True, max_length=length, return_tensors="pt")
  with torch.no_grad():
    result = model(**encoded, output_hidden_states=True)
  arrays = {name: encoded[name].numpy() for name in ("input_ids", "token_type_ids", "attention_mask")}
  for name in ("logits", "start_logits", "end_logits", "last_hidden_state"):
    value = getattr(result, name, None)
    if value is not None:
      arrays[name] = value.float().numpy()
  arrays["hidden"] = result.hidden_states[-1].float().numpy()
  arrays["info"] = np.array(json.dumps(dict(
      model_class=type(model).__name__, tokenizer_class=type(tokenizer).__name__,
      dtype=str(next(model.parameters()).dtype), missing=sorted(info["missing_keys"]),
      unexpected=sorted(info["unexpected_keys"]), vocab=len(tokenizer))))
  return arrays


def main(request_path, out):
  with open(request_path, encoding="utf-8") as file:
    request = json.load(file)
  arrays = {}
  for key, (directory, auto_class) in request["exports"].items():
    for name, value in outputs(directory, auto_class, request["texts"], request["length"]).items():
      arrays[f"{key}/{name}"] = value
  np.savez(out, **arrays)


if __name__ == "__main__":
  main(*sys.argv[1:])
