"""The data steps: incompressible files, their XXH128 digests, chunks and reassembly."""
