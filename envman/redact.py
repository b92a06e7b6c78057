"""Credentials never leave the process: no file envman writes and no line it prints carries the userinfo of a
URL (``https://bob:TOKEN@host/simple`` → ``https://host/simple``). Tokens reach uv only through the
environment it inherits (UV_INDEX_URL, PIP_INDEX_URL, netrc …), which envman passes through untouched.

Also the names of files that hold credentials, so that a build context can be checked for them.
"""

from __future__ import annotations

import fnmatch
import re

# scheme://userinfo@ — userinfo runs to the last '@' before the path, query, fragment or a blank; a password with
# a raw '@' (not %40) is still cut whole. git+https, sftp … are schemes too.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/?#@\"'<>]*(?:@[^\s/?#@\"'<>]*)*)@")


def _keeps(scheme: str, userinfo: str) -> bool:
    """An ssh login name (git+ssh://git@github.com/…) is an address, not a secret: it stays."""
    return scheme.lower().rstrip(":/").endswith("ssh") and ":" not in userinfo


def redact_userinfo(text: str) -> str:
    """Every URL in ``text`` without its userinfo: what envman writes (lock files, envman.yaml) and compares.
    A token in a URL's path is kept out of those files by naming its index instead (lock/indexes.py)."""
    if "@" not in text or "://" not in text:
        return text
    return _USERINFO.sub(lambda m: m.group(0) if _keeps(m.group(1), m.group(2)) else m.group(1), text)


def redact(text: str) -> str:
    """``text`` as envman shows it (messages, uv's output, diffs): every URL without its userinfo and without a
    token in its path or query (``https://pypi.fury.io/TOKEN/me/`` → ``https://pypi.fury.io/***/me/``)."""
    text = redact_userinfo(text)
    if "://" not in text:
        return text
    return _URL.sub(lambda m: m.group(1) + _cut_tokens(m.group(2)), text)


# A URL's path and query: from the first '/' or '?' after its host to a blank, a quote, a bracket or a backtick
# (uv quotes URLs in backticks); the fragment (#sha256=…) is a hash, not a secret.
_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#\"'<>`]*)([/?][^\s#\"'<>`]*)")
_RUN = re.compile(r"[A-Za-z0-9_-]{16,}")
_SECRET_QUERY = re.compile(r"(?i)([?&](?:[a-z0-9_.-]*(?:token|secret|password|passwd|apikey|api_key|key|sig|signature|"
                           r"credential|auth)[a-z0-9_.-]*)=)[^&]+")


def _tokenish(run: str) -> bool:
    """A run of 16 or more letters and digits (``-``/``_`` at most one in ten) holding both, as the tokens that
    Gemfury, Cloudsmith, GitLab and most services put in URLs are; a file name's parts are cut by dots and
    separated often (``cu128-cp312-manylinux_2_28_x86_64``), a UUID by four dashes."""
    if TOKEN.fullmatch(run):
        return True
    return (sum(c in "-_" for c in run) <= len(run) // 10 and any(c.isdigit() for c in run)
            and any(c.isalpha() for c in run))


def _cut_tokens(rest: str) -> str:
    rest = _SECRET_QUERY.sub(lambda m: m.group(1) + "***", rest)
    rest = TOKEN.sub("***", rest)
    return _RUN.sub(lambda m: "***" if _tokenish(m.group(0)) else m.group(0), rest)


# Files that hold credentials: never part of a build context (.dockerignore) and refused by `envman build`
# when a context would ship one. Patterns match a path relative to the project, at any depth. The ML tools' own:
# Hugging Face's token file, Kaggle's kaggle.json, direnv's .envrc, npm's .npmrc, Streamlit's secrets.toml;
# wandb keeps its API key in netrc.
# The data and cloud tools': s3cmd's .s3cfg, PostgreSQL's .pgpass, the Databricks CLI's .databrickscfg, rclone.conf,
# Vault's token file, Google's OAuth client files (credentials.json, client_secret*.json, as its quickstarts name
# them), a secrets.json, a Hugging Face token saved as a file, the GitHub CLI's hosts.yml.
CREDENTIAL_FILES = (
    ".env", ".env.*", ".envrc", ".pypirc", ".netrc", "_netrc", "netrc", ".npmrc", "pip.conf", "pip.ini",
    ".git-credentials", "kaggle.json", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa", "id_rsa.*", "id_dsa", "id_dsa.*",
    "id_ecdsa", "id_ecdsa.*", "id_ed25519", "id_ed25519.*", "*.kubeconfig",
    ".s3cfg", ".pgpass", "pgpass.conf", ".databrickscfg", "rclone.conf", ".vault-token", "credentials.json",
    "client_secret*.json", "secrets.json", "hf_token", "hf_token.txt", ".hf_token",
)
CREDENTIAL_PATHS = (".aws/credentials", ".aws/config", ".docker/config.json", ".kube/config", ".config/gcloud/*",
                    ".azure/*", ".huggingface/token", "huggingface/token", ".streamlit/secrets.toml",
                    ".config/gh/hosts.yml", "gh/hosts.yml", ".config/rclone/rclone.conf")
