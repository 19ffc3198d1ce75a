// Device keys for permission slips (docs/slips.md). The Ed25519 private key is made here with
// WebCrypto as non-extractable and kept in IndexedDB: it never leaves this browser. Only the
// public key is sent, with a proof of possession (a signature over a server challenge).
// No fallback library: Chromium 137+, Firefox 129+ and Safari 17+ have Ed25519 in WebCrypto.
// Every page that calls the API loads this first, so it also holds the one API call (`api`)
// the other page scripts use, and its failures in words.
(() => {
  "use strict";
  const SLIP_TAG = "synapsia-slip-v1\n";
  const KEY_PROOF_TAG = "synapsia-key-proof-v1\n";
  const DB = "synapsia-device-keys";
  const encoder = new TextEncoder();

  // RFC 8785 for the values signed payloads may hold: objects (keys sorted by UTF-16 code
  // units, which is what Array.prototype.sort compares), arrays, strings (JSON.stringify is
  // the RFC's own string serialisation), safe integers, booleans and null. Text must already
  // be NFC and free of lone surrogates: the server refuses anything else rather than guess.
  function canonicalize(value) {
    if (value === null) return "null";
    if (typeof value === "boolean") return value ? "true" : "false";
    if (typeof value === "number") {
      if (!Number.isSafeInteger(value)) throw new Error("only safe integers can be signed");
      return String(value);
    }
    if (typeof value === "string") {
      if (!value.isWellFormed()) throw new Error("lone surrogate in signed text");
      if (value.normalize("NFC") !== value) throw new Error("signed text must be NFC");
      return JSON.stringify(value);
    }
    if (Array.isArray(value)) return "[" + value.map(canonicalize).join(",") + "]";
    if (typeof value === "object") {
      return "{" + Object.keys(value).sort().map(
        (k) => canonicalize(k) + ":" + canonicalize(value[k])).join(",") + "}";
    }
    throw new Error("cannot sign a " + typeof value);
  }

  function b64url(bytes) {
    let text = "";
    for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
    return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function csrfToken() {
    const input = document.querySelector("[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  // Why a request failed, in words with what to do. The server's own refusals carry a
  // sentence (`message`); for django-ninja's answers (`detail`, no sentence), a proxy's error
  // page or no answer at all the words follow what happened. Never a status code or a parser's
  // message: a person cannot act on those.
  function failureWords(status, data) {
    if (data && typeof data.message === "string" && data.message) return data.message;
    if (status === 401) return "You are signed out: sign in again, then try again.";
    if (status === 403) {
      // django-ninja's CSRF check: the page's token no longer matches the sign-in.
      return "Your sign-in changed since this page was loaded: reload the page, then try again.";
    }
    if (status === 404) return "This is no longer there: reload the page to see what is.";
    if (status === 429) return "Too many requests: wait a moment, then try again.";
    if (status >= 400 && status < 500) {
      return "The server could not accept what this page sent: reload the page, then try again.";
    }
    return "The server could not answer just now: try again in a moment.";
  }

  // One call to the API for every page script (grants, flares, slips, ledger, room): JSON in
  // and out with the session's CSRF token; a failure throws an Error whose message is words
  // (and whose `code` is the server's). `headers`: more of them (an add's Idempotency-Key).
  async function api(method, path, body, headers = {}) {
    let response;
    try {
      response = await fetch(path, {
        method,
        credentials: "same-origin",
        headers: { ...headers, "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (networkError) {
      throw new Error("Could not reach the server: check your connection, then try again.");
    }
    let data = null;
    let unreadable = false;
    if (response.status !== 204) {
      try {
        data = await response.json();
      } catch (parseError) {
        unreadable = true; // not JSON (a proxy's error page, say): answered in words below
      }
    }
    if (!response.ok) {
      const error = new Error(failureWords(response.status, data));
      error.code = data && data.code;
      error.status = response.status;
      throw error;
    }
    if (unreadable) {
      // It may well have been done: say that we cannot tell, not that it failed.
      throw new Error("The server's answer could not be read, so this page cannot tell " +
        "whether it worked: reload the page to see.");
    }
    return data;
  }

  function openDb() {
    return new Promise((resolve, reject) => {
      const request = indexedDB.open(DB, 1);
      request.onupgradeneeded = () => request.result.createObjectStore("keys", { keyPath: "id" });
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  }

  async function store(mode, work) {
    const db = await openDb();
    return new Promise((resolve, reject) => {
      const tx = db.transaction("keys", mode);
      const result = work(tx.objectStore("keys"));
      tx.oncomplete = () => resolve(result.result);
      tx.onerror = () => reject(tx.error);
    });
  }

  const localKeys = () => store("readonly", (s) => s.getAll());
  const localKey = (id) => store("readonly", (s) => s.get(id));

  async function signText(privateKey, tag, text) {
    const signature = await crypto.subtle.sign({ name: "Ed25519" }, privateKey,
      encoder.encode(tag + text));
    return b64url(signature);
  }

  // Make a key, prove it to the server (purpose "enroll", or "rotate" replacing oldKeyId).
  async function enroll(label, oldKeyId) {
    label = label.trim().normalize("NFC");
    const purpose = oldKeyId ? "rotate" : "enroll";
    const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
    const publicKey = b64url(await crypto.subtle.exportKey("raw", pair.publicKey));
    const challenge = await api("POST", "/api/keys/challenge", { purpose });
    const proofPayload = { challenge: challenge.challenge, label, owner_id: challenge.owner_id,
      public_key: publicKey, purpose };
    const proof = await signText(pair.privateKey, KEY_PROOF_TAG, canonicalize(proofPayload));
    const body = { challenge: challenge.challenge, public_key: publicKey, label, proof };
    const key = await api("POST", oldKeyId ? `/api/keys/${oldKeyId}/rotate` : "/api/keys", body);
    await store("readwrite", (s) => s.put({ id: key.id, label, privateKey: pair.privateKey,
      publicKey: pair.publicKey }));
    return key;
  }

  // Pick this browser's newest key the server still lets sign (not rotated, not revoked).
  async function signingKey() {
    const server = await api("GET", "/api/keys");
    const usable = new Set(server.filter((k) => !k.revoked_at && !k.retired_at).map((k) => k.id));
    const mine = (await localKeys()).filter((k) => usable.has(k.id));
    return mine.length ? mine[mine.length - 1] : null;
  }

  async function signSlip(payload) {
    const key = await signingKey();
    if (!key) throw new Error("This browser holds no usable device key: enroll one first.");
    payload = { ...payload, key_id: key.id };
    const text = canonicalize(payload);
    return { payload: text, signature: await signText(key.privateKey, SLIP_TAG, text) };
  }

  // A one-time key for something the owner sends once (a whisper's Idempotency-Key, the id of
  // words said in person): 24 characters of A-Z a-z 0-9 - _.
  const oneTimeKey = () => b64url(crypto.getRandomValues(new Uint8Array(18)));

  window.SynapsiaKeys = { canonicalize, b64url, api, enroll, localKeys, localKey, signingKey,
    signSlip, oneTimeKey, SLIP_TAG, KEY_PROOF_TAG };

  // The keys page, if this is it. The server renders the list (times in the owner's zone, the
  // status in words); this marks the keys held here, and enrolls, rotates and revokes.
  const list = document.getElementById("device-keys");
  const enrollForm = document.getElementById("enroll-form");
  if (!list || !enrollForm) return;
  const status = document.getElementById("keys-status");
  const show = (text) => { status.textContent = text; };
  const reload = () => window.location.reload();

  // A refusal in words: what went wrong and what to do.
  function inWords(error) {
    if (error && error.name === "NotSupportedError") {
      return "this browser cannot make Ed25519 keys. Use a current Chrome, Edge, Firefox or " +
        "Safari, then try again.";
    }
    if (error && error.name === "QuotaExceededError") {
      return "this browser has no room left to keep the key. Free some storage and try again.";
    }
    return (error && error.message) || "something went wrong; try again.";
  }

  async function ed25519Available() {
    if (!window.isSecureContext || !window.crypto || !crypto.subtle) return false;
    try {
      await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
      return true;
    } catch (error) {
      return false;
    }
  }

  async function markLocal() {
    let local = new Set();
    try {
      local = new Set((await localKeys()).map((k) => k.id));
    } catch (error) {
      show(`Cannot read the keys kept in this browser: ${inWords(error)}`);
    }
    for (const item of list.querySelectorAll("li[data-key-id]")) {
      const here = local.has(item.dataset.keyId);
      const badge = item.querySelector(".on-this-device");
      if (badge) badge.hidden = !here;
      const rotate = item.querySelector(".rotate-key");
      if (rotate) rotate.hidden = !here;
    }
  }

  list.addEventListener("click", async (event) => {
    const button = event.target.closest("button");
    const item = button && button.closest("li[data-key-id]");
    if (!item) return;
    const { keyId, label } = item.dataset;
    button.disabled = true;
    try {
      if (button.classList.contains("revoke-key")) {
        await api("POST", `/api/keys/${keyId}/revoke`);
        show(`Revoked ${label}: the slips it signed share nothing from now on.`);
      } else if (button.classList.contains("rotate-key")) {
        const made = await enroll(`${label} (rotated)`.slice(0, 80), keyId);
        show(`Rotated: ${made.label} signs your slips from now on.`);
      }
      reload();
    } catch (error) {
      show(`Nothing changed: ${inWords(error)}`);
      button.disabled = false;
    }
  });

  enrollForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = enrollForm.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const key = await enroll(document.getElementById("key-label").value);
      show(`Enrolled ${key.label}.`);
      reload();
    } catch (error) {
      show(`Could not enroll this device: ${inWords(error)}`);
      button.disabled = false;
    }
  });

  markLocal();
  ed25519Available().then((ok) => {
    if (ok) return;
    enrollForm.querySelector("button[type=submit]").disabled = true;
    show(window.isSecureContext
      ? "This browser cannot make Ed25519 keys, so it cannot sign slips. Use a current Chrome, " +
        "Edge, Firefox or Safari."
      : "Device keys need a secure connection: open Synapsia over HTTPS.");
  });
})();
