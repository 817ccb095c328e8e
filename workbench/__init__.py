"""workbench: review coding-agent migrations of PyTorch projects from GPUs to TPUs."""

__version__ = "0.1.0"
