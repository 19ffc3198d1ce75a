// The permission-slip checklist for one room. The page is rendered by the server, sentences
// included (frontend/slip_views.py, slips/sentences.py); this script only keeps each sentence in
// step with its "How much" choice, records the chosen tier and applies its preset, asks the
// server for the preview of the draft (debounced), and signs: every checked row becomes one
// capability record; the payload is canonicalised (RFC 8785), prefixed with the slip domain tag
// and signed by this device's key (devicekeys.js). Text is only ever set with textContent.
(() => {
  "use strict";
  const form = document.getElementById("slip-form");
  if (!form) return;
  const K = window.SynapsiaKeys;
  const roomId = form.dataset.roomId;
  const status = document.getElementById("slip-status");
  const previewBox = document.getElementById("slip-preview");
  const tierForm = document.getElementById("tier-form");
  const tierStatus = document.getElementById("tier-status");

  const data = (id) => {
    const element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  };
  const sentences = data("slip-sentences") || {};
  const presets = data("slip-presets") || {};
  const current = data("slip-current") || [];

  const rows = () => Array.from(form.querySelectorAll("li.slip-row"));
  const control = (row, name) => row.querySelector(`[name=${name}]`);

  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function refreshSentence(row) {
    const d = row.dataset;
    const sentence = sentences[`${d.resource}|${d.operation}|${control(row, "scope").value}|${d.recipient}`];
    if (sentence) row.querySelector(".slip-sentence").textContent = sentence;
  }

  // One checked row -> one capability record. issuedAt: the template's, to place an earlier end.
  function record(row, issuedAt) {
    const d = row.dataset;
    const uses = parseInt(control(row, "max_uses").value, 10);
    const result = {
      resource: d.resource,
      operation: d.operation,
      scope: control(row, "scope").value,
      recipient: d.recipient,
      max_uses: Number.isSafeInteger(uses) ? Math.min(Math.max(uses, 1), 1000) : 1,
      onward_disclosure: control(row, "onward").checked,
      approval: control(row, "approval").value,
    };
    const expiry = control(row, "expiry").value;
    if (expiry !== "slip") result.expires_at = issuedAt + parseInt(expiry, 10);
    return result;
  }

  const capabilities = (issuedAt) =>
    rows().filter((row) => control(row, "share").checked).map((row) => record(row, issuedAt));

  // --- the preview, from the server's own scoped view ----------------------------------------
  let timer = null;
  let asked = 0;
  function schedulePreview() {
    clearTimeout(timer);
    timer = setTimeout(preview, 300);
  }

  function renderPreview(result) {
    const parts = [];
    for (const agent of result.agents) {
      const box = element("section", undefined, "slip-preview-agent");
      box.dataset.recipient = agent.recipient;
      box.append(element("h3", agent.agent));
      if (!agent.items.length) {
        box.append(element("p", "Nothing from your vault.", "muted"));
      } else {
        const list = element("ul", undefined, "stack");
        for (const item of agent.items) {
          const entry = element("li");
          entry.dataset.resource = item.resource;
          entry.append(element("strong", item.title));
          const lines = element("ul");
          for (const line of item.shown) lines.append(element("li", line));
          entry.append(lines);
          if (item.note) entry.append(element("p", item.note, "help"));
          list.append(entry);
        }
        box.append(list);
      }
      parts.push(box);
    }
    const tier = element("div", undefined, "slip-preview-tier");
    tier.append(element("p", `Under ${result.tier_name}: ${result.tier_effect}`, "muted"));
    if (result.held_back.length) {
      tier.append(element("p", `${result.tier_name} keeps these from every agent:`));
      const list = element("ul");
      for (const sentence of result.held_back) list.append(element("li", sentence));
      tier.append(list);
    }
    parts.push(tier);
    previewBox.replaceChildren(...parts);
  }

  async function preview() {
    const mine = ++asked;
    try {
      const issuedAt = Math.floor(Date.now() / 1000);
      const result = await K.api("POST", `/api/rooms/${roomId}/slip-preview`,
        { capabilities: capabilities(issuedAt) });
      if (mine === asked) renderPreview(result);
    } catch (error) {
      if (mine === asked) {
        previewBox.replaceChildren(element("p", `The preview is not available: ${error.message}`));
      }
    }
  }

  // --- tiers and presets ---------------------------------------------------------------------
  function applyPreset(tier) {
    const chosen = presets[tier] || {};
    for (const row of rows()) {
      const scope = chosen[row.dataset.row];
      control(row, "share").checked = scope !== undefined;
      const select = control(row, "scope");
      if (scope !== undefined && select.tagName === "SELECT") select.value = scope;
      refreshSentence(row);
    }
  }

  function replaceList(id, sentences) {
    const list = document.getElementById(id);
    if (!list) return;
    list.replaceChildren(...sentences.map((s) => element("li", s)));
    const box = document.getElementById(`${id}-box`);
    if (box) box.hidden = sentences.length === 0;
  }

  if (tierForm) {
    tierForm.addEventListener("change", async (event) => {
      const tier = event.target.value;
      const name = event.target.labels && event.target.labels[0] ? event.target.labels[0].textContent : tier;
      try {
        const result = await K.api("PUT", `/api/rooms/${roomId}/tier`, { tier });
        applyPreset(tier);
        document.getElementById("room-tier").textContent = result.words;
        replaceList("slip-conflicts", result.conflicts);
        tierStatus.textContent = `You chose ${name}. ${event.target.dataset.preset || ""}`.trim();
      } catch (error) {
        tierStatus.textContent = `Your tier was not changed: ${error.message}`;
      }
      schedulePreview();
    });
  }

  // --- start from the slip in force, if there is one ----------------------------------------
  // Each row takes the record that clears the same thing for its agent, as the Gatekeeper
  // picks it (for the own agent a "read" record before a "disclose" one); a record for both
  // agents fills both rows, and signed again becomes one record per agent, which clears the
  // same.
  function prefill(row, signed) {
    control(row, "share").checked = true;
    const select = control(row, "scope");
    if (select.tagName === "SELECT") select.value = signed.scope;
    control(row, "max_uses").value = String(signed.max_uses);
    control(row, "approval").value = signed.approval;
    control(row, "onward").checked = signed.onward_disclosure;
    refreshSentence(row);
  }
  const covers = (recipient, who) => recipient === "both" || recipient === who;
  for (const row of rows()) {
    const d = row.dataset;
    const mine = current.filter((c) => c.resource === d.resource);
    const find = (operation, who) =>
      mine.find((c) => c.operation === operation && covers(c.recipient, who));
    let source;
    if (d.operation === "act") source = mine.find((c) => c.operation === "act");
    else if (d.recipient === "own_agent") source = find("read", "own_agent") || find("disclose", "own_agent");
    else source = find("disclose", "peer_agent");
    if (source) prefill(row, source);
  }

  form.addEventListener("change", (event) => {
    const row = event.target.closest("li.slip-row");
    if (row) refreshSentence(row);
    schedulePreview();
  });
  form.addEventListener("input", (event) => {
    if (event.target.name === "max_uses") schedulePreview();
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    status.textContent = "Signing…";
    try {
      if (!window.isSecureContext || !crypto.subtle) {
        throw new Error("this page needs a secure connection (HTTPS) to use your device key.");
      }
      // A fresh nonce and issued_at for every signature; the rest comes from the template.
      const fresh = await K.api("GET", `/api/rooms/${roomId}/slip-template`);
      // A new slip must be issued after the one in force: signing twice within one second
      // moves this one a second on (well inside the server's allowed clock skew).
      const after = parseInt(form.dataset.inForceIssuedAt || "0", 10);
      const shift = Math.max(0, after + 1 - fresh.payload.issued_at);
      const issuedAt = fresh.payload.issued_at + shift;
      const payload = { ...fresh.payload, issued_at: issuedAt,
        expires_at: fresh.payload.expires_at + shift, capabilities: capabilities(issuedAt) };
      const signed = await K.signSlip(payload);
      const slip = await K.api("POST", `/api/rooms/${roomId}/slips`, signed);
      const count = slip.capabilities.length;
      status.textContent = `Signed: ${count} item${count === 1 ? "" : "s"} shared as you chose.`;
      // Reload to show the slip in force and what changed, as the server words them.
      // (No fragment: a URL differing only in its fragment would not reload the page.)
      window.location.assign(`${window.location.pathname}?signed=1`);
    } catch (error) {
      status.textContent = `Not signed: ${error.message}`;
      button.disabled = false;
    }
  });

  // Just signed: bring the slip in force (and what changed) into view.
  if (new URLSearchParams(window.location.search).get("signed") === "1") {
    const signed = document.getElementById("slip-in-force");
    if (signed) signed.scrollIntoView();
  }
  preview();
})();
