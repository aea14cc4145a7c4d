"""Revisions of the service's schema, oldest first (``0001_...``, ``0002_...``)."""
