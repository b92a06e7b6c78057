"""The portable island: standard library only, Python >= 3.8, importing nothing outside itself.

Copied whole into every image as the package ``envman_portable`` (envman/image/kit.py), so the host and the
container run the same code: versions.py (version and compute-capability arithmetic, with THE SASS/PTX rule),
facts/ (probes), doctor/ (pure checks), frameworks/ (per-framework smoke observers), smoke.py (the program).
"""
