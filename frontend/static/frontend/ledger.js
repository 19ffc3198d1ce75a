// The owner's ledger check. Fetches every event of the room and recomputes the hash chain
// here, with WebCrypto, independently of the server's verdict (encoding: docs/ledger.md).
// Remembers the last verified head per room in localStorage and warns when the server later
// shows a history that does not extend it. Renders server data only via textContent.
(() => {
  "use strict";
  const root = document.getElementById("ledger");
  if (!root) return;
  const roomId = root.dataset.roomId;
  const GENESIS = "0".repeat(64);
  const PREFIX = "synapsia-ledger-head-v1\n";
  const storageKey = `synapsia.ledger.head.${roomId}`;

  // RFC 8785 for the value types the ledger allows: objects, arrays, strings, integers,
  // booleans, null. Floats and unsafe integers are refused (the server never writes them).
  function canonical(value) {
    if (value === null) return "null";
    if (value === true) return "true";
    if (value === false) return "false";
    if (typeof value === "number") {
      if (!Number.isSafeInteger(value)) throw new Error("non-integer number in ledger data");
      return String(value);
    }
    // RFC 8785 string escaping is ECMAScript's JSON.stringify.
    if (typeof value === "string") return JSON.stringify(value);
    if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
    if (typeof value === "object") {
      // Default sort compares UTF-16 code units, which is what RFC 8785 asks for.
      const keys = Object.keys(value).sort();
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
    }
    throw new Error(`unsupported value type ${typeof value}`);
  }

  const hex = (buffer) =>
    Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
  const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

  async function eventHash(event) {
    const envelope = {
      room_id: roomId,
      seq: event.seq,
      kind: event.kind,
      occurred_at: event.occurred_at,
      data: event.data,
      prev_hash: event.prev_hash,
    };
    const bytes = new TextEncoder().encode(canonical(envelope));
    return hex(await crypto.subtle.digest("SHA-256", bytes));
  }

  async function getJSON(url) {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    return response.json();
  }

  async function fetchLedger() {
    let after = 0;
    const events = [];
    let page;
    do {
      page = await getJSON(`/api/rooms/${roomId}/ledger?after=${after}&limit=1000`);
      events.push(...page.events);
      if (page.events.length) after = page.events[page.events.length - 1].seq;
      // Keep reading while pages are full or the head moved past what we have.
    } while (page.next_after !== null || (page.head.seq > after && page.events.length));
    return { events, head: page.head, checkpoint: page.checkpoint, signedHeads: page.signed_heads };
  }

  // Mirrors ledger.chain.chain_check: returns {ok, firstBad, problem, hashes, lastSeq}.
  async function verifyChain({ events, head, checkpoint, signedHeads }) {
    let expectedSeq = checkpoint.seq + 1;
    let expectedPrev = checkpoint.hash;
    const hashes = new Map([[checkpoint.seq, checkpoint.hash]]);
    let lastPurge = null;
    const bad = (seq, problem) => ({ ok: false, firstBad: seq, problem, hashes, lastSeq: expectedSeq - 1 });
    if (checkpoint.seq === 0 && checkpoint.hash !== GENESIS) return bad(1, "chain does not start at genesis");
    for (const event of events) {
      if (event.seq !== expectedSeq) {
        return bad(expectedSeq, event.seq > expectedSeq ? `event ${expectedSeq} is missing` : `event ${event.seq} out of order`);
      }
      if (event.prev_hash !== expectedPrev) return bad(event.seq, "prev_hash does not match the event before it");
      let recomputed;
      try {
        recomputed = await eventHash(event);
      } catch (error) {
        return bad(event.seq, `cannot canonicalise: ${error.message}`);
      }
      if (recomputed !== event.hash) return bad(event.seq, "stored hash does not match the recomputed hash");
      if (event.seq > head.seq) return bad(event.seq, "event lies beyond the head");
      if (event.kind === "retention_purge") lastPurge = event.data;
      hashes.set(event.seq, recomputed);
      expectedSeq = event.seq + 1;
      expectedPrev = recomputed;
    }
    const lastSeq = expectedSeq - 1;
    if (head.seq !== lastSeq || head.hash !== expectedPrev) return bad(Math.min(head.seq, lastSeq) + 1, "the head is not the chain's last event");
    if (checkpoint.seq > 0 && !(lastPurge && lastPurge.through_seq === checkpoint.seq && lastPurge.through_hash === checkpoint.hash)) {
      return bad(checkpoint.seq + 1, "no retention_purge event names the checkpoint");
    }
    for (const signed of signedHeads) {
      if (signed.seq > lastSeq) return bad(lastSeq + 1, `a signed head is at ${signed.seq}: the chain is truncated`);
      if (hashes.has(signed.seq) && hashes.get(signed.seq) !== signed.hash) return bad(signed.seq, "a signed head names a different hash");
    }
    return { ok: true, firstBad: null, problem: "", hashes, lastSeq };
  }

  async function verifySignatures(signedHeads, publishedKey) {
    if (!signedHeads.length) return { state: "none", text: "none yet (heads are signed when the room pauses or closes)" };
    let key;
    try {
      key = await crypto.subtle.importKey("raw", fromBase64(publishedKey), { name: "Ed25519" }, false, ["verify"]);
    } catch (error) {
      return { state: "unsupported", text: `not checked: this browser lacks WebCrypto Ed25519 (${error.message})` };
    }
    for (const signed of signedHeads) {
      if (signed.public_key !== publishedKey) return { state: "broken", text: `head ${signed.seq} is signed by a key the server does not publish` };
      const message = new TextEncoder().encode(
        PREFIX + canonical({ room_id: roomId, seq: signed.seq, hash: signed.hash, signed_at: signed.signed_at }),
      );
      const ok = await crypto.subtle.verify({ name: "Ed25519" }, key, fromBase64(signed.signature), message);
      if (!ok) return { state: "broken", text: `head ${signed.seq}: the signature does not verify` };
    }
    return { state: "verified", text: `${signedHeads.length} verified with the server's published key` };
  }

  // Does the history we just verified extend the head this browser saw last time?
  function compareWithStored(result, ledger) {
    let stored = null;
    try {
      stored = JSON.parse(localStorage.getItem(storageKey) || "null");
    } catch (_) {
      stored = null;
    }
    if (!stored) return { state: "first-visit", text: "first check in this browser; head remembered", stored };
    if (stored.seq > result.lastSeq) {
      return { state: "diverged", text: `WARNING: this browser saw event ${stored.seq} before, but the server now shows history only up to ${result.lastSeq}`, stored };
    }
    if (stored.seq < ledger.checkpoint.seq) {
      return { state: "extends", text: `the part you saw (up to ${stored.seq}) has since been purged under the retention window`, stored };
    }
    if (result.hashes.get(stored.seq) !== stored.hash) {
      return { state: "diverged", text: `WARNING: event ${stored.seq} is not the one this browser saw before: the server's history does not extend it`, stored };
    }
    return { state: "extends", text: `extends the head this browser saw before (${stored.seq})`, stored };
  }

  function show(id, state, text) {
    const node = document.getElementById(id);
    node.dataset.state = state;
    node.textContent = text;
  }

  function renderEvents(events) {
    const body = document.getElementById("ledger-events");
    body.replaceChildren();
    for (const event of events) {
      const row = document.createElement("tr");
      const details = Object.entries(event.data).map(([k, v]) => `${k}=${v}`).join(" ");
      for (const text of [event.seq, event.occurred_at.replace("T", " ").slice(0, 19), event.kind, details]) {
        const cell = document.createElement("td");
        cell.textContent = String(text);
        row.append(cell);
      }
      body.append(row);
    }
  }

  async function run() {
    const [ledger, receipt, published] = await Promise.all([
      fetchLedger(),
      getJSON(`/api/rooms/${roomId}/receipt`),
      getJSON("/api/ledger/public-key").catch(() => null),
    ]);
    const list = document.getElementById("receipt-summary");
    list.replaceChildren(...receipt.summary.map((line) => {
      const item = document.createElement("li");
      item.textContent = line;
      return item;
    }));
    renderEvents(ledger.events);
    document.getElementById("ledger-head").textContent = `seq ${ledger.head.seq}, ${ledger.head.hash}`;

    const result = await verifyChain(ledger);
    root.dataset.firstBad = result.firstBad === null ? "" : String(result.firstBad);
    if (result.ok) show("ledger-verdict", "verified", `verified: ${ledger.events.length} events, every hash recomputed here`);
    else show("ledger-verdict", "broken", `NOT verified: first bad sequence number ${result.firstBad} (${result.problem})`);

    const signatures = published
      ? await verifySignatures(ledger.signedHeads, published.public_key)
      : { state: "unsupported", text: "not checked: the server publishes no key" };
    show("ledger-signatures", signatures.state, signatures.text);

    if (!result.ok) {
      show("ledger-history", "unchecked", "not compared: the chain does not verify");
      return;
    }
    const history = compareWithStored(result, ledger);
    show("ledger-history", history.state, history.text);
    // Only a verified history that extends what we saw may replace the remembered head.
    if (history.state !== "diverged" && signatures.state !== "broken") {
      localStorage.setItem(storageKey, JSON.stringify({ seq: ledger.head.seq, hash: ledger.head.hash }));
    }
  }

  run().catch((error) => show("ledger-verdict", "error", `could not check: ${error.message}`));
})();
