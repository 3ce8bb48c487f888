"""The kit's foundations: request and result models, canonical bytes, errors, settings, provenance, where the kit lives. Imports nothing else of the kit."""
