"""The kit's foundations: models, canonical bytes, errors, settings, provenance, its home.

It imports nothing else of the kit.
"""
