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
  `tokenizer_config.json`, `special_tokens_map.json`: the run's own tokenization
  (`spiece.model` for a SentencePiece model);
- `README.md`: a model card with the preset, task, training steps, evaluation results
  and how the directory was converted;
- for an embed run, the sentence-transformers modules around the transformer (`modules.json`,
  `sentence_bert_config.json`, `config_sentence_transformers.json`, `1_Pooling/`, `2_Normalize/`:
  `zoo.convert.sentence_transformers`), so `SentenceTransformer(DIR)` computes the run's vectors.

What transformers cannot compute is refused before anything is written, each reason named.

Modules, one step each:

- `plan.py`: the transformers class a directory becomes, and the refusals (`plan`, `Plan`);
- `configs.py`: the config.json of each family (Funnel, BERT and ELECTRA, ALBERT) and the one written;
- `weights.py`: the model restored from its checkpoint, its tensors under transformers' names;
- `tokenizer.py`: the WordPiece and SentencePiece tokenizer files written;
- `card.py`: the model card (with the model's real size and parameter count);
- `pooling_change.py`: what a `--change-pooling` export computes otherwise, measured for the card;
- `export.py`: `to_hf`, which runs the steps and writes the directory at once.
"""

from zoo.convert.to_hf.export import to_hf

__all__ = ["to_hf"]
