"""The SQLite layer, the only place with SQL: schema migrations, reads that return domain objects,
audited writes (human records, verifications, jobs, importer writes) and chunked logs.
"""
