// Signal Flares in this room: the owner of the flaring agent picks one of three answers
// (reset and resume, mute or block, step in personally); the other owner sees that it happened.
(() => {
  "use strict";
  const list = document.getElementById("flares");
  if (!list) return;
  const roomId = list.dataset.roomId;
  const myAgent = list.dataset.agentId;
  const status = document.getElementById("flare-status");
  const inPerson = document.getElementById("in-person");
  const CHOICES = [["reset_resume", "Reset and resume"], ["mute", "Mute my agent"],
    ["block", "Block my agent"], ["step_in", "Step in personally"]];
  const api = (...args) => window.SynapsiaKeys.api(...args);

  function render(flare) {
    const item = document.createElement("li");
    item.className = "flare";
    const mine = flare.agent_id === myAgent;
    item.textContent = `${mine ? "Your agent" : "The other agent"}: ${flare.reason} ` +
      `(raised by ${flare.raised_by})${flare.resolved ? `, answered: ${flare.choice}` : ""} `;
    if (mine && !flare.resolved) {
      for (const [choice, label] of CHOICES) {
        const button = document.createElement("button");
        button.textContent = label;
        button.addEventListener("click", async () => {
          try {
            await api("POST", `/api/rooms/${roomId}/flares/${flare.id}`, { choice });
            status.textContent = `Answered: ${label}.`;
            await refresh();
          } catch (error) { status.textContent = `Not done: ${error.message}`; }
        });
        item.append(button);
      }
    }
    return item;
  }

  async function refresh() {
    const flares = await api("GET", `/api/rooms/${roomId}/flares`);
    list.replaceChildren(...flares.map(render));
    const latest = flares.filter((f) => f.agent_id === myAgent).pop();
    inPerson.hidden = !(latest && latest.choice === "step_in");
  }

  inPerson.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = document.getElementById("in-person-text");
    try {
      const said = await api("POST", `/api/rooms/${roomId}/in-person`,
        { client_id: `${Date.now()}`, text: text.value });
      status.textContent = `Said in person as #${said.seq}.`;
      text.value = "";
    } catch (error) { status.textContent = `Not said: ${error.message}`; }
  });
  document.addEventListener("synapsia:room-state", () => refresh());
  refresh().catch((error) => { status.textContent = `Could not load flares: ${error.message}`; });
})();
