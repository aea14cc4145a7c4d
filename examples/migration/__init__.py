"""Migrating an edge-based harness: a FlowSpec file, converted, run and compared."""
