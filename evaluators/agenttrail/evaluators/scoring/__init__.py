"""Online scoring: references and the deterministic evaluator that scores every assembled run.

Owns the reference sets (`references` parses and checks them, `reference_store` versions them
in the store), the online worker (`worker`) with the queue it shares with the judge worker
(`run_queue`: a run is pending until it has a decision for the evaluator's version), the
`scores` read query, re-scoring a task's stored runs (`rescore`), the sweep that drops scores of
runs re-assembly deleted (`deleted_runs`),
what every evaluator decided about a run (`audit`), the evaluators' tables (`schema`), and what
`agenttrail references`, `scores` and `worker` do (`service`).
Imports `metrics` and the collector only; judges, offline evaluation and the surfaces build on it.
"""
