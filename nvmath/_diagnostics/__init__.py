"""``python -m nvmath``: environment report and self-test."""
