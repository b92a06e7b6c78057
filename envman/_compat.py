"""Python-version shims (envman supports 3.10+)."""

try:
    import tomllib  # noqa: F401
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]  # noqa: F401
