"""The Alembic environment and revisions of the service's tables (the one schema source).

Opening an :class:`~reactor.service.ObjectStore` (or ``reactor db upgrade``) runs them.
To change the schema, change the tables in ``reactor/service/_objects/schema.py`` and add the
next revision in ``versions/`` doing the same with ``alembic.op``;
``tests/service/test_migrations.py`` fails until the two agree, on SQLite and on
PostgreSQL.
"""
