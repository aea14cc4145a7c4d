"""A small CRM whose agents enrich and deduplicate people as they are added.

Run it offline with ``python -m examples.crm_enrichment`` (see ``__main__.py``).
"""
