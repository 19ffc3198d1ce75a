// The room page, live. The owner's socket (docs/protocol.md, session cookie) is only a
// doorbell: on a `message` frame the page asks the server for the new entries in words
// (?part=transcript&after=SEQ, server-rendered and escaped), on a `room_state` frame for the
// state, clocks and controls (?part=status) and the outcome (?part=outcome), and on an
// `outcome_recorded` notice for the outcome. Nothing a frame carries is ever put into the
// page; text we build ourselves goes in with textContent.
(() => {
  "use strict";
  const list = document.getElementById("transcript");
  if (!list) return;
  const status = document.getElementById("connection");
  const roomId = list.dataset.roomId;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const url = `${scheme}://${location.host}/ws/rooms/${roomId}/`;
  let lastSeq = Number(list.dataset.lastSeq || "0");
  let retry = 500;

  // One read in flight per part; a ring while it runs reads once more afterwards.
  function serialised(read) {
    let running = false;
    let again = false;
    const run = async () => {
      if (running) { again = true; return; }
      running = true;
      try { await read(); } catch (error) {
        // Offline for a moment: the next ring reads it again.
      } finally {
        running = false;
        if (again) { again = false; run(); }
      }
    };
    return run;
  }

  async function fragment(query) {
    const response = await fetch(`${location.pathname}?${query}`, { credentials: "same-origin" });
    // Callers word their own failure (or read again at the next ring); no status code here.
    if (!response.ok) throw new Error("The room page could not be read just now.");
    return new DOMParser().parseFromString(await response.text(), "text/html");
  }

  function replaceSection(doc, id) {
    const fresh = doc.getElementById(id);
    const current = document.getElementById(id);
    if (fresh && current) current.replaceWith(document.adoptNode(fresh));
  }

  // A page of earlier messages (?before=N) is history: new messages go on the newest page.
  const live = list.dataset.live !== "false";
  const refreshTranscript = serialised(async () => {
    if (!live) return;
    const doc = await fragment(`part=transcript&after=${lastSeq}`);
    for (const item of Array.from(doc.querySelectorAll("li.entry"))) {
      const seq = Number(item.dataset.seq);
      if (!(seq > lastSeq)) continue;
      list.append(document.adoptNode(item));
      lastSeq = seq;
    }
    list.dataset.lastSeq = String(lastSeq);
    const empty = document.getElementById("transcript-empty");
    if (empty && lastSeq > 0) empty.remove();
    // More were said than one read takes: read on until the page has them all.
    if (doc.getElementById("transcript-more")) refreshTranscript();
  });
  const refreshOutcome = serialised(async () => replaceSection(await fragment("part=outcome"), "room-outcome"));
  const refreshStatus = serialised(async () => replaceSection(await fragment("part=status"), "room-status"));

  // Whisper to the owner's own agent; look up which vault items fed a turn. API calls go
  // through the pages' one helper (devicekeys.js, loaded first), which says failures in words.
  const call = (...args) => window.SynapsiaKeys.api(...args);
  const clock = new Intl.DateTimeFormat("en-GB", {
    timeZone: document.body.dataset.timeZone || undefined, day: "numeric", month: "short",
    hour: "2-digit", minute: "2-digit",
  });
  const whisperForm = document.getElementById("whisper-form");
  if (whisperForm) {
    // One Idempotency-Key per whisper written: sent again (a second click, a retry after a
    // lost answer) it reaches the agent once. New words, or a whisper sent, take a new key.
    const newKey = window.SynapsiaKeys.oneTimeKey;
    let whisperKey = newKey();
    const input = document.getElementById("whisper-text");
    input.addEventListener("input", () => { whisperKey = newKey(); });
    const button = whisperForm.querySelector("button[type=submit]");
    whisperForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (button.disabled) return;
      button.disabled = true;
      const said = document.getElementById("whisper-status");
      try {
        const sent = await call(
          "POST", `/api/rooms/${roomId}/whispers`, { text: input.value },
          { "Idempotency-Key": whisperKey },
        );
        const item = document.createElement("li");
        const who = document.createElement("span");
        who.className = "who";
        who.textContent = "You whispered";
        const when = document.createElement("time");
        when.dateTime = sent.sent_at;
        when.textContent = clock.format(new Date(sent.sent_at));
        const text = document.createElement("span");
        text.className = "said";
        text.textContent = sent.text;
        item.append(who, " ", when, ": ", text);
        document.getElementById("whispers").append(item);
        input.value = "";
        whisperKey = newKey();
        said.textContent = "Whispered to your agent.";
      } catch (error) {
        if (error.code === "whisper_already_added") {
          // The first send got through though its answer did not: it went once.
          input.value = "";
          whisperKey = newKey();
          said.textContent = "Already whispered to your agent (it went once); reload to see it listed.";
        } else {
          said.textContent = `Not whispered: ${error.message}`;
        }
      } finally {
        button.disabled = false;
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
      try {
        const doc = await fragment(
          `part=turn&agent=${encodeURIComponent(agent)}&turn=${encodeURIComponent(turn)}`);
        out.replaceChildren(...Array.from(doc.body.childNodes).map((n) => document.adoptNode(n)));
      } catch (error) {
        out.textContent = "Could not read that turn: check the turn number and try again.";
      }
    });
  }

  function connect() {
    const socket = new WebSocket(url);
    socket.onopen = () => {
      status.textContent = "live";
      retry = 500;
      refreshTranscript(); // anything said while we were away
    };
    socket.onmessage = (event) => {
      const frame = JSON.parse(event.data);
      if (frame.type === "message") {
        if (!(Number(frame.body && frame.body.seq) > lastSeq)) return; // a replay we show
        refreshTranscript();
        refreshOutcome();
        document.dispatchEvent(new CustomEvent("synapsia:room-message"));
      } else if (frame.type === "room_state") {
        refreshStatus();
        refreshOutcome();
        document.dispatchEvent(new CustomEvent("synapsia:room-state"));
      } else if (frame.type === "notice" && frame.body && frame.body.code === "outcome_recorded") {
        refreshOutcome(); // a plan booked (or "no plan" declared) with nothing said after it
      }
    };
    socket.onclose = (event) => {
      if (event.code === 4401) {
        // The sign-in this page was opened with has ended (signed out, password changed,
        // account deactivated, session expired): the room is no longer shown here.
        status.textContent = "Disconnected: the sign-in this page was opened with has ended (signed out, password changed, or session expired). Reload the page; you may be asked to sign in again.";
        return; // retrying on this sign-in will not help
      }
      if (event.code >= 4400 && event.code < 4500) {
        status.textContent = "Disconnected: the room refused this connection. Reload the page.";
        roomGone();
        return; // refused: retrying will not help
      }
      status.textContent = "Reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  // A room deleted while its page is open: its parts answer 404 (as for any room that is not
  // yours), so say so once instead of leaving a page that silently stops moving.
  async function roomGone() {
    try {
      const response = await fetch(`${location.pathname}?part=status`, { credentials: "same-origin" });
      if (response.status !== 404 || document.getElementById("room-gone")) return;
      const notice = document.createElement("p");
      notice.id = "room-gone";
      notice.className = "notice error";
      notice.setAttribute("role", "alert");
      notice.textContent = "This room is gone: it was deleted for both sides. Nothing in it can be read any more.";
      document.getElementById("main").prepend(notice);
    } catch (error) {
      // Offline: the next reload says what happened.
    }
  }
  connect();
})();
