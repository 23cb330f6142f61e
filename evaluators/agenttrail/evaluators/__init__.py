"""Evaluators: deterministic trajectory metrics, online scoring and LLM judges."""
