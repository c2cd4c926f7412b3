"""The Transformer encoders (BERT's Post-LN, Pre-LN, RealFormer, relative) in keras-hub: backbone,
tokenizer, preprocessors and tasks."""
