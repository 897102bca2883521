"""properties: Hypothesis strategies and properties for packers, gates and loaders.

Point it at any implementation through an adapter; every failure is replayable
from a seed or a saved example.
"""
