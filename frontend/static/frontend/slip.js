// The permission-slip checklist for one room. The page is rendered by the server, sentences
// included (frontend/slip_views.py, slips/sentences.py); this script only keeps each sentence in
// step with its "How much" choice, records the chosen tier and narrows the draft to what it
// allows (a tier only takes away: it never checks a box or widens a choice), asks the server
// for the preview of the draft (debounced), and signs: every checked row becomes one
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
  const tierLimits = data("slip-tier-limits") || {};
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

  // --- tiers: a tier only takes away ---------------------------------------------------------
  // Each row's limit under a tier (frontend/slip_views.py tier_limits, worked out on the server
  // from the rule every use is checked by): the scopes it allows, narrowest first, whether the
  // item may leave the room, whether it must ask first; null when the tier allows none of it.
  // Choosing a tier narrows the checked rows to their limits and touches nothing else: it
  // never checks a box, widens a scope, allows onward disclosure or stops asking first, so
  // whatever the owner left unchecked stays unshared. The server narrows every use by the
  // room's tier whatever is signed; this keeps the draft the owner signs honest about it.
  function narrowToTier(tier) {
    const limits = tierLimits[tier];
    const done = { unchecked: 0, narrowed: 0 };
    if (!limits) return done;
    for (const row of rows()) {
      const share = control(row, "share");
      if (!share.checked) continue;
      const limit = limits[row.dataset.row];
      if (!limit) {
        share.checked = false;
        done.unchecked += 1;
        continue;
      }
      let cut = false;
      const scope = control(row, "scope");
      if (!limit.scopes.includes(scope.value)) {
        if (scope.tagName !== "SELECT") { // a single scope the tier does not allow: unshared
          share.checked = false;
          done.unchecked += 1;
          continue;
        }
        scope.value = limit.scopes[limit.scopes.length - 1];
        cut = true;
      }
      const onward = control(row, "onward");
      if (!limit.onward && onward.checked) {
        onward.checked = false;
        cut = true;
      }
      const approval = control(row, "approval");
      if (limit.ask && approval.value !== "per_use") {
        approval.value = "per_use";
        cut = true;
      }
      if (cut) {
        done.narrowed += 1;
        refreshSentence(row);
      }
    }
    return done;
  }

  const items = (n) => `${n} item${n === 1 ? "" : "s"}`;
  function narrowedWords(done) {
    const parts = [];
    if (done.unchecked) parts.push(`unchecked ${items(done.unchecked)}`);
    if (done.narrowed) parts.push(`cut ${items(done.narrowed)} down to what it allows`);
    if (!parts.length) return "Nothing you checked needed to change, and nothing was checked for you.";
    return `Below, it ${parts.join(" and ")}; nothing was checked for you.`;
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
        const done = narrowToTier(tier);
        document.getElementById("room-tier").textContent = result.words;
        replaceList("slip-conflicts", result.conflicts);
        tierStatus.textContent =
          `You chose ${name}. ${event.target.dataset.narrows || ""} ${narrowedWords(done)}`;
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
