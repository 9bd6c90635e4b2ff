"""Measuring one copy: the clients that move data (one module each, one registry), the one
``measure`` that times any of them, and the per-second series every client feeds."""
