"""Criteria-based judging (AgentEval): criteria proposed by a critic, reviewed into versioned
sets, quantified per run by the `criteria` judge type.

Lives inside `judges` because the judge registry builds the `criteria` judge type from it
(`judge`, `quantifier`, `sets`, `model`), and its derivation tools (`critic`, `consolidate`,
`embeddings`, `robustness`, `verify`) run on the same judge client; `results` stores its
scores as the judge worker's do.
"""
