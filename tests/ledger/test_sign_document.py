"""The server's public document signer (ledger.signing.ledger_sign_document): it signs
``prefix + message`` with the ledger key, only under a document's own domain prefix, so a
document signature can never pass for a signed ledger head or a witness's signature."""

from __future__ import annotations

import base64

import pytest
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from ledger.chain import HEAD_SIGNATURE_PREFIX, WITNESS_SIGNATURE_PREFIX
from ledger.signing import ledger_public_key, ledger_sign_document

PREFIX = b"synapsia-project-package-v1\n"


def test_it_signs_prefix_and_message_with_the_ledger_key(ledger_signing_key: str) -> None:
    signed = ledger_sign_document(prefix=PREFIX, message=b'{"files": []}')
    assert signed.public_key == ledger_public_key()
    verify = VerifyKey(base64.b64decode(signed.public_key))
    signature = base64.b64decode(signed.signature)
    verify.verify(PREFIX + b'{"files": []}', signature)
    with pytest.raises(BadSignatureError):  # another message, or the message without prefix
        verify.verify(PREFIX + b'{"files": [1]}', signature)
    with pytest.raises(BadSignatureError):
        verify.verify(b'{"files": []}', signature)


@pytest.mark.parametrize(
    "prefix",
    [
        HEAD_SIGNATURE_PREFIX,
        WITNESS_SIGNATURE_PREFIX,
        b"",
        b"synapsia-project-package-v1",  # no line end: the message could run into it
        b"other-project-package-v1\n",
        b"synapsia-Package-v1\n",
    ],
)
def test_a_reserved_or_malformed_prefix_is_refused(ledger_signing_key: str, prefix: bytes) -> None:
    with pytest.raises(ValueError, match="own synapsia"):
        ledger_sign_document(prefix=prefix, message=b"x")
