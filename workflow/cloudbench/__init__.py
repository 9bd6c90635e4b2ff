"""cloudbench: measure how fast an object store moves large files between HPC centres."""

__version__ = "0.1.0"
