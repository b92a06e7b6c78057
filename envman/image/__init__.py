"""From a resolution to an image description: plan.py (PURE: what the Dockerfile needs, in cache order),
render.py (Jinja2, strict, dumb templates), kit.py (the portable island + knowledge baked into images)."""
