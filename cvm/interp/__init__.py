"""Interpreters: `reference` is the definition; every other backend is held to it bit for bit."""
