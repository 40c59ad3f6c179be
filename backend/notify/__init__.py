"""Notification adapters (Slack, generic webhook, Alertmanager): the only code that knows their payloads."""
