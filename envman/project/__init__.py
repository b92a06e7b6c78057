"""What a repository says it needs: spec.py (envman.yaml or [tool.envman]), requirements.py (requirement
files, pyproject, environment.yml and their discovery)."""
