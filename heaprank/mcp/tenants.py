"""Who is calling the MCP server and which namespaces they may name.

Over stdio (and over HTTP on loopback without ``--tokens``) the process owner is trusted: one
:class:`Caller` that may name any namespace, its default set by ``--namespace``. Over HTTP with
``--tokens FILE`` every request carries a bearer token, and the token decides: the namespaces
it lists, or any with ``"*"`` (an operator). The tokens file is a JSON object::

    {"3f0c...token of at least 16 characters": ["user:maya", "user:maya:work"],
     "9a1e...the operator's token": ["*"]}

A token's first namespace is its default (the one a call without ``namespace`` uses); an
operator's default is the server's ``--namespace``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._checks import check_namespace
from ..errors import InputError

#: Shortest token accepted in a tokens file: a bearer token is a secret, not a password.
MIN_TOKEN_CHARS = 16
#: What a token lists to reach every namespace (the pooled layer and the counts too).
OPERATOR = "*"


@dataclass(frozen=True, slots=True)
class Caller:
    """The namespaces one caller may name.

    Attributes:
        default: The namespace a call without ``namespace`` uses.
        allowed: The namespaces it may name; ``None``: any (the process owner, an operator).
        label: A name for logs that is not the secret (``owner``, ``token 3f0c1a2b``).
    """

    default: str
    allowed: frozenset[str] | None = None
    label: str = "owner"

    @property
    def operator(self) -> bool:
        return self.allowed is None

    def may(self, namespace: str) -> bool:
        """Whether this caller may name ``namespace``."""
        return self.allowed is None or namespace in self.allowed

    def scope(self, namespace: str | None) -> str:
        """The namespace a call works in: ``namespace``, or the default when it is None.

        Raises:
            InputError: a namespace this caller may not name (the message says only that:
                whether it holds anything is another tenant's business).
        """
        chosen = self.default if namespace is None else namespace
        if not self.may(chosen):
            raise InputError("namespace: not one of the namespaces this token may name")
        return chosen


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenTable:
    """The tokens of a tokens file, each mapped to its :class:`Caller`. Only their SHA-256
    digests are kept, and a presented token is looked up by its digest: what the lookup's
    timing could reveal is about the digest, never about the token."""

    def __init__(self, tokens: Mapping[str, list[str]], default: str) -> None:
        self._callers: dict[bytes, Caller] = {}
        for token, namespaces in tokens.items():
            self._callers[_digest(token)] = _caller(token, namespaces, default)

    def __len__(self) -> int:
        return len(self._callers)

    def caller(self, token: str) -> Caller | None:
        """The caller of ``token``, or None for a token the file does not hold."""
        return self._callers.get(_digest(token))

    @classmethod
    def load(cls, path: str | Path, default: str) -> TokenTable:
        """The tokens of a JSON file (see the module docstring).

        Raises:
            InputError: the file is unreadable, not JSON, or a token or namespace is invalid
                (the message names which entry, never the token itself).
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"--tokens: cannot read {str(path)!r}: {exc.strerror or exc}") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"--tokens: {str(path)!r} is not a JSON file ({exc})") from exc
        if not isinstance(data, dict) or not data:
            raise InputError(f"--tokens: {str(path)!r} must hold a JSON object of token -> "
                             "[namespaces], with at least one token")
        return cls(data, default)


def _caller(token: object, namespaces: object, default: str) -> Caller:
    """The caller of one tokens-file entry, checked."""
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or token != token.strip():
        raise InputError(f"--tokens: every token must be a string of at least {MIN_TOKEN_CHARS} "
                         "characters without surrounding spaces")
    label = f"token {_digest(token).hex()[:8]}"
    if not isinstance(namespaces, list) or not namespaces:
        raise InputError(f"--tokens: {label}: expected a non-empty list of namespaces")
    if OPERATOR in namespaces:
        return Caller(default, None, label)
    for ns in namespaces:
        try:
            check_namespace(ns)
        except (InputError, TypeError) as exc:
            raise InputError(f"--tokens: {label}: {exc}") from None
    return Caller(namespaces[0], frozenset(namespaces), label)
