"""Models saved by an earlier release and the tests that load them with the current code."""
