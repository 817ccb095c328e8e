"""`python -m cli`: the same command as `workbench`, under that name in usage lines and errors."""
from cli.main import main

main(prog_name="workbench")
