"""The zoo's encoders as keras-hub models, laid out as keras-hub's `models/<name>/`.

What both families share, in this folder: `backbone.py` (`ZooBackbone`: a `zoo.keras3`
encoder with keras-hub's inputs and outputs, any sequence length), `tokenizer.py`
(`ZooTokenizer`: WordPiece with a directory's vocabulary, casing and special tokens, giving the
ids of `zoo.text.TextEncoder` or of transformers' tokenizers), `packing.py` (text pairs trimmed as
transformers trims them, in every preprocessor), `task.py` (what the tasks share:
`sequence_length`, untrained unused layers), `text_classifier.py`, `masked_lm.py` (`MaskedLMHead`,
`ZooMaskedLM`), `electra.py` and `text_embedder.py` (`ZooTextEmbedder`: the `embed` task's vectors).
Each family's classes, together: `funnel/` (`funnel_backbone.py`, `funnel_tokenizer.py`,
`funnel_text_classifier.py` with its preprocessor, `funnel_masked_lm.py`, `funnel_electra.py`,
`funnel_text_embedder.py`, `funnel_presets.py`: the authors' ten releases) and `transformer/` (the
same for BERT, Pre-LN, RealFormer and the relative Transformer). `bert.py`: keras-hub's own BERT
tokenizer and preprocessors as Hugging Face BERT directories get them (`zoo.keras3.hf_presets`).
"""
