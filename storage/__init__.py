"""The SQLite layer: schema migrations and queries that return domain objects."""
