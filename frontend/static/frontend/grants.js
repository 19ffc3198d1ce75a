// Grant requests waiting for this owner in this room (a fork): each shows exactly what the
// agent asked for, and is approved one by one by signing it with this browser's device key
// (window.SynapsiaKeys, devicekeys.js). There is deliberately no "approve all".
(() => {
  "use strict";
  const list = document.getElementById("grant-requests");
  if (!list) return;
  const roomId = list.dataset.roomId;
  const status = document.getElementById("grant-status");
  const GRANT_TAG = "synapsia-grant-v1\n";
  const encoder = new TextEncoder();

  function line(label, value) {
    const row = document.createElement("div");
    const name = document.createElement("strong");
    name.textContent = `${label}: `;
    const text = document.createElement("span");
    text.textContent = value;
    row.append(name, text);
    return row;
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

  function render(grant) {
    const item = document.createElement("li");
    item.className = "grant";
    item.dataset.grantId = grant.grant_id;
    item.append(
      line("Action", grant.tool),
      line("Arguments", JSON.stringify(grant.arguments)),
      line("Why it needs you", grant.reason_rule),
      line("Expires", new Date(grant.expires_at).toLocaleString()),
    );
    if (grant.derived_from_peer) {
      const warning = document.createElement("p");
      warning.className = "notice error";
      warning.textContent = "Some of these arguments repeat what the other agent wrote.";
      item.append(warning);
    }
    for (const [label, decision] of [["Approve this one action", "approve"], ["Deny", "deny"]]) {
      const button = document.createElement("button");
      button.textContent = label;
      button.addEventListener("click", async () => {
        button.disabled = true;
        try {
          const result = await decide(grant, decision);
          status.textContent = `${grant.tool}: ${result.status} (${result.rule})`;
          await refresh();
        } catch (error) {
          status.textContent = `Not done: ${error.message}`;
          button.disabled = false;
        }
      });
      item.append(button);
    }
    return item;
  }

  async function refresh() {
    const grants = await window.SynapsiaKeys.api("GET", `/api/rooms/${roomId}/grants`);
    list.replaceChildren(...grants.map(render));
    list.dataset.count = String(grants.length);
  }

  document.addEventListener("synapsia:room-state", () => refresh());
  refresh().catch((error) => { status.textContent = `Could not load requests: ${error.message}`; });
})();
