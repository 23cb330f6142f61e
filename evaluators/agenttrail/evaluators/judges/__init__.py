"""LLM judges (spec/judges.md)."""
