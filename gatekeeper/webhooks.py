"""Owners' outgoing webhooks: configuration, the signing secret, signatures, one delivery
attempt. Retries are the Celery task's job (``gatekeeper.tasks.webhook_deliver``).

Signing secret: generated here, shown to the owner once, stored sealed with AES-GCM under a
key derived from ``settings.SECRET_KEY`` by HKDF-SHA256 (info ``synapsia-webhook-secret-v1``),
bound to the endpoint id as associated data. It must stay usable (we sign with it), so it is
encrypted rather than hashed. Rotating ``SECRET_KEY`` makes existing secrets unreadable:
deliveries then end ``Refused`` (``webhook_secret_unreadable``) until the owner creates a new
endpoint.

Where we connect: only ``https`` URLs, except hosts listed in
``settings.SYNAPSIA["WEBHOOK_INSECURE_HOSTS"]`` (loopback in the embedded profile, none in
production). For other hosts every resolved address must be a public (global) address, and we
connect to the address we checked (no second lookup for an attacker's DNS to change), with
TLS verified against the host name. Redirects are never followed.

When an endpoint is configured, its host is normalised the way a resolver reads it (``127.1``,
``2130706433`` and ``0x7f.1`` are 127.0.0.1, ``localhost.`` is ``localhost``, an IPv6 form of
an IPv4 address is judged as that address) and a literal address is refused then, with the
reason in words, by the same rule (``webhook_address_refusal``) every delivery applies again
to each address a name resolves to.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import http.client
import ipaddress
import os
import re
import secrets
import socket
import ssl
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import rfc8785
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Q
from django.db.models.functions import Now
from django.utils import timezone

from gatekeeper.add_keys import add_key_check
from gatekeeper.errors import WebhookAlreadyAdded, WebhookConfigInvalid
from gatekeeper.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from gatekeeper.owner_limits import owner_limit_check, owner_row_lock
from gatekeeper.signals import webhook_delivery_settled

SIGNATURE_HEADER = "X-Synapsia-Signature"
IDEMPOTENCY_HEADER = "X-Synapsia-Idempotency-Key"
DELIVERY_HEADER = "X-Synapsia-Delivery"
SECRET_PREFIX = "whsec_"  # noqa: S105 (a label, not a secret)
MAX_URL_CHARS = 2000
MAX_RESPONSE_BYTES = 64 * 1024
_SEAL_VERSION = "v1"
_HKDF_INFO = b"synapsia-webhook-secret-v1"
# Statuses worth retrying: the receiver is overloaded or asked us to come back later.
_RETRY_STATUSES = frozenset({408, 425, 429})


@dataclass(frozen=True)
class IssuedWebhookEndpoint:
    endpoint: WebhookEndpoint
    secret: str  # shown once


class WebhookTransient(Exception):
    """A delivery attempt failed in a way a later attempt may not (5xx, timeout, network)."""

    def __init__(self, reason_code: str, message: str) -> None:
        super().__init__(f"{reason_code}: {message}")
        self.reason_code = reason_code
        self.message = message


class _WebhookRefused(Exception):
    def __init__(self, reason_code: str, message: str) -> None:
        super().__init__(f"{reason_code}: {message}")
        self.reason_code = reason_code
        self.message = message


# --- the secret --------------------------------------------------------------------------------


def _sealing_key() -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO)
    return hkdf.derive(settings.SECRET_KEY.encode())


def webhook_secret_seal(*, endpoint_id: UUID, secret: str) -> str:
    """``v1:<base64(nonce || ciphertext)>``, bound to ``endpoint_id``."""
    nonce = os.urandom(12)
    sealed = AESGCM(_sealing_key()).encrypt(nonce, secret.encode(), endpoint_id.bytes)
    return f"{_SEAL_VERSION}:{base64.b64encode(nonce + sealed).decode()}"


def webhook_secret_open(*, endpoint: WebhookEndpoint) -> bytes:
    """The endpoint's signing secret; ``_WebhookRefused`` if it cannot be opened."""
    version, _, blob = endpoint.secret_sealed.partition(":")
    try:
        if version != _SEAL_VERSION:
            raise ValueError(version)
        raw = base64.b64decode(blob, validate=True)
        return AESGCM(_sealing_key()).decrypt(raw[:12], raw[12:], endpoint.id.bytes)
    except (ValueError, InvalidTag):
        raise _WebhookRefused(
            "webhook_secret_unreadable",
            "The webhook's secret cannot be opened (was SECRET_KEY rotated?); recreate it.",
        ) from None


