"""Write a self-signed TLS certificate for local use of deploy/docker-compose.yml.

Run by the compose service ``tls-init`` (once: an existing certificate is kept). The names
are SYNAPSIA_ALLOWED_HOSTS plus localhost; browsers will warn, as they should for a
certificate nobody vouches for. For a real deployment mount your own cert.pem/key.pem.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def write_certificate(directory: Path, hosts: list[str], days: int = 365) -> bool:
    """Write cert.pem and key.pem unless both exist; True when it wrote them."""
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    if cert_path.exists() and key_path.exists():
        return False
    names = list(dict.fromkeys([*hosts, "localhost", "127.0.0.1"]))
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return True


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "/tls")
    hosts = [h for h in os.environ.get("SYNAPSIA_ALLOWED_HOSTS", "").split(",") if h]
    wrote = write_certificate(target, hosts or ["localhost"])
    print(
        ("wrote a self-signed certificate to " if wrote else "kept the certificate in ")
        + str(target)
    )
