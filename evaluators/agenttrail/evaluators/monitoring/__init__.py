"""Monitoring: metrics over time, drift, alerts, exports."""