def webhook_signature(*, secret: bytes, body: bytes) -> str:
    """The ``X-Synapsia-Signature`` value: ``sha256=`` + hex HMAC-SHA256 of the exact body."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def webhook_signature_verify(*, secret: bytes, body: bytes, header: str) -> bool:
    """What a receiver does: recompute over the raw body, compare in constant time."""
    return hmac.compare_digest(webhook_signature(secret=secret, body=body), header)


# --- configuration -----------------------------------------------------------------------------


def _insecure_hosts() -> frozenset[str]:
    return frozenset(
        h.lower().removesuffix(".") for h in settings.SYNAPSIA.get("WEBHOOK_INSECURE_HOSTS", ())
    )


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# One DNS label as a host name may spell it: letters, digits, inner hyphens (RFC 1123).
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
# A last label that URL parsers and resolvers read as a number: all digits, or 0x hex.
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries and may reach (mapped, compatible, 6to4, NAT64,
    Teredo's server), so ``[::ffff:127.0.0.1]`` is judged as ``127.0.0.1``."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[0]
    packed = int(address)
    if packed >> 32 == 0 and packed > 1:  # ::a.b.c.d, the deprecated "compatible" form
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    return None


def webhook_address_refusal(address: IPAddress) -> str | None:
    """Why we will not post to ``address``, in words; None if it is a public address. Used
    when an endpoint is configured and again on every address a delivery resolves."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return "an address scoped to one of the server's own network interfaces"
        inner = _embedded_ipv4(address)
        if inner is not None:
            reason = webhook_address_refusal(inner)
            if reason is not None:
                return f"an IPv6 form of {inner}, which is {reason}"
    if address.is_unspecified:
        return "the unspecified address, which reaches the server itself"
    if address.is_loopback:
        return "this server itself (loopback)"
    if address.is_link_local:
        return "a link-local address (where cloud metadata services answer)"
    if address == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private network address"
    if not address.is_global:
        return "not a public internet address (reserved or shared)"
    return None


def _host_normalise(host: str) -> tuple[str, IPAddress | None]:
    """The host in one canonical spelling and, if it is a literal address, that address.

    Resolvers read ``127.1``, ``2130706433``, ``0x7f.1`` and ``0177.0.0.1`` as 127.0.0.1
    (``inet_aton``); we read them the same way, so they are judged by what they reach, and
    we store the dotted-decimal form. ``ipaddress`` alone refuses those spellings as "not an
    address" and let them through as names. A name loses one trailing dot (``localhost.``
    is ``localhost``). ``WebhookConfigInvalid`` for anything that is neither a literal
    address nor a host name of letters, digits and hyphens.
    """
    if host.startswith("["):
        try:
            v6 = ipaddress.IPv6Address(host[1:-1].replace("%25", "%"))
        except ValueError:
            raise WebhookConfigInvalid("The address in brackets is not an IPv6 address.") from None
        return f"[{v6.compressed}]", v6
    name = host.lower().removesuffix(".")
    try:
        v4 = ipaddress.IPv4Address(socket.inet_aton(name))
    except OSError:
        v4 = None
    if v4 is not None:
        return str(v4), v4
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise WebhookConfigInvalid(
            "The host must be a name of letters, digits, dots and hyphens, or an IP address."
        )
    if _NUMERIC_LABEL.match(labels[-1]):
        raise WebhookConfigInvalid(
            f"{host} is neither a host name nor an IP address (write addresses as four "
            "numbers 0-255, such as 93.184.216.34)."
        )
    return name, None


