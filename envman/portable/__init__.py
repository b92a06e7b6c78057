"""The portable island: standard library only, Python >= 3.8, importing nothing outside itself."""
