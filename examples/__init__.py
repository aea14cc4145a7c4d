"""Runnable examples of reactor (``python -m examples.<name>``)."""