def webhook_url_check(*, url: str) -> str:
    """The URL in its canonical form, if we may post to it; ``WebhookConfigInvalid`` saying
    why not. Names are resolved (and their addresses checked the same way) at delivery."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise WebhookConfigInvalid(f"A webhook URL is 1-{MAX_URL_CHARS} characters.")
    if not url.isascii() or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise WebhookConfigInvalid("A webhook URL must be plain ASCII without spaces.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise WebhookConfigInvalid("This is not a valid URL.") from None
    raw_host = parts.netloc.rpartition("@")[2]
    if raw_host.startswith("["):
        raw_host = raw_host[: raw_host.find("]") + 1]
    else:
        raw_host = raw_host.partition(":")[0]
    if not raw_host:
        raise WebhookConfigInvalid("A webhook URL needs a host.")
    if parts.username is not None or parts.password is not None:
        raise WebhookConfigInvalid("Credentials in the URL are not allowed; we sign instead.")
    if parts.fragment:
        raise WebhookConfigInvalid("A webhook URL cannot have a #fragment.")
    if parts.scheme not in ("https", "http"):
        raise WebhookConfigInvalid("Webhook URLs must use https.")
    if port == 0:
        raise WebhookConfigInvalid("Port 0 is not a port.")
    host, address = _host_normalise(raw_host)
    insecure_ok = host.strip("[]") in _insecure_hosts()
    if parts.scheme != "https" and not insecure_ok:
        raise WebhookConfigInvalid("Webhook URLs must use https.")
    if not insecure_ok:
        shown = raw_host if raw_host.lower() == host else f"{raw_host} (that is {host})"
        reason = webhook_address_refusal(address) if address is not None else None
        if reason is not None:
            raise WebhookConfigInvalid(f"Webhooks cannot point at {shown}: it is {reason}.")
        if host == "localhost" or host.endswith(".localhost"):
            raise WebhookConfigInvalid(
                f"Webhooks cannot point at {shown}: it is this server itself."
            )
    netloc = host if parts.port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


@transaction.atomic
def webhook_endpoint_create(*, owner: User, url: str, add_key: str = "") -> IssuedWebhookEndpoint:
    """Configure an outgoing webhook for ``owner``; the secret is returned once.

    ``add_key``: the add's one-time key, if it has one (the owner's add form makes one of 43
    characters; an API client may send one as ``Idempotency-Key``;
    ``gatekeeper.add_keys.add_key_check``). The same key with the same address adds one
    webhook (``WebhookAlreadyAdded`` after that): the first answer had the secret, and a
    reload, a second click or a client's retry sends the add again. The form gone back to and
    sent with another address adds that one. An owner has at most their limit of webhooks on
    (``gatekeeper.owner_limits``)."""
    url = webhook_url_check(url=url)
    add_key_check(add_key)
    added_with = hashlib.sha256(f"{add_key}\n{url}".encode()).hexdigest() if add_key else ""
    mine = WebhookEndpoint.objects.filter(owner=owner)
    owner_row_lock(owner)  # before the form's check too: sent twice at once, one adds
    if added_with and mine.filter(added_with=added_with).exists():
        raise WebhookAlreadyAdded(
            "This add (its key and address) has added its webhook already; its signing secret "
            "was in the first answer only.",
            url=url,
        )
    owner_limit_check(owner, "webhooks", mine.filter(active=True))
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    endpoint = WebhookEndpoint(owner=owner, url=url, added_with=added_with)
    endpoint.secret_sealed = webhook_secret_seal(endpoint_id=endpoint.id, secret=secret)
    endpoint.save()
    return IssuedWebhookEndpoint(endpoint=endpoint, secret=secret)


def webhook_endpoint_deactivate(*, owner: User, endpoint_id: UUID) -> bool:
    """Stop using an endpoint (pending deliveries then end refused). False if not the owner's."""
    return bool(WebhookEndpoint.objects.filter(id=endpoint_id, owner=owner).update(active=False))


# --- one attempt -------------------------------------------------------------------------------


# A whole attempt (connect, TLS, send, the answer's status, headers and body) ends within this
# many WEBHOOK_TIMEOUT_SECONDS: that timeout bounds each socket operation only, and a receiver
# answering a byte at a time, each just within it, would otherwise hold a worker for days.
ATTEMPT_TIMEOUTS = 3


def _step_timeout() -> float:
    """WEBHOOK_TIMEOUT_SECONDS: how long one socket operation of an attempt may take."""
    return float(settings.SYNAPSIA.get("WEBHOOK_TIMEOUT_SECONDS", 5.0))


class _AttemptDeadline:
    """Cuts an attempt's connection when its time is up, in whatever phase it is: the socket
    is shut down (not closed: its descriptor stays ours) from a timer thread, so the attempt's
    blocked read or write fails at once. Shut down at once if it comes after the deadline."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.expired:
                self._cut(sock)

    def cancel(self) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._sock is not None:
                self._cut(self._sock)

    @staticmethod
    def _cut(sock: socket.socket) -> None:
        # The plain socket's shutdown, also for a TLS socket: its own would drop its TLS state
        # under the attempt's thread, which is reading through it.
        with contextlib.suppress(OSError):  # closed already: nothing left to cut
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(
        self, host: str, port: int, *, address: str, timeout: float, deadline: _AttemptDeadline
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address
        self._deadline = deadline

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)
        self._deadline.watch(self.sock)


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    """TLS to the address we vetted, with the certificate checked against the host name; the
    handshake within the attempt's deadline too."""

    def connect(self) -> None:
        tcp = socket.create_connection((self._address, self.port), self.timeout)
        tls = ssl.create_default_context().wrap_socket(
            tcp, server_hostname=self.host, do_handshake_on_connect=False
        )
        self._deadline.watch(tls)  # the TLS socket holds the descriptor now
        try:
            tls.do_handshake()
        except BaseException:
            tls.close()
            raise
        self.sock = tls


