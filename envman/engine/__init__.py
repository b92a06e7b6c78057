"""The only code that talks to a container engine: docker-py for the daemon (docker.py), a BuildKit
client for builds (buildkit.py), the errors both raise, and the ContainerEngine protocol the use cases
program against (protocol.py)."""
