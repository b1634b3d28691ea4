"""The channel to the coordinator as `zbppctl` opens it (client/
zbppctl_flags.h, zbppctl_client.h): the address ($ZBPP_COORDINATOR, else
127.0.0.1:50051), the bearer token (given, or read from a token file as
--token-file reads it), TLS (--tls-ca, --tls-cert, --tls-key), and gRPC
errors turned into `zbpp.Error`s with zbppctl's words and hints.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import grpc

from zbpp.errors import Error, NotFound, PermissionDenied, SpecError, Unavailable

#: The address used when neither `address` nor $ZBPP_COORDINATOR is given.
DEFAULT_COORDINATOR = "127.0.0.1:50051"
#: The deadline of every unary call and of a watch's connection, seconds.
DEFAULT_TIMEOUT_SECONDS = 10.0


class DeadlineExceeded(Error):
    """The coordinator was connected but did not answer in time, or a job did
    not reach the state waited for in time (`Client.wait_for_job`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "DEADLINE_EXCEEDED")


@dataclass(frozen=True)
class Tls:
    """TLS to the coordinator, as zbppctl's flags name the files (PEM).

    `ca` (--tls-ca): the CA that signed the coordinator's certificate.
    `cert` and `key` (--tls-cert, --tls-key): a client certificate and its
    key, for a coordinator that requires one (mutual TLS); both or neither.
    """

    ca: str | os.PathLike[str]
    cert: str | os.PathLike[str] | None = None
    key: str | os.PathLike[str] | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials. Raises ValueError for a cert without a key
        (or the reverse) and Error for a file that cannot be read or holds no
        PEM block of its kind."""
        if (self.cert is None) != (self.key is None):
            raise ValueError("tls: cert and key go together (--tls-cert and --tls-key)")
        ca = _read_pem("--tls-ca", self.ca, "CERTIFICATE")
        if self.cert is None or self.key is None:
            return grpc.ssl_channel_credentials(root_certificates=ca)
        return grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=_read_pem("--tls-key", self.key, "PRIVATE KEY"),
            certificate_chain=_read_pem("--tls-cert", self.cert, "CERTIFICATE"))


def _read_pem(flag: str, path: str | os.PathLike[str], kind: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise Error(f"{flag} {os.fspath(path)}: cannot read: {e.strerror}",
                    "FAILED_PRECONDITION") from None
    marker = b"-----BEGIN CERTIFICATE-----" if kind == "CERTIFICATE" else b"PRIVATE KEY-----"
    if marker not in data:
        raise Error(f"{flag} {os.fspath(path)}: no PEM {kind} block", "INVALID_ARGUMENT")
    return data


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The bearer token in `path`, surrounding whitespace removed (zbppctl,
    zbpp-worker and zbpp-coordinator --token-file). Raises Error when the
    file cannot be read or holds only whitespace."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise Error(f"cannot read token file {os.fspath(path)}: {e}",
                    "FAILED_PRECONDITION") from None
    if not token:
        raise Error(f"token file {os.fspath(path)} is empty", "INVALID_ARGUMENT")
    return token


def _mentions(text: str, *needles: str) -> bool:
    lower = text.lower()
    return any(n in lower for n in needles)


def _accepts_tcp(address: str, timeout: float) -> bool:
    """Whether something at `address` accepts a TCP connection in `timeout` s."""
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if address.startswith(scheme):
            address = address[len(scheme):]
            break
    host, sep, port = address.rpartition(":")
    if not sep or not host or "/" in address:
        return False  # unix:, a bare host, a path: not probed
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def tls_mismatch_hint(address: str, tls: bool, grpc_error: str,
                      probe_timeout: float = 1.0) -> str:
    """The likely cause of a failure to reach `address` when it is a TLS
    mismatch, as a clause to append ("; ..."), else "" (common/tls_hint.h:
    the same words, with this package's argument names). Opens one TCP
    connection (at most `probe_timeout` seconds) unless the error already
    says the connection was refused or the name did not resolve."""
    if tls and _mentions(grpc_error, "certificate_verify_failed", "certificate verify failed"):
        return ("; TLS: the coordinator's certificate does not verify against the CA "
                "(tls=Tls(ca=...), zbppctl --tls-ca): signed by another CA, or not naming "
                "this address: pass the CA that signed it")
    if tls and _mentions(grpc_error, "wrong_version_number", "wrong version number"):
        return ("; TLS: the coordinator answered in plaintext: it serves no TLS, drop tls= "
                "(--tls-ca)")
    if _mentions(grpc_error, "connection refused", "dns resolution failed",
                 "name or service") or not _accepts_tcp(address, probe_timeout):
        return ""
    if not tls:
        return ("; it accepts connections but not plaintext gRPC: the coordinator most likely "
                "serves TLS (pass tls=Tls(ca=...), zbppctl --tls-ca, with the CA that signed "
                "its certificate)")
    return ("; it accepts connections but the TLS handshake failed: the coordinator may serve "
            "plaintext (drop tls=), or its certificate is signed by another CA than tls.ca's "
            "or does not name this address")


class Connection:
    """One channel to one coordinator, the call metadata and error phrasing.
    Thread-safe as gRPC channels are."""

    def __init__(self, address: str | None, token: str | None,
                 token_file: str | os.PathLike[str] | None, tls: Tls | None,
                 timeout: float) -> None:
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        if not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout}")
        self.address = address or os.environ.get("ZBPP_COORDINATOR") or DEFAULT_COORDINATOR
        self.tls = tls
        self.timeout = timeout
        self.token = read_token_file(token_file) if token_file is not None else token
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {self.token}"),) if self.token else ())
        self.channel = (grpc.secure_channel(self.address, tls.credentials()) if tls
                        else grpc.insecure_channel(self.address))
        self._state = grpc.ChannelConnectivity.IDLE
        self.channel.subscribe(self._track, try_to_connect=False)

    def _track(self, state: grpc.ChannelConnectivity) -> None:
        self._state = state

    def close(self) -> None:
        self.channel.unsubscribe(self._track)
        self.channel.close()

    def wait_connected(self, timeout: float) -> None:
        """Blocks until the channel is connected; Unavailable after `timeout` s."""
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise Unavailable(
                f"cannot reach coordinator at {self.address}: no connection within "
                f"{timeout:g}s{tls_mismatch_hint(self.address, self.tls is not None, '')}"
            ) from None

    def _connected(self, details: str) -> bool:
        # The subscription may lag the call's failure: gRPC's words for a
        # failed connection say it too.
        return self._state == grpc.ChannelConnectivity.READY and not _mentions(
            details, "failed to connect", "connection refused", "socket closed",
            "dns resolution failed", "connections to all backends failing")

    def error(self, e: grpc.RpcError, lost: bool = False) -> Error:
        """`e` as a zbpp.Error. `lost`: a stream that had delivered events
        broke ("lost connection to coordinator at ADDR: why")."""
        code = e.code()
        details = e.details() or ""
        tls = self.tls is not None
        if code == grpc.StatusCode.UNAVAILABLE:
            if lost:
                return Unavailable(f"lost connection to coordinator at {self.address}: {details}")
            if not self._connected(details):
                return Unavailable(f"cannot reach coordinator at {self.address}: {details}"
                                   f"{tls_mismatch_hint(self.address, tls, details)}")
            return Unavailable(details)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            if not self._connected(details):
                return Unavailable(
                    f"cannot reach coordinator at {self.address}: no connection within "
                    f"{self.timeout:g}s{tls_mismatch_hint(self.address, tls, '')}")
            return DeadlineExceeded(
                f"no answer from coordinator at {self.address} within {self.timeout:g}s")
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return SpecError(details)
        if code == grpc.StatusCode.NOT_FOUND:
            return NotFound(details)
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            hint = ("; the coordinator requires a bearer token: pass token= or token_file= "
                    "(zbppctl --token-file)" if not self.token and
                    code == grpc.StatusCode.UNAUTHENTICATED else "")
            return PermissionDenied(f"{details}{hint}", code.name)
        return Error(details, code.name)
