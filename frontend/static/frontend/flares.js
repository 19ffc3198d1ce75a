// Signal Flares in this room, in the server's words: the owner of the flaring agent answers
// with one of three choices (reset and resume; mute or block; step in personally); the other
// owner sees that it happened and why, without the buttons.
(() => {
  "use strict";
  const list = document.getElementById("flares");
  if (!list) return;
  const roomId = list.dataset.roomId;
  const myAgent = list.dataset.agentId;
  const status = document.getElementById("flare-status");
  const inPerson = document.getElementById("in-person");
  const api = (...args) => window.SynapsiaKeys.api(...args);
  // The three choices the spec gives; "mute or block" is one choice with two buttons.
  const CHOICES = [
    ["Reset and resume", [["reset_resume", "Reset and resume", ""]]],
    ["Mute or block your agent", [["mute", "Mute (it stays, silent)", "secondary"], ["block", "Block (it leaves the room)", "danger"]]],
    ["Step in personally", [["step_in", "Step in and speak myself", "secondary"]]],
  ];
  const ANSWERED = {
    reset_resume: "Reset and resumed.", mute: "Your agent is muted.",
    block: "Your agent is blocked.", step_in: "You stepped in: speak below.",
  };

  function text(tag, value, className) {
    const node = document.createElement(tag);
    node.textContent = value;
    if (className) node.className = className;
    return node;
  }

  function render(flare) {
    const item = document.createElement("li");
    item.className = flare.resolved ? "flare answered" : "flare open";
    const mine = flare.agent_id === myAgent;
    item.append(text("p", flare.reason_sentence, "request-title"));
    if (flare.raised_by_words) item.append(text("p", flare.raised_by_words, "muted"));
    if (flare.resolved) {
      item.append(text("p", flare.choice_words));
    } else if (!mine) {
      item.append(text("p", `Waiting for ${flare.owner_name} to answer it; the room stays paused until then.`, "muted"));
    } else {
      const choices = document.createElement("div");
      choices.className = "choices";
      for (const [, buttons] of CHOICES) {
        for (const [choice, label, style] of buttons) {
          const button = text("button", label, style);
          button.type = "button";
          button.addEventListener("click", async () => {
            button.disabled = true;
            try {
              await api("POST", `/api/rooms/${roomId}/flares/${flare.id}`, { choice });
              status.textContent = ANSWERED[choice];
              await refresh();
            } catch (error) {
              status.textContent = `Not done: ${error.message}`;
              button.disabled = false;
            }
          });
          choices.append(button);
        }
      }
      item.append(choices);
    }
    return item;
  }

  async function refresh() {
    const flares = await api("GET", `/api/rooms/${roomId}/flares`);
    list.replaceChildren(...flares.map(render));
    if (!flares.length) list.append(text("li", "No flares in this room.", "muted empty"));
    const latest = flares.filter((f) => f.agent_id === myAgent).pop();
    inPerson.hidden = !(latest && latest.choice === "step_in");
  }

  // One id per message written: sent again (a second click, a retry after a lost answer) the
  // room records it once (the server keeps a message's id). New words take a new id.
  const newId = window.SynapsiaKeys.oneTimeKey;
  const spoken = document.getElementById("in-person-text");
  const sayButton = inPerson.querySelector("button[type=submit]");
  let clientId = newId();
  spoken.addEventListener("input", () => { clientId = newId(); });
  inPerson.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (sayButton.disabled) return;
    sayButton.disabled = true;
    try {
      await api("POST", `/api/rooms/${roomId}/in-person`, { client_id: clientId, text: spoken.value });
      status.textContent = "Said in person.";
      spoken.value = "";
      clientId = newId();
    } catch (error) {
      status.textContent = `Not said: ${error.message}`;
    } finally {
      sayButton.disabled = false;
    }
  });
  const quietly = () => refresh().catch((error) => { status.textContent = `Could not load flares: ${error.message}`; });
  document.addEventListener("synapsia:room-state", quietly);
  // Coming back to the tab re-reads too: a request that did not pause the room (a disclosure
  // approval) rings no socket frame of its own.
  document.addEventListener("visibilitychange", () => { if (!document.hidden) quietly(); });
  quietly();
})();
