"""TLS as zbppctl's --tls-ca, --tls-cert and --tls-key: a coordinator with
mutual TLS (certificates made here with the openssl CLI, as
tests/coordinator/coordinator_tls_test.cc makes them) answers a client with
the CA and a client certificate; refuses one without a certificate
(PermissionDenied); and a plaintext client, or one trusting another CA, gets
Unavailable with zbppctl's TLS hint."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Daemon, binary

import zbpp


def openssl(*args: str) -> None:
    run = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    assert run.returncode == 0, f"openssl {' '.join(args)}: {run.stderr}"


def make_pki(folder: Path) -> Path:
    """A CA (ca.crt) and its server and client leaves ({server,client}.{crt,key})."""
    folder.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", str(folder / "ca.key"), "-out",
            str(folder / "ca.crt"), "-days", "2", "-subj", "/CN=zbpp-test-ca")
    for serial, (name, extensions) in enumerate({
            "server": "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
            "client": "extendedKeyUsage=clientAuth\n"}.items(), start=2):
        (folder / f"{name}.ext").write_text(extensions)
        openssl("req", "-new", *ec, "-keyout", str(folder / f"{name}.key"), "-out",
                str(folder / f"{name}.csr"), "-subj", f"/CN=zbpp-test-{name}")
        openssl("x509", "-req", "-in", str(folder / f"{name}.csr"), "-CA",
                str(folder / "ca.crt"), "-CAkey", str(folder / "ca.key"), "-set_serial",
                str(serial), "-days", "2", "-out", str(folder / f"{name}.crt"), "-extfile",
                str(folder / f"{name}.ext"))
    return folder


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """(the PKI, another CA's, the address of a mutual-TLS coordinator)."""
    scratch = tmp_path_factory.mktemp("tls")
    ours, other = make_pki(scratch / "ours"), make_pki(scratch / "other")
    daemon = Daemon("tls-coordinator", [
        binary("ZBPP_COORDINATOR_BINARY"), "--listen", "127.0.0.1:0", "--metrics-listen",
        "127.0.0.1:0", "--db", ":memory:", "--tls-cert", str(ours / "server.crt"),
        "--tls-key", str(ours / "server.key"), "--tls-client-ca", str(ours / "ca.crt")],
        scratch / "coordinator.log")
    yield ours, other, daemon.line(r"listening grpc=(\S+)").group(1)
    daemon.kill()


def test_mutual_tls(pki: tuple[Path, Path, str]) -> None:
    ours, other, address = pki
    tls = zbpp.Tls(ca=ours / "ca.crt", cert=ours / "client.crt", key=ours / "client.key")
    with zbpp.Client(address, tls=tls) as client:
        assert client.list_jobs() == []
    with zbpp.Client(address, tls=ours / "ca.crt") as no_certificate:
        with pytest.raises(zbpp.PermissionDenied) as refused:
            no_certificate.list_jobs()
    assert "client certificate required" in str(refused.value)
    with zbpp.Client(address, timeout=3) as plaintext, pytest.raises(zbpp.Unavailable) as down:
        plaintext.list_jobs()
    assert "most likely serves TLS" in str(down.value), down.value
    wrong = zbpp.Tls(ca=other / "ca.crt", cert=other / "client.crt", key=other / "client.key")
    with zbpp.Client(address, tls=wrong, timeout=3) as stranger, \
            pytest.raises(zbpp.Unavailable) as down:
        stranger.list_jobs()
    assert f"cannot reach coordinator at {address}" in str(down.value)
    assert "TLS" in str(down.value), down.value
    with pytest.raises(ValueError):
        zbpp.Tls(ca=ours / "ca.crt", cert=ours / "client.crt").credentials()
    with pytest.raises(zbpp.Error) as bad:
        zbpp.Tls(ca=ours / "client.key").credentials()
    assert "--tls-ca" in str(bad.value) and "no PEM CERTIFICATE" in str(bad.value)
