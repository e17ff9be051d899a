"""The lesson, read: a descriptor and what it points to (reference, catalogue, promises, pins). Imports only
the worker's contract and the kit's base modules."""
