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
    list.append(item);
  }

  function connect() {
    const socket = new WebSocket(url);
    socket.onopen = () => { status.textContent = "live"; retry = 500; };
    socket.onmessage = (event) => {
      const frame = JSON.parse(event.data);
      if (frame.type === "message") render(frame.body);
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
