"""The ground floor: models, errors and rules (effort, costs, redaction, text cleaning).

Pure Python: it imports nothing else of the project, no I/O, neither Textual nor Rich.
"""
