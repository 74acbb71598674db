"""Shared machinery of nvmath (tensors, streams, memory, options, planner state). No public API."""