_NOT_SECRET = (".env.example", ".envrc.example")


def is_credential_file(rel: str) -> bool:
    """``rel``: a path relative to the project, '/'-separated."""
    name = rel.rsplit("/", 1)[-1]
    if name in _NOT_SECRET or name.endswith((".pub",)):
        return False
    if any(fnmatch.fnmatchcase(name, p) for p in CREDENTIAL_FILES):
        return True
    return any(fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(rel, "*/" + p) for p in CREDENTIAL_PATHS)


# Tokens with a fixed prefix, as their issuers document them (each also names its length or alphabet, so prose
# that mentions a prefix is not one): Hugging Face, OpenAI/Anthropic (sk-, sk-proj-, sk-ant-), AWS access key ids,
# GitHub (ghp_/gho_/ghu_/ghs_/ghr_, github_pat_), Slack (xoxb-/xoxp-/xoxa-/xoxr-/xoxs-), GitLab (glpat-), npm,
# PyPI upload tokens, Google API keys, Stripe secret keys, Databricks. Read in files (below) and in the path and
# query of every URL envman prints (redact).
TOKEN_PATTERNS = (
    r"hf_[A-Za-z0-9]{30,}",
    r"sk-(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    r"gh[pousr]_[A-Za-z0-9]{36,}",
    r"github_pat_[A-Za-z0-9_]{40,}",
    r"xox[abprs]-[A-Za-z0-9-]{10,}",
    r"glpat-[A-Za-z0-9_-]{20,}",
    r"npm_[A-Za-z0-9]{36}",
    r"pypi-AgE[A-Za-z0-9_-]{50,}",
    r"AIza[0-9A-Za-z_-]{35}",
    r"[sr]k_live_[A-Za-z0-9]{20,}",
    r"dapi[0-9a-f]{32}",
)
TOKEN = re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(TOKEN_PATTERNS) + r")(?![A-Za-z0-9])")

# What a credential looks like inside a file whose name says nothing: a PEM or OpenSSH private key (a line of
# base64 after its BEGIN line, so prose that names the marker is not one), a Google Cloud service-account key
# ("type": "service_account" with a "private_key"), a netrc entry with a password (wandb's API key lives there),
# a token above, or a config line that holds one: npm's and yarn's auth tokens (.npmrc, .yarnrc.yml), the GitHub
# CLI's oauth_token (hosts.yml), a Docker config's "auths" with an "auth", an AWS or s3cmd secret key, a conda
# channel URL with its token (.condarc: https://conda.anaconda.org/t/TOKEN/channel).
_PRIVATE_KEY = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{40,}")
_SERVICE_ACCOUNT = re.compile(rb'"type"\s*:\s*"service_account"')
_NETRC = re.compile(rb"(?m)^[ \t]*machine[ \t]+[^\s=:]+[\s\S]{0,400}?\bpassword[ \t]+[^\s=:]")
# each with a word that a file holding it must contain (lower case): a file without one is not searched, which
# keeps the check at memchr speed on ordinary source files
_CONFIG_SECRETS = tuple((hint, re.compile(p)) for hint, p in (
    (b"authtoken", rb"(?m)^[ \t]*(?:npmAuthToken|_authToken|//[^\s=]+:_authToken)[ \t]*[:=][ \t]*[\"']?[^\s\"'$]{8,}"),
    (b"oauth_token", rb"(?m)^[ \t]*oauth_token[ \t]*:[ \t]*[\"']?[A-Za-z0-9_]{20,}"),
    (b'"auths"', rb'"auths"\s*:\s*\{[\s\S]{0,2000}?"auth"\s*:\s*"[A-Za-z0-9+/=]{8,}"'),
    (b"secret_", rb"(?mi)^[ \t]*(?:aws_secret_access_key|secret_key)[ \t]*=[ \t]*[A-Za-z0-9+/]{30,}"),
    (b"/t/", rb"https?://[^\s/]*conda[^\s/]*/t/[A-Za-z0-9_-]{16,}/"),
    (b"machine", _NETRC.pattern),
))
# the literal starts of TOKEN_PATTERNS, lower case
_TOKEN_STARTS = (b"hf_", b"sk-", b"akia", b"asia", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"xox",
                 b"glpat-", b"npm_", b"pypi-", b"aiza", b"k_live_", b"dapi")
_TOKEN_BYTES = re.compile(TOKEN.pattern.encode("ascii"))
CONTENT_BYTES = 64 * 1024  # keys and key files are small: only a file's first 64 KiB is read


def holds_credentials(head: bytes) -> bool:
    """Does the start of a file (its first CONTENT_BYTES) look like a credential, whatever its name?"""
    if _PRIVATE_KEY.search(head):
        return True
    if _SERVICE_ACCOUNT.search(head) and b'"private_key"' in head:
        return True
    low = head.lower()
    if any(s in low for s in _TOKEN_STARTS) and _TOKEN_BYTES.search(head):
        return True
    return any(hint in low and p.search(head) for hint, p in _CONFIG_SECRETS)
