// The permission-slip checklist for one room. Every box starts unchecked (unchecked means
// unshared); each checked item becomes one capability record; the payload is canonicalised
// (RFC 8785), prefixed with the slip domain tag and signed by this device's key.
(() => {
  "use strict";
  const form = document.getElementById("slip-form");
  if (!form) return;
  const K = window.SynapsiaKeys;
  const roomId = form.dataset.roomId;
  const status = document.getElementById("slip-status");
  const rows = document.getElementById("slip-items");
  let template = null;

  // Words for every code (from the page; see frontend.slip_views.SLIP_WORDS). A code the page
  // has no words for is shown as it is rather than hidden.
  const wordsElement = document.getElementById("slip-words");
  const words = wordsElement ? JSON.parse(wordsElement.textContent) : {};
  const say = (group, code) => (words[group] && words[group][code]) || code;

  function select(name, group, options) {
    const element = document.createElement("select");
    element.name = name;
    for (const value of options) element.append(new Option(say(group, value), value));
    return element;
  }

  // A visible label around a control, so every control has one.
  function labelled(text, control) {
    const label = document.createElement("label");
    label.append(`${text} `, control);
    return label;
  }

  function row(resource, scopes, operations, recipients) {
    const item = document.createElement("li");
    item.dataset.resource = resource;
    const box = document.createElement("input");
    box.type = "checkbox";
    box.name = "share";
    box.checked = false; // unchecked means unshared
    const label = document.createElement("label");
    label.className = "slip-resource";
    label.append(box, ` ${say("resources", resource)} `);
    const uses = document.createElement("input");
    uses.type = "number";
    uses.name = "max_uses";
    uses.min = "1";
    uses.max = "1000";
    uses.value = "1";
    const onward = document.createElement("input");
    onward.type = "checkbox";
    onward.name = "onward";
    const onwardLabel = document.createElement("label");
    onwardLabel.append(onward, " may carry it out of the room ");
    item.append(label,
      labelled("What:", select("scope", "scopes", scopes)),
      labelled("How:", select("operation", "operations", operations)),
      labelled("For:", select("recipient", "recipients", recipients)),
      labelled("Times it may be used:", uses), " ", onwardLabel,
      labelled("Approval:", select("approval", "approvals", template.approvals)));
    rows.append(item);
  }

  function capabilities() {
    const records = [];
    for (const item of rows.querySelectorAll("li")) {
      if (!item.querySelector("[name=share]").checked) continue;
      const value = (name) => item.querySelector(`[name=${name}]`).value;
      records.push({
        resource: item.dataset.resource,
        operation: value("operation"),
        scope: value("scope"),
        recipient: value("recipient"),
        max_uses: parseInt(value("max_uses"), 10),
        onward_disclosure: item.querySelector("[name=onward]").checked,
        approval: value("approval"),
      });
    }
    return records;
  }

  async function load() {
    template = await K.api("GET", `/api/rooms/${roomId}/slip-template`);
    for (const [kind, scopes] of Object.entries(template.resources)) {
      row(kind, scopes, ["read", "disclose"], template.recipients);
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      // A fresh nonce and issued_at for every signature; the rest comes from the template.
      const fresh = await K.api("GET", `/api/rooms/${roomId}/slip-template`);
      const payload = { ...fresh.payload, capabilities: capabilities() };
      const signed = await K.signSlip(payload);
      const slip = await K.api("POST", `/api/rooms/${roomId}/slips`, signed);
      const count = slip.capabilities.length;
      status.textContent = `Signed: ${count} item${count === 1 ? "" : "s"} shared as you chose.`;
      status.dataset.slipId = slip.id;
    } catch (error) {
      status.textContent = `Not signed: ${error.message}`;
    }
  });
  load().catch((error) => { status.textContent = `Cannot load the slip: ${error.message}`; });
})();
