"""Scheduled tasks: prompts the agent runs on a schedule the NATS server keeps and fires (ADR-51).

The component (`schedules.scheduler:run`, `antler run scheduler`) owns the task records and
their definitions on the SCHEDULES stream, and turns each firing into an ordinary run.
"""