def _address_for(host: str, port: int) -> str:
    """The address to connect to: any for an insecure-listed host, else public only."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise WebhookTransient("webhook_dns", f"Cannot resolve the webhook host ({exc}).") from None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise WebhookTransient("webhook_dns", "The webhook host has no address.")
    if host.lower().removesuffix(".") not in _insecure_hosts():
        for address in addresses:
            reason = webhook_address_refusal(ipaddress.ip_address(address))
            if reason is not None:
                raise _WebhookRefused(
                    "webhook_address_forbidden",
                    f"The webhook host resolves to {address}, which is {reason}.",
                )
    return addresses[0]


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST once; the response status. Network trouble raises ``WebhookTransient``."""
    # Settings may have changed since it was configured, and a row stored before addresses
    # were normalised is read the way a resolver reads it.
    url = webhook_url_check(url=url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    timeout = _step_timeout()
    address = _address_for(host, port)
    connection_class = _PinnedHTTPSConnection if secure else _PinnedHTTPConnection
    deadline = _AttemptDeadline(ATTEMPT_TIMEOUTS * timeout)
    connection = connection_class(host, port, address=address, timeout=timeout, deadline=deadline)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        # Only the status is used: cut or broken while the body is read, it still answered.
        with contextlib.suppress(OSError, http.client.HTTPException):
            response.read(MAX_RESPONSE_BYTES)
        return response.status
    except TimeoutError:
        raise WebhookTransient("webhook_timeout", f"No answer within {timeout:g}s.") from None
    except ssl.SSLCertVerificationError as exc:
        raise _WebhookRefused("webhook_tls_invalid", f"TLS verification failed ({exc}).") from None
    except (OSError, http.client.HTTPException) as exc:
        if deadline.expired:
            raise WebhookTransient(
                "webhook_timeout", f"No whole answer within {deadline.seconds:g}s."
            ) from None
        raise WebhookTransient("webhook_network", f"{type(exc).__name__}: {exc}") from None
    finally:
        deadline.cancel()
        connection.close()


# How long one attempt holds its delivery at least: twice what an attempt may take
# (``_AttemptDeadline``) if that is longer, and a hold left by a worker that died mid-attempt
# ends well before the beat queues the delivery again (DELIVERY_LOST_AFTER).
ATTEMPT_HOLD = timedelta(minutes=2)


def _attempt_hold(*, delivery_id: UUID) -> bool:
    """Take a pending delivery for one attempt, counting it, unless another attempt holds it
    (one statement: of two copies of its task running at once, one posts). With a worker it
    commits on its own, before the POST; the hold ends when the attempt is recorded. The
    hold's end is set and compared on the database's clock, the one clock every worker
    shares: a worker whose own clock ran ahead would take a hold still in force."""
    hold = max(ATTEMPT_HOLD, timedelta(seconds=2 * ATTEMPT_TIMEOUTS * _step_timeout()))
    until = ExpressionWrapper(Now() + hold, output_field=DateTimeField())
    taken = (
        WebhookDelivery.objects.filter(id=delivery_id, status=DeliveryStatus.PENDING)
        .filter(Q(attempt_until__isnull=True) | Q(attempt_until__lte=Now()))
        .update(attempt_until=until, attempts=F("attempts") + 1)
    )
    return taken == 1


def _finish(delivery: WebhookDelivery, status: str, reason_code: str, message: str) -> str:
    delivery.status = status
    delivery.reason_code = reason_code
    delivery.message = message[:300]
    delivery.finished_at = timezone.now()
    delivery.attempt_until = None
    delivery.save(
        update_fields=[
            "status",
            "reason_code",
            "message",
            "finished_at",
            "last_status_code",
            "attempt_until",
        ]
    )
    # Its action's agent was told "pending" and waits: told once this status commits (in the
    # embedded profile the act that dispatched the delivery settles it itself).
    key = delivery.idempotency_key
    transaction.on_commit(
        lambda: webhook_delivery_settled.send(sender=WebhookDelivery, idempotency_key=key),
        robust=True,
    )
    return status


def webhook_delivery_attempt(*, delivery_id: UUID, last_attempt: bool) -> str:
    """Make one attempt at a pending delivery and record it; returns the delivery's status.

    Raises ``WebhookTransient`` when a retry may succeed and this is not ``last_attempt``;
    on the last attempt a transient failure is recorded as final ``unavailable`` instead.
    A delivery that is already final, or held by another copy's attempt still in flight
    (``_attempt_hold``), is left alone: that copy posts nothing and returns the status.
    """
    if not _attempt_hold(delivery_id=delivery_id):
        return str(WebhookDelivery.objects.values_list("status", flat=True).get(id=delivery_id))
    delivery = WebhookDelivery.objects.select_related("endpoint").get(id=delivery_id)
    endpoint = delivery.endpoint
    try:
        if not endpoint.active:
            raise _WebhookRefused("webhook_endpoint_inactive", "The webhook was switched off.")
        secret = webhook_secret_open(endpoint=endpoint)
        body = delivery.body.encode()
        status = _post(
            endpoint.url,
            body,
            {
                "Content-Type": "application/json",
                "User-Agent": "Synapsia-Webhook/1",
                SIGNATURE_HEADER: webhook_signature(secret=secret, body=body),
                IDEMPOTENCY_HEADER: delivery.idempotency_key,
                DELIVERY_HEADER: str(delivery.id),
            },
        )
        delivery.last_status_code = status
        if 200 <= status < 300:
            return _finish(delivery, DeliveryStatus.SUCCEEDED, "", "")
        if status >= 500 or status in _RETRY_STATUSES:
            raise WebhookTransient("webhook_http_status", f"The receiver answered {status}.")
        if 300 <= status < 400:
            raise _WebhookRefused("webhook_redirect", f"The receiver redirected ({status}).")
        raise _WebhookRefused("webhook_rejected", f"The receiver refused with {status}.")
    except _WebhookRefused as exc:
        return _finish(delivery, DeliveryStatus.REFUSED, exc.reason_code, exc.message)
    except WebhookConfigInvalid as exc:
        return _finish(delivery, DeliveryStatus.REFUSED, exc.code, exc.message)
    except WebhookTransient as exc:
        if last_attempt:
            return _finish(delivery, DeliveryStatus.UNAVAILABLE, exc.reason_code, exc.message)
        delivery.reason_code, delivery.message = exc.reason_code, exc.message[:300]
        delivery.attempt_until = None  # the next attempt is the task's retry, or any copy's
        delivery.save(update_fields=["last_status_code", "reason_code", "message", "attempt_until"])
        raise


# A delivery still pending this long after its task was queued was lost on its way to a
# worker (the process stopped between the commit and the queueing, or the broker lost the
# task): its own retries end within minutes (gatekeeper.tasks: at most 4, backed off by at
# most 8 s each, each attempt within WEBHOOK_TIMEOUT_SECONDS).
DELIVERY_LOST_AFTER = timedelta(minutes=10)
LOST_BATCH = 500  # deliveries queued again per run at most, the oldest first


def webhook_deliveries_lost(*, now: datetime | None = None) -> list[UUID]:
    """The pending deliveries whose task was queued more than ``DELIVERY_LOST_AFTER`` ago,
    each marked queued ``now``, for the caller to queue again (``gatekeeper.tasks``). A copy
    of a task that was only slow posts nothing while the first's attempt is in flight or once
    it has finished (``_attempt_hold``), and receivers deduplicate on the idempotency key in
    any case."""
    now = now or timezone.now()
    lost = WebhookDelivery.objects.filter(
        status=DeliveryStatus.PENDING, queued_at__lte=now - DELIVERY_LOST_AFTER
    )
    with transaction.atomic():  # each one marked by one run only, even were there two beats
        ids = list(
            lost.select_for_update(skip_locked=True)
            .order_by("queued_at")
            .values_list("id", flat=True)[:LOST_BATCH]
        )
        WebhookDelivery.objects.filter(id__in=ids).update(queued_at=now)
    return ids


def webhook_delivery_create(
    *,
    delivery_id: UUID,
    endpoint: WebhookEndpoint,
    idempotency_key: str,
    tool: str,
    arguments_sha256: str,
    body: bytes,
) -> tuple[WebhookDelivery, bool]:
    """The delivery for this key: (row, created). Racing creators end with one row."""
    try:
        with transaction.atomic():
            return (
                WebhookDelivery.objects.create(
                    id=delivery_id,
                    endpoint=endpoint,
                    idempotency_key=idempotency_key,
                    tool=tool,
                    arguments_sha256=arguments_sha256,
                    body=body.decode(),
                ),
                True,
            )
    except IntegrityError:
        existing = WebhookDelivery.objects.filter(idempotency_key=idempotency_key).first()
        if existing is None:
            raise
        return existing, False


def webhook_body(**fields: Any) -> bytes:
    """The canonical (RFC 8785) JSON body: the exact bytes that are signed."""
    return rfc8785.dumps(fields)
