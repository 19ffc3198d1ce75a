// The owner's ledger check. Fetches every event of the room and recomputes the hash chain
// here, with WebCrypto, independently of the server's verdict (encoding: docs/ledger.md).
// Remembers the last verified head per room in localStorage and warns when the server later
// shows a history that does not extend it. Renders server data only via textContent.
// Each event's ``words`` (the server's sentence for it) is shown, never hashed: the check
// below reads only the hashed envelope, so what is verified is the raw data, not the words.
// After a clean check it countersigns the latest server-signed head with the owner's device
// key (devicekeys.js; the key never leaves this browser): a witness the server's database
// cannot make. Every owner's witness is a checkpoint the record must extend, and the
// witnesses made here are remembered, so a server that later drops one is caught.
(() => {
  "use strict";
  const root = document.getElementById("ledger");
  if (!root) return;
  const roomId = root.dataset.roomId;
  const GENESIS = "0".repeat(64);
  const PREFIX = "synapsia-ledger-head-v1\n";
  const WITNESS_PREFIX = "synapsia-ledger-witness-v1\n";
  const storageKey = `synapsia.ledger.head.${roomId}`;
  // Per owner too: two owners may share a browser, and a witness is its owner's.
  const witnessKey = (viewer) => `synapsia.ledger.witness.${roomId}.${viewer}`;

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
    return {
      events, head: page.head, checkpoint: page.checkpoint, signedHeads: page.signed_heads,
      policy: page.policy, witnesses: page.witnesses || [], viewer: page.viewer_owner_id,
      asOf: page.as_of,
    };
  }

  // Mirrors ledger.chain.chain_check: returns {ok, firstBad, problem, hashes, lastSeq}.
  // ``problem`` says in words what is wrong at ``firstBad``.
  // Mirrors ledger.chain.head_rules_problem: the record cannot do without its signed heads
  // (one at every pause, close and purge, and at least every N events), and a purge must
  // keep to the stated retention window and agree with every head signed before it.
  const REQUIRES_HEAD = { room_paused: "a pause", room_closed: "the room's closing", retention_purge: "a retention purge" };
  const DAY_MS = 86400 * 1000;

  const chainMs = (text) => Date.parse(text.replace(/(\.\d{3})\d*Z$/, "$1Z"));

  function headRulesProblem(marks, signedHeads, checkpointSeq, lastSeq, policy, tail, now) {
    const heads = [...signedHeads].sort((a, b) => a.seq - b.seq);
    const latest = heads.length ? heads[heads.length - 1].seq : -1;
    for (const mark of marks) {
      if (latest < mark.seq) return [mark.seq, `it records ${REQUIRES_HEAD[mark.kind]}, which the server always signs, but no signature covers it (signatures were removed, or the event was written without the server)`];
    }
    const n = policy.head_every_events;
    let previous = checkpointSeq;
    for (const point of [...heads.filter((h) => h.seq > checkpointSeq).map((h) => h.seq), lastSeq]) {
      if (point - previous > n) return [previous + n + 1, `more than ${n} events follow #${previous} without a signature by the server, which signs at least every ${n}`];
      previous = Math.max(previous, point);
    }
    // The server signs a quiet room's events within T: judged by this browser's own clock.
    if (tail && Number.isInteger(policy.head_grace_seconds) && now - chainMs(tail.occurred_at) > policy.head_grace_seconds * 1000) {
      return [tail.seq, `it was recorded more than ${Math.round(policy.head_grace_seconds / 60)} minutes ago and no signature by the server covers it, though the server signs within ${Math.round((policy.head_every_seconds || 3600) / 60)} minutes: signatures were removed`];
    }
    for (const mark of marks) {
      if (mark.kind !== "retention_purge") continue;
      const data = mark.data;
      if (!Number.isInteger(data.window_days) || data.window_days < policy.retention_days) {
        return [mark.seq, `it purges events after ${data.window_days} days, but the room keeps them ${policy.retention_days} days`];
      }
      const latestAllowed = Date.parse(mark.occurred_at) - policy.retention_days * DAY_MS + policy.head_grace_seconds * 1000;
      for (const signed of heads) {
        if (signed.seq > data.through_seq) break;
        if (signed.seq === data.through_seq && signed.hash !== data.through_hash) return [mark.seq, "the purge names a last removed event the server signed differently"];
        if (signed.seq > 0 && Date.parse(signed.signed_at) > latestAllowed) {
          return [mark.seq, `it claims to have purged events up to #${data.through_seq} as older than ${policy.retention_days} days, but the server signed #${signed.seq} more recently than that, so this purge is not allowed`];
        }
      }
    }
    return null;
  }

  // Witnesses this browser made, kept across visits (the server may lose or drop its rows).
  function rememberedWitnesses(viewer) {
    try {
      const list = JSON.parse(localStorage.getItem(witnessKey(viewer)) || "[]");
      return Array.isArray(list) ? list : [];
    } catch (_) {
      return [];
    }
  }

  function remember(viewer, witness) {
    const list = rememberedWitnesses(viewer).filter((w) => !(w.seq === witness.seq && w.key_id === witness.key_id));
    list.push({ seq: witness.seq, hash: witness.hash, signed_at: witness.signed_at, key_id: witness.key_id, witnessed_at: witness.witnessed_at });
    localStorage.setItem(witnessKey(viewer), JSON.stringify(list));
  }

  const sameHead = (a, b) => a.seq === b.seq && a.hash === b.hash && a.signed_at === b.signed_at;

  async function verifyChain({ events, head, checkpoint, signedHeads, policy, witnesses = [], asOf }) {
    let expectedSeq = checkpoint.seq + 1;
    let expectedPrev = checkpoint.hash;
    const hashes = new Map([[checkpoint.seq, checkpoint.hash]]);
    let lastPurge = null;
    const marks = [];
    const bad = (seq, problem) => ({ ok: false, firstBad: seq, problem, hashes, lastSeq: expectedSeq - 1 });
    if (checkpoint.seq === 0 && checkpoint.hash !== GENESIS) return bad(1, "the record does not start at its beginning");
    for (const event of events) {
      if (event.seq !== expectedSeq) {
        return bad(expectedSeq, event.seq > expectedSeq ? `event #${expectedSeq} is missing` : `event #${event.seq} is out of order`);
      }
      if (event.prev_hash !== expectedPrev) return bad(event.seq, "it does not link to the event before it");
      let recomputed;
      try {
        recomputed = await eventHash(event);
      } catch (_) {
        return bad(event.seq, "its content is not in the form the ledger writes");
      }
      if (recomputed !== event.hash) return bad(event.seq, "its content does not match the fingerprint recorded for it");
      if (event.seq > head.seq) return bad(event.seq, "it lies beyond what the server calls its latest event");
      if (event.kind === "retention_purge") lastPurge = event.data;
      if (Object.hasOwn(REQUIRES_HEAD, event.kind)) marks.push(event);
      hashes.set(event.seq, recomputed);
      expectedSeq = event.seq + 1;
      expectedPrev = recomputed;
    }
    const lastSeq = expectedSeq - 1;
    if (head.seq !== lastSeq || head.hash !== expectedPrev) return bad(Math.min(head.seq, lastSeq) + 1, "the server's latest event is not the record's last one");
    if (checkpoint.seq > 0 && !(lastPurge && lastPurge.through_seq === checkpoint.seq && lastPurge.through_hash === checkpoint.hash)) {
      return bad(checkpoint.seq + 1, "no purge event accounts for the events removed before it");
    }
    for (const signed of signedHeads) {
      if (signed.seq > lastSeq) return bad(lastSeq + 1, `the server once signed the record up to #${signed.seq}, so events after #${lastSeq} are missing`);
      if (hashes.has(signed.seq) && hashes.get(signed.seq) !== signed.hash) return bad(signed.seq, "the server signed a different version of this event");
    }
    // Owners' witnesses (and the ones this browser made): checkpoints the record must extend,
    // even if the server re-signed a rewritten record with its own key.
    for (const witness of witnesses) {
      const who = witness.by_you ? "you" : (witness.owner_name || "an owner");
      if (!signedHeads.some((signed) => sameHead(signed, witness))) return bad(witness.seq, `${who} confirmed the record up to here, but the server's signature that was confirmed is gone`);
      if (witness.seq > lastSeq) return bad(lastSeq + 1, `${who} confirmed the record up to #${witness.seq}, so events after #${lastSeq} are missing`);
      if (hashes.has(witness.seq) && hashes.get(witness.seq) !== witness.hash) return bad(witness.seq, `${who} confirmed a different version of this event`);
    }
    if (policy) {
      const tailSeq = Math.max(checkpoint.seq, ...signedHeads.map((h) => h.seq)) + 1;
      const tail = events.find((event) => event.seq === tailSeq) || null;
      // This browser's clock, unless the server's reads earlier (a clock running fast must
      // not make an honest record look cut; a database writer cannot set the server's clock).
      const served = asOf ? chainMs(asOf) : NaN;
      const now = Number.isNaN(served) ? Date.now() : Math.min(Date.now(), served);
      const broken = headRulesProblem(marks, signedHeads, checkpoint.seq, lastSeq, policy, tail, now);
      if (broken) return bad(broken[0], broken[1]);
    }
    return { ok: true, firstBad: null, problem: "", hashes, lastSeq };
  }

  async function verifySignatures(signedHeads, publishedKey) {
    if (!signedHeads.length) return { state: "none", text: "None yet. The server signs the record each time the room pauses, closes or purges old events, and at least every few dozen events." };
    let key;
    try {
      key = await crypto.subtle.importKey("raw", fromBase64(publishedKey), { name: "Ed25519" }, false, ["verify"]);
    } catch (_) {
      return { state: "unsupported", text: "Not checked: this browser cannot check the server's signatures (Ed25519). The record itself was still checked." };
    }
    for (const signed of signedHeads) {
      if (signed.public_key !== publishedKey) return { state: "broken", text: `Broken: the signature at event #${signed.seq} was made with a key the server does not publish.` };
      const message = new TextEncoder().encode(
        PREFIX + canonical({ room_id: roomId, seq: signed.seq, hash: signed.hash, signed_at: signed.signed_at }),
      );
      const ok = await crypto.subtle.verify({ name: "Ed25519" }, key, fromBase64(signed.signature), message);
      if (!ok) return { state: "broken", text: `Broken: the server's signature at event #${signed.seq} does not check out.` };
    }
    const n = signedHeads.length;
    return { state: "verified", text: `Intact: ${n} signature${n === 1 ? "" : "s"} by the server check${n === 1 ? "s" : ""} out with its published key.` };
  }

  // Each witness must be a valid Ed25519 signature by the key it names over exactly its
  // fields: an edited witness is as broken as an edited event.
  async function witnessesValid(witnesses) {
    for (const witness of witnesses) {
      const message = new TextEncoder().encode(WITNESS_PREFIX + canonical({
        room_id: roomId, seq: witness.seq, hash: witness.hash, signed_at: witness.signed_at,
        owner_id: witness.owner_id, key_id: witness.key_id,
      }));
      const key = await crypto.subtle.importKey("raw", fromBase64(witness.public_key), { name: "Ed25519" }, false, ["verify"]);
      if (!(await crypto.subtle.verify({ name: "Ed25519" }, key, fromBase64(witness.signature), message))) return witness;
    }
    return null;
  }

  // Countersign the latest head the server signed (the record checked out up to there) with
  // this owner's device key, unless one of their keys already did.
  async function confirm(ledger) {
    const heads = [...ledger.signedHeads].sort((a, b) => a.seq - b.seq);
    const target = heads[heads.length - 1];
    if (!target) return { state: "none", text: "Nothing to confirm yet: the server has not signed this record." };
    const mine = ledger.witnesses.filter((w) => w.by_you);
    const done = mine.find((w) => sameHead(w, target));
    if (done) return { state: "confirmed", witness: done };
    const keys = window.SynapsiaKeys;
    if (!keys || !window.isSecureContext) {
      return { state: "no-key", help: true, text: "Not added: this browser cannot sign with a device key here, so it cannot add your confirmation. The record itself was still checked." };
    }
    let key;
    try {
      key = await keys.signingKey();
    } catch (_) {
      key = null;
    }
    if (!key) {
      return { state: "no-key", help: true, text: "Not added: this browser holds no device key of yours, so it cannot add your confirmation. The record itself was still checked." };
    }
    const text = canonical({ room_id: roomId, seq: target.seq, hash: target.hash, signed_at: target.signed_at, owner_id: ledger.viewer, key_id: key.id });
    let signature;
    try {
      signature = await crypto.subtle.sign({ name: "Ed25519" }, key.privateKey, new TextEncoder().encode(WITNESS_PREFIX + text));
    } catch (_) {
      return { state: "no-key", help: true, text: "Not added: this browser could not sign with your device key. The record itself was still checked." };
    }
    try {
      const witness = await keys.api("POST", `/api/rooms/${roomId}/ledger/witnesses`, {
        seq: target.seq, hash: target.hash, signed_at: target.signed_at, key_id: key.id,
        signature: keys.b64url(signature),
      });
      return { state: "confirmed", witness };
    } catch (error) {
      return { state: "error", text: `Your confirmation could not be added: ${error.message}` };
    }
  }

  // Does the history we just verified extend the head this browser saw last time?
  function compareWithStored(result, ledger) {
    let stored = null;
    try {
      stored = JSON.parse(localStorage.getItem(storageKey) || "null");
    } catch (_) {
      stored = null;
    }
    if (!stored) return { state: "first-visit", text: `First check in this browser. It remembers this point (#${result.lastSeq}) and will warn you if the server later shows a different history.`, stored };
    if (stored.seq > result.lastSeq) {
      return { state: "diverged", text: `Warning: this browser saw event #${stored.seq} before, but the server now shows the record only up to #${result.lastSeq}. Events were removed.`, stored };
    }
    if (stored.seq < ledger.checkpoint.seq) {
      return { state: "extends", text: `The part you saw before (up to #${stored.seq}) has since been purged under the room's retention window, so it can no longer be compared.`, stored };
    }
    if (result.hashes.get(stored.seq) !== stored.hash) {
      return { state: "diverged", text: `Warning: event #${stored.seq} is not the one this browser saw before. The server's history was rewritten, though it checks out on its own.`, stored };
    }
    return { state: "extends", text: `Consistent: the record only grew since this browser saw it (up to #${stored.seq}).`, stored };
  }

  function show(id, state, text) {
    const node = document.getElementById(id);
    node.dataset.state = state;
    node.textContent = text;
  }

  function explain(kind, text) {
    const node = document.getElementById("ledger-meaning");
    node.className = `notice ${kind}`;
    node.textContent = text;
    node.hidden = false;
  }

  // The owner's zone from <body data-time-zone>; a zone this browser does not know falls
  // back to UTC rather than stopping the check.
  function formatter(zone) {
    try {
      return new Intl.DateTimeFormat("en-GB", { timeZone: zone, dateStyle: "medium", timeStyle: "short" });
    } catch (_) {
      return new Intl.DateTimeFormat("en-GB", { timeZone: "UTC", dateStyle: "medium", timeStyle: "short" });
    }
  }
  const when = formatter(document.body.dataset.timeZone || "UTC");

  function whenText(occurredAt) {
    // The chain writes microseconds; Date reads milliseconds.
    const moment = new Date(occurredAt.replace(/(\.\d{3})\d*Z$/, "$1Z"));
    return Number.isNaN(moment.getTime()) ? "" : when.format(moment);
  }

  function renderEvents(events) {
    const list = document.getElementById("ledger-events");
    list.replaceChildren();
    for (const event of events) {
      const item = document.createElement("li");
      item.className = "ledger-event";
      item.dataset.seq = String(event.seq);
      const words = document.createElement("p");
      words.className = "ledger-event-words";
      words.textContent = event.words || "An event the server did not describe.";
      const meta = document.createElement("p");
      meta.className = "ledger-event-meta muted";
      const number = document.createElement("span");
      number.textContent = `#${event.seq}`;
      const time = document.createElement("time");
      time.dateTime = event.occurred_at;
      time.textContent = whenText(event.occurred_at);
      meta.append(number, " · ", time);
      item.append(words, meta);
      list.append(item);
    }
  }

  // After the check: which events are trustworthy, and where it breaks.
  function markEvents(firstBad) {
    for (const item of document.querySelectorAll("#ledger-events .ledger-event")) {
      const seq = Number(item.dataset.seq);
      item.dataset.trust = firstBad === null || seq < firstBad ? "verified" : "unverified";
      if (seq === firstBad) {
        const badge = document.createElement("span");
        badge.className = "badge danger";
        badge.textContent = "The check fails here";
        item.querySelector(".ledger-event-meta").append(" ", badge);
      }
    }
  }

  async function run() {
    const [ledger, receipt, published] = await Promise.all([
      fetchLedger(),
      getJSON(`/api/rooms/${roomId}/receipt`),
      getJSON("/api/ledger/public-key").catch(() => null),
    ]);
    const list = document.getElementById("receipt-summary");
    list.replaceChildren(...(receipt.words || []).map((line) => {
      const item = document.createElement("li");
      item.textContent = line;
      return item;
    }));
    renderEvents(ledger.events);
    document.getElementById("ledger-head-seq").textContent = ledger.head.seq ? `#${ledger.head.seq}` : "none yet";
    document.getElementById("ledger-head").textContent = ledger.head.hash;

    // Witnesses this browser made but the server no longer lists still bind the record.
    const remembered = rememberedWitnesses(ledger.viewer);
    const dropped = remembered.filter((kept) => !ledger.witnesses.some((w) => w.key_id === kept.key_id && sameHead(w, kept)));
    const result = await verifyChain({ ...ledger, witnesses: [...ledger.witnesses, ...dropped.map((w) => ({ ...w, by_you: true }))] });
    root.dataset.firstBad = result.firstBad === null ? "" : String(result.firstBad);
    markEvents(result.firstBad);
    const count = ledger.events.length;
    if (result.ok) {
      show("ledger-verdict", "verified", `Intact: all ${count} event${count === 1 ? "" : "s"} check out, each fingerprint recomputed in this browser.`);
    } else {
      show("ledger-verdict", "broken", `Broken at event #${result.firstBad}: ${result.problem}.`);
      explain("error", `Something in this record was changed, removed or added after it was written, at event #${result.firstBad} or just before it. ` +
        `The events before #${result.firstBad} check out; from #${result.firstBad} on, do not rely on what the list says. ` +
        "Download the record as evidence and tell the other owner.");
    }

    const signatures = published
      ? await verifySignatures(ledger.signedHeads, published.public_key)
      : { state: "unsupported", text: "Not checked: the server publishes no signing key right now." };
    show("ledger-signatures", signatures.state, signatures.text);

    if (!result.ok) {
      show("ledger-history", "unchecked", "Not compared: the record does not check out.");
      show("ledger-witness", "not-offered", "Not offered: you can only confirm a record that checks out.");
      return;
    }
    const history = compareWithStored(result, ledger);
    show("ledger-history", history.state, history.text);
    if (history.state === "diverged") {
      explain("warn", "The server's record does not continue the one this browser saw before. " +
        "Whoever controls the server's database may have rewritten the room's history. " +
        "Keep any record you downloaded earlier, and compare with the other owner.");
    }
    // Only a verified history that extends what we saw may replace the remembered head.
    if (history.state !== "diverged" && signatures.state !== "broken") {
      localStorage.setItem(storageKey, JSON.stringify({ seq: ledger.head.seq, hash: ledger.head.hash }));
    }
    await showConfirmation(ledger, signatures, history, dropped);
  }

  function othersWords(ledger) {
    const latest = new Map();
    for (const witness of ledger.witnesses) {
      if (witness.by_you) continue;
      const before = latest.get(witness.owner_name);
      if (!before || before.seq < witness.seq) latest.set(witness.owner_name, witness);
    }
    return [...latest.values()].map((w) => ` ${w.owner_name} confirmed it up to event #${w.seq} on ${whenText(w.witnessed_at)}.`).join("");
  }

  async function showConfirmation(ledger, signatures, history, dropped) {
    if (dropped.length) {
      const lost = dropped[dropped.length - 1];
      show("ledger-witness", "missing", `Warning: you confirmed this record up to event #${lost.seq} on ${whenText(lost.witnessed_at)}, but the server no longer shows your confirmation.`);
      explain("warn", "The server dropped a confirmation this browser made. Whoever controls the server's database may be hiding a change to the room's history. " +
        "Keep any record you downloaded earlier, and compare with the other owner.");
      return;
    }
    if (signatures.state === "none") {
      show("ledger-witness", "none", "Nothing to confirm yet: the server has not signed this record.");
      return;
    }
    if (signatures.state !== "verified" || history.state === "diverged") {
      show("ledger-witness", "not-offered", "Not offered: you confirm only a record whose signatures check out in this browser and that continues the one you saw before." + othersWords(ledger));
      return;
    }
    let bad = null;
    try {
      bad = await witnessesValid(ledger.witnesses);
    } catch (_) {
      bad = null; // cannot check Ed25519 here: signatures said so already
    }
    if (bad) {
      show("ledger-witness", "broken", `Broken: the confirmation of event #${bad.seq} stored with this record does not check out, so it was changed after it was made.`);
      return;
    }
    const outcome = await confirm(ledger);
    document.getElementById("ledger-witness-help").hidden = !outcome.help;
    if (outcome.state !== "confirmed") {
      show("ledger-witness", outcome.state, outcome.text + othersWords(ledger));
      return;
    }
    remember(ledger.viewer, outcome.witness);
    show("ledger-witness", "confirmed", `You confirmed this record on ${whenText(outcome.witness.witnessed_at)} (up to event #${outcome.witness.seq}).` + othersWords(ledger));
  }

  run().catch(() => {
    show("ledger-verdict", "error", "Could not check: the record could not be fetched. Reload the page to try again.");
    show("ledger-witness", "not-offered", "Not offered: the record could not be checked.");
  });
})();
