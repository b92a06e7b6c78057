"""Credentials never leave the process: no file envman writes and no line it prints carries the userinfo of a
URL (``https://bob:TOKEN@host/simple`` → ``https://host/simple``). Tokens reach uv only through the
environment it inherits (UV_INDEX_URL, PIP_INDEX_URL, netrc …), which envman passes through untouched.

Also the names of files that hold credentials, so that a build context can be checked for them.
"""

from __future__ import annotations

import fnmatch
import re
from urllib.parse import urlsplit, urlunsplit

# scheme://userinfo@ — userinfo runs to the last '@' before the path, query, fragment or a blank; a password with
# a raw '@' (not %40) is still cut whole. git+https, sftp … are schemes too.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/?#@\"'<>]*(?:@[^\s/?#@\"'<>]*)*)@")


def _keeps(scheme: str, userinfo: str) -> bool:
    """An ssh login name (git+ssh://git@github.com/…) is an address, not a secret: it stays."""
    return scheme.lower().rstrip(":/").endswith("ssh") and ":" not in userinfo


def redact_url(url: str) -> str:
    """One URL without its userinfo; anything that is not a URL with a host comes back unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    if not parts.netloc or "@" not in parts.netloc or _keeps(parts.scheme, parts.netloc.rpartition("@")[0]):
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def redact(text: str) -> str:
    """Every URL in ``text`` without its userinfo (lock files, messages, uv's output)."""
    if "@" not in text or "://" not in text:
        return text
    return _USERINFO.sub(lambda m: m.group(0) if _keeps(m.group(1), m.group(2)) else m.group(1), text)


# Files that hold credentials: never part of a build context (.dockerignore) and refused by `envman build`
# when a context would ship one. Patterns match a path relative to the project, at any depth. The ML tools' own:
# Hugging Face's token file, Kaggle's kaggle.json, direnv's .envrc, npm's .npmrc, Streamlit's secrets.toml;
# wandb keeps its API key in netrc.
CREDENTIAL_FILES = (
    ".env", ".env.*", ".envrc", ".pypirc", ".netrc", "_netrc", "netrc", ".npmrc", "pip.conf", "pip.ini",
    ".git-credentials", "kaggle.json", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa", "id_rsa.*", "id_dsa", "id_dsa.*",
    "id_ecdsa", "id_ecdsa.*", "id_ed25519", "id_ed25519.*", "*.kubeconfig",
)
CREDENTIAL_PATHS = (".aws/credentials", ".aws/config", ".docker/config.json", ".kube/config", ".config/gcloud/*",
                    ".azure/*", ".huggingface/token", "huggingface/token", ".streamlit/secrets.toml")
_NOT_SECRET = (".env.example", ".envrc.example")


def is_credential_file(rel: str) -> bool:
    """``rel``: a path relative to the project, '/'-separated."""
    name = rel.rsplit("/", 1)[-1]
    if name in _NOT_SECRET or name.endswith((".pub",)):
        return False
    if any(fnmatch.fnmatchcase(name, p) for p in CREDENTIAL_FILES):
        return True
    return any(fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(rel, "*/" + p) for p in CREDENTIAL_PATHS)


# What a credential looks like inside a file whose name says nothing: a PEM or OpenSSH private key (a line of
# base64 after its BEGIN line, so prose that names the marker is not one), a Google Cloud service-account key
# ("type": "service_account" with a "private_key"), a netrc entry with a password (wandb's API key lives there).
_PRIVATE_KEY = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{40,}")
_SERVICE_ACCOUNT = re.compile(rb'"type"\s*:\s*"service_account"')
_NETRC = re.compile(rb"(?m)^[ \t]*machine[ \t]+[^\s=:]+[\s\S]{0,400}?\bpassword[ \t]+[^\s=:]")
CONTENT_BYTES = 64 * 1024  # keys and key files are small: only a file's first 64 KiB is read


def holds_credentials(head: bytes) -> bool:
    """Does the start of a file (its first CONTENT_BYTES) look like a credential, whatever its name?"""
    if _PRIVATE_KEY.search(head):
        return True
    if _SERVICE_ACCOUNT.search(head) and b'"private_key"' in head:
        return True
    return bool(_NETRC.search(head))
