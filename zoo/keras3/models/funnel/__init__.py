"""The Funnel-Transformer in keras-hub: backbone, tokenizer, preprocessors, tasks and presets."""
