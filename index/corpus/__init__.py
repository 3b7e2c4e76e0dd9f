"""The corpus use cases: the door (door.py, which every surface calls) and the use cases above it:
evaluation, intervention ranking, migrate and its checks, the meaning check. No engine is named here
but through index.opening."""
