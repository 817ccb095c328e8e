"""Pure functions from domain objects to Rich Text and table rows: no widgets, no database."""
