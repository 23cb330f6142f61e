"""Offline evaluation: datasets of recorded or runnable cases scored with the same metrics and judges.

Owns the dataset formats (`datasets`: JSONL/YAML rows with a trajectory and its reference),
agents run in-process per row (`runnable`), and `evaluate`, which scores every row with the
metric catalogue and the chosen judges and aggregates per metric (`agenttrail evaluate`, the
evaluation API's Evaluate). Imports judges, scoring and metrics; nothing below imports it.
"""
