"""`python -m cli`: the same command as `workbench`, under that name in usage lines and errors."""
from cli.main import main

if __name__ == "__main__":  # not when a process pool's fork server imports it (workbench/verify/batch.py)
    main(prog_name="workbench")
