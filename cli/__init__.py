"""The command line: the top floor, composing services and the app."""
