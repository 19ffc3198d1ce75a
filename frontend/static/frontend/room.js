// Live transcript for an owner watching a room. Speaks the documented room protocol
// (docs/protocol.md) over the session cookie; renders text only via textContent.
(() => {
  "use strict";
  const list = document.getElementById("transcript");
  if (!list) return;
  const status = document.getElementById("connection");
  const stateBadge = document.getElementById("room-state");
  const seen = new Set();
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const url = `${scheme}://${location.host}/ws/rooms/${list.dataset.roomId}/`;
  let retry = 500;

  function render(body) {
    if (seen.has(body.seq)) return;
    seen.add(body.seq);
    const item = document.createElement("li");
    item.value = body.seq;
    const who = document.createElement("strong");
    who.textContent = `agent ${body.sender_agent_id.slice(0, 8)}: `;
    const text = document.createElement("span");
    text.textContent = body.text;
    item.append(who, text);
    if (body.flags && body.flags.length) {
      const flags = document.createElement("em");
      flags.className = "flags";
      flags.textContent = ` ⚑ ${body.flags.join(", ")}`;
      item.append(flags);
    }
    list.append(item);
  }

  // Whisper to the owner's own agent, and look up which vault items fed a turn.
  function csrf() {
    const input = document.querySelector("[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }
  async function call(method, path, body) {
    const response = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json();
    if (!response.ok) throw new Error(data.message || `HTTP ${response.status}`);
    return data;
  }
  const roomId = list.dataset.roomId;
  const whisperForm = document.getElementById("whisper-form");
  if (whisperForm) {
    whisperForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const input = document.getElementById("whisper-text");
      const status = document.getElementById("whisper-status");
      try {
        const sent = await call("POST", `/api/rooms/${roomId}/whispers`, { text: input.value });
        const item = document.createElement("li");
        item.textContent = sent.text;
        document.getElementById("whispers").append(item);
        input.value = "";
        status.textContent = "whispered";
      } catch (error) {
        status.textContent = error.message;
      }
    });
  }
  const turnForm = document.getElementById("turn-form");
  if (turnForm) {
    turnForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const agent = document.getElementById("turn-agent").value;
      const turn = document.getElementById("turn-number").value;
      const out = document.getElementById("turn-items");
      out.replaceChildren();
      try {
        const data = await call(
          "GET", `/api/rooms/${roomId}/turns/${encodeURIComponent(turn)}?agent=${encodeURIComponent(agent)}`);
        for (const entry of data.items) {
          const item = document.createElement("li");
          item.textContent = `ledger #${entry.ledger_seq}: item ${entry.item_id} of owner ${entry.owner_id}`;
          out.append(item);
        }
        if (!data.items.length) out.textContent = "No vault item fed that turn.";
      } catch (error) {
        out.textContent = error.message;
      }
    });
  }

  // The outcome (agreed plan or no agreement) is re-read from the server whenever the room
  // moves (a message or a state change): the socket has no outcome frame of its own, and the
  // words come from the server, never from a frame. At most one read in flight.
  let outcomeReading = false;
  let outcomeAgain = false;
  async function refreshOutcome() {
    const section = document.getElementById("room-outcome");
    if (!section) return;
    if (outcomeReading) { outcomeAgain = true; return; }
    outcomeReading = true;
    try {
      const response = await fetch(`${location.pathname}?part=outcome`, { credentials: "same-origin" });
      if (response.ok) {
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html")
          .getElementById("room-outcome");
        if (fresh) document.getElementById("room-outcome").replaceWith(document.adoptNode(fresh));
      }
    } catch (error) {
      // Offline for a moment: the next message or state change reads it again.
    } finally {
      outcomeReading = false;
      if (outcomeAgain) { outcomeAgain = false; refreshOutcome(); }
    }
  }
  document.addEventListener("synapsia:room-state", () => refreshOutcome());

  function connect() {
    const socket = new WebSocket(url);
    socket.onopen = () => { status.textContent = "live"; retry = 500; };
    socket.onmessage = (event) => {
      const frame = JSON.parse(event.data);
      if (frame.type === "message") { render(frame.body); refreshOutcome(); }
      else if (frame.type === "room_state") {
        stateBadge.textContent = frame.body.state;
        document.dispatchEvent(new CustomEvent("synapsia:room-state", { detail: frame.body.state }));
      }
    };
    socket.onclose = (event) => {
      status.textContent = `disconnected (code ${event.code})`;
      if (event.code >= 4400 && event.code < 4500) return; // refused: retrying will not help
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  connect();
})();
