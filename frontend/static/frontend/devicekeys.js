// Device keys for permission slips (docs/slips.md). The Ed25519 private key is made here with
// WebCrypto as non-extractable and kept in IndexedDB: it never leaves this browser. Only the
// public key is sent, with a proof of possession (a signature over a server challenge).
// No fallback library: Chromium 137+, Firefox 129+ and Safari 17+ have Ed25519 in WebCrypto.
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

  async function api(method, path, body) {
    const response = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = response.status === 204 ? null : await response.json();
    if (!response.ok) {
      const error = new Error((data && data.message) || `HTTP ${response.status}`);
      error.code = data && data.code;
      throw error;
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

  window.SynapsiaKeys = { canonicalize, b64url, api, enroll, localKeys, localKey, signingKey,
    signSlip, SLIP_TAG, KEY_PROOF_TAG };

  // The keys page, if this is it.
  const list = document.getElementById("device-keys");
  if (!list) return;
  const status = document.getElementById("keys-status");
  const show = (text) => { status.textContent = text; };

  async function render() {
    const local = new Set((await localKeys()).map((k) => k.id));
    list.replaceChildren();
    for (const key of await api("GET", "/api/keys")) {
      const item = document.createElement("li");
      item.dataset.keyId = key.id;
      const state = key.revoked_at ? "revoked" : key.retired_at ? "rotated" : "active";
      item.textContent = `${key.label} · ${state} · created ${key.created_at.slice(0, 10)}` +
        ` · last used ${key.last_used_at ? key.last_used_at.slice(0, 10) : "never"}` +
        (local.has(key.id) ? " · on this device" : "") +
        (key.custody === "demo_seeding" ? " · held by the server (practice demo only)" : "");
      if (state === "active") {
        const revoke = document.createElement("button");
        revoke.textContent = "Revoke";
        revoke.onclick = async () => {
          await api("POST", `/api/keys/${key.id}/revoke`);
          show(`Revoked ${key.label}.`);
          render();
        };
        item.append(" ", revoke);
        if (local.has(key.id)) {
          const rotate = document.createElement("button");
          rotate.textContent = "Rotate";
          rotate.onclick = async () => {
            const made = await enroll(`${key.label} (rotated)`, key.id);
            show(`Rotated to ${made.label}.`);
            render();
          };
          item.append(" ", rotate);
        }
      }
      list.append(item);
    }
  }

  document.getElementById("enroll-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const key = await enroll(document.getElementById("key-label").value);
      show(`Enrolled ${key.label}.`);
      render();
    } catch (error) {
      show(`Could not enroll: ${error.message}`);
    }
  });
  if (!window.isSecureContext || !crypto.subtle) show("Device keys need a secure context (HTTPS).");
  render();
})();
