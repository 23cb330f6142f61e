"""agenttrail's own API: messages and services generated from `proto/` (versioned packages)."""
