"""The Alembic environment of the service's tables.

Opening a database (and ``reactor db upgrade``) runs the revisions on its own
connection, handed over in ``config.attributes["connection"]``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from reactor.service._objects.schema import metadata


def _in_schema(name: str | None, kind: str, parent: object) -> bool:
    """Only the service's tables: the database may hold the run store's and the app's."""
    return kind != "table" or name in metadata.tables


def main() -> None:
    """Run the migrations on the connection the caller opened."""
    config = context.config
    connection = config.attributes.get("connection")
    if not isinstance(connection, sa.Connection):
        raise SystemExit(
            "The service's migrations run on an open connection: use `reactor db upgrade "
            "--db URL`, or open an ObjectStore on the database."
        )
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=config.attributes["version_table"],
        render_as_batch=connection.dialect.name == "sqlite",
        include_name=_in_schema,
    )
    with context.begin_transaction():
        context.run_migrations()


main()
