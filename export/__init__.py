"""SavedModel export for TensorFlow Serving (`saved_model`) and a predict command (`predict`).

Deliberately empty: `python -m export.predict` runs on a serving box with only
tensorflow and tensorflow-text installed, so importing this package must not pull in
the zoo or the training job.
"""
