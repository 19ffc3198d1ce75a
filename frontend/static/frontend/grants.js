// Requests waiting for this owner in this room (a fork): each shows, in words the server
// wrote, what the agent asked for (the fork's snapshot) and why it needs the owner, and is
// approved one by one by signing it with this browser's device key (window.SynapsiaKeys,
// devicekeys.js). There is deliberately no "approve all". Re-read whenever the room rings
// (a message or a state change), so a new fork appears without a reload.
(() => {
  "use strict";
  const list = document.getElementById("grant-requests");
  if (!list) return;
  const roomId = list.dataset.roomId;
  const status = document.getElementById("grant-status");
  const GRANT_TAG = "synapsia-grant-v1\n";
  const encoder = new TextEncoder();
  const clock = new Intl.DateTimeFormat("en-GB", {
    timeZone: document.body.dataset.timeZone || undefined, dateStyle: "medium", timeStyle: "short",
  });
  // What the decision did, in words. The server answers the request's status and the rule
  // that decided it; the rule comes first, because the status alone misleads: an action
  // approved after its deadline comes back "denied" (rule grant_expired), and an approval the
  // server could not check leaves a disclosure "pending" (rule grant_check_failed).
  const NOTHING = { action: "nothing was done", disclosure: "nothing was shared" };
  const REFUSED_WORDS = {
    grant_expired: (nothing) => `Not approved: the request had expired, so ${nothing}.`,
    grant_key_not_usable: (nothing) => `Not approved: this browser's device key is not enrolled or was revoked, so ${nothing}. Enroll this device on the Keys page, then approve again.`,
    grant_bad_signature: (nothing) => `Not approved: the server did not accept this device's signature, so ${nothing}. Try again, or enroll this device on the Keys page.`,
    grant_check_failed: (nothing) => `Not approved yet: the server could not check your permission slip just now, so ${nothing}. The request is still waiting: try again in a moment.`,
    grant_slip_changed: (nothing) => `Not approved: your permission slip changed since the room asked, so ${nothing}. If an agent still needs it, the room asks you again under the slip now in force.`,
  };
  const DONE_WORDS = {
    action: {
      executed: "Approved: the action ran.",
      pending: "Approved: sent on, waiting for confirmation.",
      failed: "Approved, but the action failed: nothing was booked or paid.",
    },
    disclosure: {
      approved: "Approved: the item is shared once, on the agent's next turn.",
    },
  };
  function outcomeWords(grant, result, decision) {
    const kind = grant.kind === "disclosure" ? "disclosure" : "action";
    const refused = REFUSED_WORDS[result.rule];
    if (refused) return refused(NOTHING[kind]);
    const done = DONE_WORDS[kind][result.status];
    if (done) return done;
    if (result.status === "denied" && decision === "deny") return `Denied: ${NOTHING[kind]}.`;
    if (result.status === "denied") {
      // Approved, then decided again at once (live policy, slip, room): a grant never
      // overrides a denial. The ledger has the reason in words.
      return `Approved, but the room's checks still refused it, so ${NOTHING[kind]}. The room's ledger says why.`;
    }
    return "Nothing changed: reload the page to see where the request stands.";
  }

  async function decide(grant, decision) {
    const keys = window.SynapsiaKeys;
    const body = { decision };
    if (decision === "approve") {
      const key = await keys.signingKey();
      if (!key) throw new Error("This browser holds no usable device key: enroll one on the Keys page.");
      const message = encoder.encode(GRANT_TAG + keys.canonicalize(grant.payload));
      const signature = await crypto.subtle.sign({ name: "Ed25519" }, key.privateKey, message);
      Object.assign(body, { key_id: key.id, signature: keys.b64url(signature) });
    }
    return keys.api("POST", `/api/rooms/${roomId}/grants/${grant.grant_id}`, body);
  }

  function text(tag, value, className) {
    const node = document.createElement(tag);
    node.textContent = value;
    if (className) node.className = className;
    return node;
  }

  function snapshot(lines) {
    const dl = document.createElement("dl");
    for (const { label, value } of lines || []) dl.append(text("dt", label), text("dd", value));
    return dl;
  }

  function render(grant) {
    const item = document.createElement("li");
    item.className = grant.kind === "disclosure" ? "grant disclosure" : "grant";
    item.dataset.grantId = grant.grant_id;
    const heading = grant.kind === "disclosure"
      ? "The room asks before sharing one of your items" : "Your agent asks to act";
    item.append(text("p", heading, "request-title"));
    // An action comes with its snapshot (tool, venue, time, party, price); a disclosure
    // request with the server's one sentence of what approving shows, and to whom.
    if (grant.summary) item.append(text("p", grant.summary));
    if (grant.snapshot && grant.snapshot.length) item.append(snapshot(grant.snapshot));
    if (grant.reason) item.append(text("p", `Why it needs you: ${grant.reason}`));
    if (grant.expires_at) {
      item.append(text("p", `Answer by ${clock.format(new Date(grant.expires_at))}; after that it counts as denied.`, "muted"));
    }
    if (grant.derived_from_peer) {
      item.append(text("p", "Some of these details repeat what the other agent wrote: check them.", "notice warn"));
    }
    const choices = document.createElement("div");
    choices.className = "choices";
    for (const [label, decision, style] of [["Approve this one action", "approve", ""], ["Deny", "deny", "secondary"]]) {
      const button = text("button", label, style);
      button.type = "button";
      button.addEventListener("click", async () => {
        button.disabled = true;
        try {
          const result = await decide(grant, decision);
          status.textContent = outcomeWords(grant, result, decision);
          await refresh();
        } catch (error) {
          status.textContent = `Not done: ${error.message}`;
          button.disabled = false;
        }
      });
      choices.append(button);
    }
    item.append(choices);
    return item;
  }

  const POLL_MS = 10000;
  let reading = false;
  let again = false;
  let shown = null; // the requests on the page: unchanged ones are left alone (focus stays)
  async function refresh() {
    if (reading) { again = true; return; }
    reading = true;
    try {
      const grants = await window.SynapsiaKeys.api("GET", `/api/rooms/${roomId}/grants`);
      const now = grants.map((g) => `${g.grant_id}:${g.status}`).join(",");
      if (now === shown) return;
      shown = now;
      list.replaceChildren(...grants.map(render));
      list.dataset.count = String(grants.length);
      if (!grants.length) list.append(text("li", "Nothing is waiting for you.", "muted empty"));
    } finally {
      reading = false;
      if (again) { again = false; refresh().catch(() => {}); }
    }
  }

  const quietly = () => refresh().catch((error) => { status.textContent = `Could not load requests: ${error.message}`; });
  document.addEventListener("synapsia:room-state", quietly);
  // Coming back to the tab re-reads too: a request that did not pause the room (a disclosure
  // approval) rings no socket frame of its own.
  document.addEventListener("visibilitychange", () => { if (!document.hidden) quietly(); });
  document.addEventListener("synapsia:room-message", quietly);
  // ...and, while the page is in view, every few seconds: no socket frame announces a
  // disclosure approval to its owner (a room-wide one would reach the agents).
  setInterval(() => { if (!document.hidden) quietly(); }, POLL_MS);
  quietly();
})();
