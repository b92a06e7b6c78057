"""What a repository says it needs: spec.py (envman.yaml or [tool.envman]), discover.py (what `envman init` learns
from its dependency files, read by sources/: one reader per format)."""
